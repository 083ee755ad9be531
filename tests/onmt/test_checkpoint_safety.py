"""No code runs from a checkpoint: every load path the plugin activates reads weights-only with an
allowlist, even under TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (torch 2.1-2.5's default). A refusal is one
line; library callers get a ValueError subclass."""
import argparse
import sys

import pytest
import torch

from onmt_testkit import build_vocab, run_console, train, yaml_config

from onmt_entmax.analysis.checkpoint import check_torch
from onmt_entmax.errors import CheckpointError


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


# --- what a loader reads must be a model it can use ------------------------------------------------------------
TRANSFORMER = dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True, layers=1,
                   hidden_size=16, word_vec_size=16, transformer_ff=16, heads=2, generator_function="entmax15",
                   attention_function="entmax15", learn_alpha=True)
RNN = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
           generator_function="entmax15")  # (input_feed: upstream's default)
COPY = dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True, layers=1, hidden_size=16,
            word_vec_size=16, transformer_ff=16, heads=2, copy_attn=True)  # (a softmax output: copy_attn needs it)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A learned-alpha Transformer, an input-feed RNN and a copy-attention Transformer, 2 steps each on one toy
    corpus: (dir, {name: path})."""
    from onmt_testkit import reversal_corpus

    d = reversal_corpus(tmp_path_factory.mktemp("loaders"), n_train=64, n_test=4)
    paths = {}
    for name, model in (("learned", TRANSFORMER), ("rnn", RNN), ("copy", COPY)):
        config = yaml_config(d, model, steps=2, name=name)
        build_vocab(config)
        train(config)
        paths[name] = str(d / "run" / f"{name}_step_2.pt")
    return d, paths


def _copy(src, dst, change):
    ckpt = torch.load(src, weights_only=False)
    change(ckpt)
    torch.save(ckpt, dst)
    return str(dst)


def _poison(value, key_end):
    def change(ckpt):
        key = next(k for k in ckpt["model"] if k.endswith(key_end))
        ckpt["model"][key] = ckpt["model"][key].clone()
        ckpt["model"][key].view(-1)[0] = value
        change.key = key
    return change


def _loaders(tmp_path):
    """name -> a function loading one checkpoint path as that load path does (in this process)."""
    import onmt.model_builder
    import onmt.train_single
    from onmt.bin.average_models import average_models
    from onmt.bin.translate import _get_parser

    from onmt_entmax.analysis.alphas import checkpoint_alphas
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    def translate_load(path):
        onmt.model_builder.load_test_model(_get_parser().parse_args(["-model", path, "-src", "x"]))

    return {"onmt_translate": translate_load, "-train_from": onmt.train_single.load_checkpoint,
            "onmt_average_models": lambda p: average_models([p, p]), "SparseDecoder": SparseDecoder,
            "onmt-entmax-alphas": checkpoint_alphas}


@pytest.mark.parametrize("value,key_end", [(float("nan"), "alpha.a"), (float("inf"), "w_1.weight")])
def test_a_checkpoint_with_a_weight_that_is_not_finite_is_refused_by_every_loader(trained, tmp_path, value, key_end):
    """A NaN learned alpha or an inf weight (a diverged run) would decode every line empty or train on at
    loss nan: every loader refuses it, naming the parameter and the file."""
    _, paths = trained
    change = _poison(value, key_end)
    bad = _copy(paths["learned"], tmp_path / "diverged.pt", change)
    for where, load in _loaders(tmp_path).items():
        with pytest.raises(CheckpointError) as err:
            load(bad)
        assert change.key in str(err.value) and bad in str(err.value), where
    with pytest.raises(CheckpointError, match=change.key):
        from onmt.bin.average_models import average_models

        average_models([paths["learned"], bad])  # (an average with it is NaN too)


def test_onmt_train_and_translate_refuse_a_nan_alpha_in_one_line(trained, tmp_path):
    d, paths = trained
    change = _poison(float("nan"), "alpha.a")
    bad = _copy(paths["learned"], tmp_path / "nan.pt", change)
    with pytest.raises(CheckpointError, match=change.key):
        train(yaml_config(d, TRANSFORMER, steps=3, name="resumed"), "-train_from", bad)
    assert not list((d / "run").glob("resumed*"))
    proc = run_console(["onmt_translate", "-model", bad, "-src", str(d / "src-test.txt"), "-output", "out.txt"],
                       cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert change.key in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out.txt").exists() or not (tmp_path / "out.txt").read_text().strip()


def test_train_from_refuses_an_optimizer_state_that_is_not_finite_and_resets_it_on_request(trained, tmp_path):
    """Finite weights with a NaN Adam moment train to NaN from the first resumed step: -train_from refuses the
    state, naming it, before a step runs; -reset_optim states (the moments dropped) resumes."""
    d, paths = trained

    def nan_moment(ckpt):
        state = next(iter(ckpt["optim"]["optimizer"]["state"].values()))
        state["exp_avg_sq"] = state["exp_avg_sq"].clone()
        state["exp_avg_sq"].view(-1)[0] = float("nan")

    bad = _copy(paths["learned"], tmp_path / "nan_optim.pt", nan_moment)
    config = yaml_config(d, TRANSFORMER, steps=3, name="resumed_optim")
    with pytest.raises(CheckpointError, match="exp_avg_sq holds NaN"):
        train(config, "-train_from", bad)
    assert not list((d / "run").glob("resumed_optim*"))
    train(config, "-train_from", bad, "-reset_optim", "states")
    resumed = torch.load(str(d / "run" / "resumed_optim_step_3.pt"), weights_only=False)
    assert all(torch.isfinite(t).all() for t in resumed["model"].values())


def test_a_pending_alpha_relu_threshold_is_the_one_nan_a_checkpoint_may_hold(trained, tmp_path):
    """alpha-ReLU's tau is NaN until ``generator_tau: auto`` resolves it: loading such a checkpoint (to
    train on, say) is not refused for it; a NaN in the output layer's weights is."""
    from onmt_entmax.analysis.checkpoint import check_checkpoint

    _, paths = trained
    ckpt = torch.load(paths["learned"], weights_only=False)
    ckpt["generator"]["tau"] = torch.tensor([float("nan")])
    check_checkpoint(ckpt, "pending.pt")
    ckpt["generator"]["weight"][0, 0] = float("nan")
    with pytest.raises(CheckpointError, match="generator.weight"):
        check_checkpoint(ckpt, "pending.pt")


