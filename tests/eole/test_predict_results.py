"""What ``eole predict`` writes when fewer than n_best hypotheses have nonzero probability, down to a
sentence whose whole support the constraints removed (Eole's own result code, patched), and the analyses
an ensemble takes."""
from types import SimpleNamespace

import pytest
import torch
from eole.inputters.inputter import dict_to_vocabs
from eole.predict.inference import Inference
from eole.predict.prediction import PredictionBuilder
from torch import nn

from onmt_entmax.eole.decoding.translator import decoding_config
from onmt_entmax.errors import ConfigError
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.registry import get_transformation

TOKENS = ["<unk>", "<blank>", "<s>", "</s>", "a", "b", "c", "d"]
EOS, NEG_INF = 3, float("-inf")


def test_sentences_keep_only_their_nonzero_hypotheses_and_an_empty_support_keeps_one_line():
    strategy = SimpleNamespace(  # what the patched beam search leaves: 2 hypotheses, then none at all
        predictions=[[torch.tensor([4, 5, EOS]), torch.tensor([6, EOS])], []],
        scores=[[torch.tensor(-0.25), torch.tensor(-1.5)], []],
        attention=[[[], []], []], n_text_tokens=[[2, 1], []])
    batch = {"src": torch.tensor([[4, 5, 6], [7, 1, 1]]), "srclen": torch.tensor([3, 1]), "ind_in_bucket": [0, 1]}
    predictor = SimpleNamespace(report_align=False, _tgt_eos_idx=[EOS])
    results = Inference.report_results(predictor, [0, 0], None, batch, 2, strategy, [[1.0] * 3, [1.0] * 3])
    builder = PredictionBuilder(dict_to_vocabs({"src": TOKENS, "tgt": TOKENS}), n_best=3, tgt_eos_idx=[EOS])
    first, empty = builder.from_batch(results)
    assert first.pred_sents == [["a", "b"], ["c"]] and [float(s) for s in first.pred_scores] == [-0.25, -1.5]
    assert empty.pred_sents == [[]] and float(empty.pred_scores[0]) == NEG_INF and len(empty.estim) == 1


def _ensemble(*names):
    members = [EntmaxGenerator.from_linear(nn.Linear(4, 8), get_transformation(name)) for name in names]
    return SimpleNamespace(generator=SimpleNamespace(model_generators=members))


def test_an_ensembles_analyses_are_checked_against_every_member():
    """Sparse members only: certified and enumerable like one sparse model. A dense member gives every
    sequence nonzero probability, so the certificate and the enumeration are refused, naming it."""
    both = decoding_config(SimpleNamespace(enumerate_support=True), _ensemble("entmax15", "sparsemax"))
    assert both.sparse_output and both.certificate and both.enumerate_support
    assert not decoding_config(SimpleNamespace(), _ensemble("entmax15", "softmax")).certificate
    with pytest.raises(ConfigError, match="enumerate_support needs a sparse output layer.*entmax15/softmax"):
        decoding_config(SimpleNamespace(enumerate_support=True), _ensemble("entmax15", "softmax"))
