"""Logs carry our information without OpenNMT-py's noise: its deprecation warnings are filtered at
their source only (the same warning from any other module, and every other warning, still shows),
the corpus-reload line is logged once, and learned alphas take one line a report."""
import importlib.util
import logging
import sys
import warnings

import pytest
import torch

from onmt_testkit import build_vocab, run_console, yaml_config

from onmt_entmax.onmt import upstream_noise

# one call of each deprecated API, as the upstream line makes it
CALLS = {
    "torch.cuda.amp.custom_fwd(args...)": "torch.cuda.amp.custom_fwd(lambda ctx, x: x)",
    "torch.cuda.amp.custom_bwd(args...)": "torch.cuda.amp.custom_bwd(lambda ctx, g: g)",
    "torch.cuda.amp.autocast(args...)": "torch.cuda.amp.autocast(enabled=False)",
    "torch.backends.cuda.sdp_kernel()": "torch.backends.cuda.sdp_kernel(enable_flash=False)",
    "torch.cuda.amp.GradScaler(args...)": "torch.cuda.amp.GradScaler(enabled=False)",
}


def _future_warnings(code: str, module: str) -> list[str]:
    """FutureWarnings of `code` run as if it were a line of `module`, with the filters on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        upstream_noise.filter_upstream_warnings()
        exec(code, {"__name__": module, "torch": torch})
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


DEPRECATIONS = pytest.mark.parametrize("api,callers,raised_in", upstream_noise.UPSTREAM_DEPRECATIONS,
                                       ids=[d[0] for d in upstream_noise.UPSTREAM_DEPRECATIONS])


@DEPRECATIONS
def test_each_upstream_deprecation_is_silent_in_upstreams_module_only(api, callers, raised_in):
    for module in callers:
        assert _future_warnings(CALLS[api], module) == []
    if raised_in:  # sdp_kernel: raised from contextlib for every caller, so silent for every caller
        assert _future_warnings(CALLS[api], "__main__") == []
        return
    for other in ("__main__", "onmt_entmax.ops", "onmt.modules.sru_extra", "my_onmt.trainer"):
        assert any(api in m for m in _future_warnings(CALLS[api], other)), other


def test_other_warnings_of_the_same_call_still_show():
    """GradScaler without CUDA also says that it disables itself: that UserWarning is not upstream noise."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        upstream_noise.filter_upstream_warnings()
        warnings.warn("our own deprecation", FutureWarning)
        exec("torch.amp.GradScaler('cuda')", {"__name__": "onmt.utils.optimizers", "torch": torch})
    said = [str(w.message) for w in caught]
    assert "our own deprecation" in said
    assert torch.cuda.is_available() or any("CUDA is not available" in m for m in said)


def test_a_one_layer_lstm_with_dropout_builds_silently():
    """OpenNMT-py's 1-layer RNNs (the examples) pass their dropout to nn.LSTM, which warns at every build
    (each onmt_translate) that it only acts between layers; upstream applies it around the LSTM itself."""
    for filtered in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if filtered:
                upstream_noise.filter_upstream_warnings()
            torch.nn.LSTM(4, 4, num_layers=1, dropout=0.2)
            warnings.warn("dropout option adds dropout after all but last recurrent layer", UserWarning)  # ours
        assert len(caught) == (1 if filtered else 2)


@DEPRECATIONS
def test_the_filtered_lines_are_in_the_installed_opennmt_py(api, callers, raised_in):
    """The list names real upstream calls: each module exists and calls that API."""
    name = api.split("(")[0].split(".")[-1]  # custom_fwd, autocast, sdp_kernel, GradScaler
    for module in callers:
        source = open(importlib.util.find_spec(module).origin, encoding="utf-8").read()
        assert name in source, (module, name)


def test_corpus_reloads_are_logged_once_on_one_line_and_other_records_untouched():
    noise = upstream_noise.CorporaLoadedOnce()

    def record(msg, *args):
        return logging.LogRecord("onmt", logging.INFO, __file__, 1, msg, args, None)

    said = []
    for n in range(1, 4):
        for r in (record("Weighted corpora loaded so far:\n" + "\n".join(
                [f"\t\t\t* corpus_1: {n}", f"\t\t\t* corpus_2: {2 * n}"])), record("Step %d/ 100", n)):
            if noise.filter(r):
                said.append(r.getMessage())
    assert said == ["Weighted corpora loaded so far: corpus_1: 1, corpus_2: 2 (logged once a process)",
                    "Step 1/ 100", "Step 2/ 100", "Step 3/ 100"]
    upstream_noise.log_corpora_once()
    upstream_noise.log_corpora_once()  # once on OpenNMT-py's logger, however often the plugin activates
    assert sum(isinstance(f, upstream_noise.CorporaLoadedOnce) for f in logging.getLogger("onmt").filters) == 1


def test_onmt_train_output_has_no_upstream_noise_but_our_warnings_show(toy):
    """A real onmt_train process (Python's default warning filters, as a user's shell has them): no FutureWarning, the
    corpus line once although the toy corpus is re-read many times, one line of alphas a report; a
    FutureWarning of the user's own code still prints."""
    config = yaml_config(toy, dict(encoder_type="transformer", decoder_type="transformer", layers=1, heads=2,
                                   hidden_size=16, word_vec_size=16, transformer_ff=32, position_encoding=True,
                                   generator_function="entmax15", attention_function="entmax_bisect",
                                   learn_alpha=True, batch_size=8, bucket_size=64), steps=6)
    build_vocab(config)
    script = toy / "train_then_warn.py"
    script.write_text("import sys, warnings\nfrom onmt.bin.train import main\nsys.argv = ['onmt_train', '-config', "
                      f"{str(config)!r}]\nmain()\nwarnings.warn('the user warns', FutureWarning)\n")
    # Python's defaults
    proc = run_console([sys.executable, str(script)], cwd=toy, timeout=240, env={"PYTHONWARNINGS": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert [line for line in out.splitlines() if "Warning" in line] == [
        line for line in out.splitlines() if "the user warns" in line] != []
    assert out.count("Weighted corpora loaded so far") == 1
    alpha_lines = [line for line in out.splitlines() if "learned alpha" in line]
    assert len(alpha_lines) == 2  # reports at steps 3 and 6
    assert all("enc: " in line and " | dec self: " in line and " | ctx: " in line for line in alpha_lines)