def test_a_text_file_or_a_torch_file_that_is_no_checkpoint_is_refused_by_every_loader(trained, tmp_path):
    d, _ = trained
    torch.save({"a": torch.ones(2)}, tmp_path / "tensors.pt")
    for path in (str(d / "learned.yaml"), str(d / "run" / "vocab.src"), __file__, str(tmp_path / "tensors.pt")):
        for where, load in _loaders(tmp_path).items():
            with pytest.raises(ValueError) as err:  # (not an IndexError from the unpickler, a KeyError 'opt')
                load(path)
            assert path in str(err.value) and "\n" not in str(err.value), where


def test_average_models_refuses_checkpoints_of_other_vocabularies_or_parameters_naming_both(trained, tmp_path,
                                                                                              monkeypatch):
    from onmt.bin import average_models

    _, paths = trained
    good = paths["learned"]

    def other_vocab(ckpt):
        ckpt["vocab"]["tgt"] = ckpt["vocab"]["tgt"][:4] + ckpt["vocab"]["tgt"][4:][::-1]

    def no_alphas(ckpt):  # a model trained without learn_alpha (and so no alpha.a parameters)
        ckpt["model"] = {k: v for k, v in ckpt["model"].items() if not k.endswith("alpha.a")}
        ckpt["opt"].learn_alpha = False

    def wider(ckpt):  # the same options, another transformer_ff
        for k in [k for k in ckpt["model"] if ".w_1." in k]:
            ckpt["model"][k] = torch.zeros(32, *ckpt["model"][k].shape[1:])

    for change, says in ((other_vocab, "target vocabulary"), (no_alphas, "learn_alpha"), (wider, "parameters")):
        other = _copy(good, tmp_path / f"{change.__name__}.pt", change)
        with pytest.raises(CheckpointError) as err:
            average_models.average_models([good, other])
        assert good in str(err.value) and other in str(err.value) and says in str(err.value)
    out = tmp_path / "avg.pt"
    monkeypatch.setattr(sys, "argv", ["onmt_average_models", "-models", good, other, "-output", str(out)])
    with pytest.raises(CheckpointError):
        average_models.main()
    assert not out.exists()
    assert average_models.average_models([good, good])["model"].keys() == torch.load(good)["model"].keys()


def test_an_ensemble_of_an_input_feed_rnn_and_a_transformer_is_refused_as_it_loads(trained):
    """OpenNMT-py's ensemble stacks its members' attention at every step: the input-feed RNN decoder's
    (target step, batch, source) and the Transformer's (batch, target step, source) cannot be stacked."""
    from onmt.bin.translate import _get_parser
    from onmt.decoders import ensemble

    from onmt_entmax.errors import EntmaxOptionError

    _, paths = trained
    for members in ([paths["rnn"], paths["learned"]], [paths["learned"], paths["rnn"]]):
        opt = _get_parser().parse_args(["-model", *members, "-src", "x"])
        with pytest.raises(EntmaxOptionError) as err:
            ensemble.load_test_model(opt)
        assert all(m in str(err.value) for m in members) and "attention" in str(err.value)
    opt = _get_parser().parse_args(["-model", paths["learned"], paths["learned"], "-src", "x"])
    ensemble.load_test_model(opt)  # (members of one layout load)


def test_a_copy_attention_model_resumes_and_is_refused_for_decoding_in_one_line(trained, tmp_path):
    """OpenNMT-py 3.5.1 saves a copy generator's weights as ``linear.weight`` ... and its loader looked them up
    under other names: no copy_attn checkpoint loaded, for -train_from or onmt_translate. It resumes now; and
    decoding one, which upstream's translation data path cannot feed (no source map), is refused naming the
    model, before any sentence is read, instead of a KeyError at the first batch."""
    from onmt_testkit import translate

    from onmt_entmax.errors import EntmaxOptionError

    d, paths = trained
    train(yaml_config(d, COPY, steps=3, name="copy"), "-train_from", paths["copy"])
    resumed = torch.load(str(d / "run" / "copy_step_3.pt"), weights_only=False)
    assert {"linear.weight", "linear_copy.weight"} <= set(resumed["generator"])
    out = tmp_path / "out.txt"
    with pytest.raises(EntmaxOptionError) as err:
        translate(paths["copy"], d / "src-test.txt", out)
    assert paths["copy"] in str(err.value) and "copy_attn" in str(err.value) and "\n" not in str(err.value)
