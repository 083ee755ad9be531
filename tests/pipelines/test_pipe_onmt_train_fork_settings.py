"""onmt_train_fork_settings.py: OpenNMT-py's Adam built with the ε given instead of its hard-coded 1e-8, its
embeddings with the dropout given instead of -dropout, the rest of the model untouched."""
from types import SimpleNamespace

import pytest
import torch

from pipeline_helpers import load_script

script = load_script("scripts/reproduce/onmt_train_fork_settings.py")


def test_opennmt_builds_adam_with_the_given_eps(monkeypatch):
    from onmt.utils.optimizers import build_torch_optimizer

    monkeypatch.setattr(torch.optim, "Adam", torch.optim.Adam)  # (restored after the test)
    opt = SimpleNamespace(optim="adam", learning_rate=1e-3, adam_beta1=0.9, adam_beta2=0.999,
                          model_dtype="fp32", apex_opt_level="")
    model = torch.nn.Linear(3, 2)
    assert build_torch_optimizer(model, opt).param_groups[0]["eps"] == 1e-8  # OpenNMT-py 3.5.1's own
    script.set_adam_eps(1e-9)
    assert build_torch_optimizer(model, opt).param_groups[0]["eps"] == 1e-9
    script.set_adam_eps(1e-7)  # (again: the new ε, not the first replacement's)
    assert build_torch_optimizer(model, opt).param_groups[0]["eps"] == 1e-7


def test_a_non_positive_eps_is_refused_before_training(capsys):
    with pytest.raises(SystemExit):
        script.main(["--adam_eps", "0", "-config", "nowhere.yaml"])
    assert "--adam_eps 0.0: give a number above 0" in capsys.readouterr().err


def _embeddings():
    from onmt.model_builder import build_embeddings

    opt = SimpleNamespace(src_word_vec_size=8, position_encoding=False, position_encoding_type="SinusoidalInterleaved",
                          feat_merge="concat", feat_vec_exponent=0.7, feat_vec_size=-1, dropout=[0.3],
                          freeze_word_vecs_enc=False, optim="adam")
    return build_embeddings(opt, {"src": {"<blank>": 0, "a": 1, "b": 2}}, for_encoder=True)


def test_opennmt_builds_embeddings_with_the_given_dropout(monkeypatch):
    from onmt.modules.embeddings import Embeddings

    monkeypatch.setattr(Embeddings, "__init__", Embeddings.__init__)  # (restored after the test)
    upstream = Embeddings.__init__
    assert _embeddings().dropout_p == 0.3  # OpenNMT-py 3.5.1's own: -dropout
    script.set_embedding_dropout(0.0)
    script.set_embedding_dropout(0.0)  # (twice: still one wrapper around upstream's)
    emb = _embeddings()
    assert emb.dropout_p == 0.0 and emb.dropout.p == 0.0
    assert Embeddings.__init__.__wrapped__ is upstream


@pytest.mark.parametrize("args, says", [(["--embedding_dropout", "1"], "--embedding_dropout 1.0: give a probability in [0, 1)"),
                                        ([], "give --adam_eps, --embedding_dropout or both")])
def test_settings_out_of_range_or_none_at_all_are_refused_before_training(args, says, capsys):
    with pytest.raises(SystemExit):
        script.main([*args, "-config", "nowhere.yaml"])
    assert says in capsys.readouterr().err
