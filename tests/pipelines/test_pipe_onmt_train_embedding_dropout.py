"""onmt_train_embedding_dropout.py: OpenNMT-py's embeddings built with the dropout given instead of
-dropout, the rest of the model untouched."""
from types import SimpleNamespace

import pytest

from pipeline_helpers import load_script

script = load_script("scripts/reproduce/onmt_train_embedding_dropout.py")


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


def test_a_dropout_outside_zero_to_one_is_refused_before_training(capsys):
    with pytest.raises(SystemExit):
        script.main(["--embedding_dropout", "1", "-config", "nowhere.yaml"])
    assert "--embedding_dropout 1.0: give a probability in [0, 1)" in capsys.readouterr().err
