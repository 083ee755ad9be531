"""No code runs from a checkpoint: every load path the plugin activates reads weights-only with an
allowlist, even under TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (torch 2.1-2.5's default). A refusal is one
line; library callers get a ValueError subclass."""
import argparse
import sys

import pytest
import torch

from onmt_testkit import build_vocab, run_console, train, yaml_config

from onmt_entmax.analysis.checkpoint import CheckpointError, check_torch


class WritesAFile:
    """Unpickling it writes ``marker`` (what a hostile checkpoint would do, harmlessly)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('pwned')",)


@pytest.fixture
def evil(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "generator": {}, "vocab": {}, "opt": WritesAFile(marker)}, path)
    return path, marker


def test_the_payload_is_live_without_weights_only(evil):
    path, marker = evil
    torch.load(path)  # upstream's plain torch.load, under the variable the fixture sets: the payload runs
    assert marker.exists()


def _refused(call, path, marker):
    with pytest.raises(CheckpointError, match=f"{path.name}: refused: loading it would call exec"):
        call()
    assert not marker.exists()


def test_translate_train_from_and_the_api_load_weights_only(evil):
    import onmt.model_builder
    import onmt.train_single
    from onmt.bin.translate import _get_parser

    path, marker = evil
    assert onmt.train_single.load_checkpoint is onmt.model_builder.load_checkpoint  # -train_from's function
    _refused(lambda: onmt.train_single.load_checkpoint(str(path)), path, marker)
    opt = _get_parser().parse_args(["-model", str(path), "-src", "x"])
    _refused(lambda: onmt.model_builder.load_test_model(opt), path, marker)
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    _refused(lambda: SparseDecoder(str(path)), path, marker)


def test_onmt_train_train_from_refuses_it(evil, toy):
    path, marker = evil
    config = yaml_config(toy, dict(hidden_size=8, word_vec_size=8), steps=1)
    build_vocab(config)
    _refused(lambda: train(config, "-train_from", str(path)), path, marker)


def test_average_release_and_analysis_commands_load_weights_only(evil, tmp_path, monkeypatch):
    from onmt.bin import average_models, release_model

    from onmt_entmax.analysis.alphas import checkpoint_alphas
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model

    path, marker = evil
    _refused(lambda: average_models.average_models([str(path), str(path)]), path, marker)
    monkeypatch.setattr(sys, "argv", ["onmt_release_model", "-m", str(path), "-o", str(tmp_path / "r.pt")])
    _refused(release_model.main, path, marker)
    _refused(lambda: checkpoint_alphas(str(path)), path, marker)
    _refused(lambda: load_model(str(path)), path, marker)


def test_onmt_translate_refuses_it_in_one_line(evil, tmp_path):
    path, marker = evil
    (tmp_path / "src.txt").write_text("a b\n")
    proc = run_console(["onmt_translate", "-model", str(path), "-src", "src.txt", "-output", "out.txt"], cwd=tmp_path,
                       env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    assert proc.returncode == 1 and not marker.exists()
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"onmt_translate: error: {path}: refused: loading it would call exec (a checkpoint holds tensors, numbers and "
        "its options only; this file could run code when unpickled)")


def test_a_torch_without_an_allowlist_is_refused(monkeypatch):
    check_torch()  # this one has it
    monkeypatch.setattr(torch, "__version__", "2.3.1")
    with pytest.raises(CheckpointError, match=r"torch 2.3.1 cannot load .* pip install 'torch>=2.4'"):
        check_torch()


def _checkpoint(path, **options):
    opt = argparse.Namespace(encoder_type="rnn", **options)
    torch.save({"model": {"w": torch.ones(2)}, "generator": {"g": torch.ones(1)}, "vocab": {}, "opt": opt}, path)
    return str(path)


def test_average_of_a_sparse_and_a_softmax_model_is_refused(tmp_path):
    from onmt.bin.average_models import average_models

    sparse = _checkpoint(tmp_path / "sparse.pt", generator_function="entmax15")
    dense = _checkpoint(tmp_path / "dense.pt", generator_function="softmax")
    stock = _checkpoint(tmp_path / "stock.pt")  # trained without the plugin: softmax
    with pytest.raises(CheckpointError, match="differ in generator_function .'entmax15' vs 'softmax'."):
        average_models([sparse, dense])
    assert average_models([dense, stock])["model"]["w"].tolist() == [1.0, 1.0]
    other = _checkpoint(tmp_path / "other.pt", generator_function="entmax15", attention_alpha=1.3)
    with pytest.raises(CheckpointError, match="attention_alpha"):
        average_models([sparse, other])


def test_average_output_that_is_an_input_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    from onmt.bin import average_models

    a = _checkpoint(tmp_path / "a.pt", generator_function="entmax15")
    b = _checkpoint(tmp_path / "b.pt", generator_function="entmax15")
    before = (tmp_path / "a.pt").read_bytes()
    monkeypatch.setattr(sys, "argv", ["onmt_average_models", "-models", a, b, "-output", a])
    with pytest.raises(ValueError, match="-output .*a.pt is the -models file: it would be written over"):
        average_models.main()
    assert (tmp_path / "a.pt").read_bytes() == before


def test_a_folder_or_a_non_checkpoint_is_named_without_torchs_advice_to_drop_weights_only(tmp_path):
    """torch's weights-only error opens with "re-running with weights_only=False will likely succeed":
    for a file that is no checkpoint, the line says what is wrong, not that."""
    from onmt_entmax.analysis.checkpoint import load_checkpoint

    with pytest.raises(CheckpointError, match=r"^\S+: a folder, not a checkpoint file$"):
        load_checkpoint(str(tmp_path))
    (tmp_path / "notes.txt").write_text("x\n")
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(str(tmp_path / "notes.txt"))
    assert str(err.value).startswith(f"{tmp_path / 'notes.txt'}: not a readable PyTorch checkpoint (")
    assert "weights_only" not in str(err.value) and "\n" not in str(err.value)
