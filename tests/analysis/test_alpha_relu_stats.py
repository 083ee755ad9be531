"""alpha-ReLU self-normalization (sum of outputs per step) and zeros per step vs 1.5-entmax."""
import json
import math

import numpy as np
import pytest
import torch

from onmt_entmax import alpha_relu, entmax15
from onmt_entmax.analysis.alpha_relu_stats import StepStats, format_summary, plot_sums, plot_zero_shares


def test_step_sums_and_zero_counts_of_hand_built_steps():
    p = torch.tensor([[0.5, 0.7, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [9.0, 9.0, 9.0, 9.0]])
    st = StepStats()
    st.add(p.log().view(2, 2, 4), mask=torch.tensor([[True, True], [True, False]]))  # last step is padding
    assert st.sums.tolist() == pytest.approx([1.2, 1.0, 1.0])
    assert st.zeros.tolist() == [2, 3, 0]
    s = st.summary()
    assert s["steps"] == 3 and s["vocab"] == 4
    assert s["sum_mean"] == pytest.approx(3.2 / 3)
    assert s["sum_std"] == pytest.approx(float(np.std([1.2, 1.0, 1.0])))
    assert s["zero_share_mean"] == pytest.approx(5 / 12)
    assert s["sum_q50"] == pytest.approx(1.0)
    assert "3 steps" in format_summary("x", s)
    with pytest.raises(ValueError, match="vocabulary size"):
        st.add(torch.zeros(1, 5))
    with pytest.raises(ValueError, match="mask"):
        st.add(torch.zeros(2, 4), mask=torch.ones(3, dtype=torch.bool))


def test_plots_show_every_model_readably(tmp_path):
    """alpha-ReLU's sums spread around ~1; a normalized model's are 1 up to 1e-7. On one plot the
    normalized model is a line at 1 and alpha-ReLU a histogram over its own range (not 1e-8 bins)."""
    from drawn import bars, capture, inside_figure, legend_covers, legend_texts

    g = torch.Generator().manual_seed(0)
    z = torch.randn(200, 50, generator=g) * 2
    relu, ent = StepStats(), StepStats()
    relu.add(alpha_relu(z, 1.5, tau=0.2).log())
    ent.add(entmax15(z).log())
    with capture() as figs:
        plot_sums({"1.5-ReLU": relu.sums, "1.5-entmax": ent.sums}, str(tmp_path / "sums.png"), bins=40)
        plot_zero_shares({"1.5-ReLU": relu, "1.5-entmax": ent}, str(tmp_path / "zeros.png"), bins=20)
    ax = figs[str(tmp_path / "sums.png")].axes[0]
    hist = bars(ax)
    lo, hi = float(relu.sums.min()), float(relu.sums.max())
    assert len(hist) == 40 and all(w == pytest.approx((hi - lo) / 40) for _, w, _, _ in hist)
    assert hist[0][0] == pytest.approx(lo)
    assert sum(w * h for _, w, h, _ in hist) == pytest.approx(1.0)  # one density: alpha-ReLU's
    assert ax.get_ylim()[1] <= 1.1 * max(h for _, _, h, _ in hist)  # its tallest bar fills the axes
    line = [ln for ln in ax.get_lines() if ln.get_label().startswith("1.5-entmax")]
    assert len(line) == 1 and line[0].get_xdata()[0] == pytest.approx(1.0, abs=1e-6)
    spread = float(ent.sums.max() - ent.sums.min())
    assert legend_texts(ax) == [f"1.5-ReLU (mean {float(relu.sums.mean()):.3f})",
                                f"1.5-entmax: every step 1.000 (spread {spread:.0e})"]
    assert legend_covers(ax) == [] and inside_figure(ax.get_legend())  # readable: on no bar, not cut
    ax = figs[str(tmp_path / "zeros.png")].axes[0]
    hist = bars(ax)
    assert len(hist) == 40 and all(w == pytest.approx(1 / 20) for _, w, _, _ in hist)  # two series on [0, 1]
    for series, own in ((relu, hist[:20]), (ent, hist[20:])):
        density, _ = np.histogram((series.zeros.double() / 50).numpy(), bins=20, range=(0, 1), density=True)
        assert [h for _, _, h, _ in own] == pytest.approx(density.tolist())


# --- real checkpoints ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("onmt")
    from tiny_transformers import trained

    return trained()


def test_per_step_sums_are_those_of_alpha_relu_of_the_logits(tiny):
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    model, vocabs = load_model(tiny["learned"])
    tau = float(model.generator.tau)
    logits = []
    model.generator.register_forward_hook(lambda m, i, out: logits.append(out.detach()))
    st, masks = StepStats(), []

    def add(fb):
        st.add(fb.log_probs, fb.tgt_mask)
        masks.append(fb.tgt_mask)

    run(model, vocabs, tiny["src"], tiny["tgt"], add, batch_size=8, attention=False)
    z = torch.cat([lg[m] for lg, m in zip(logits, masks)])
    p = alpha_relu(z, 1.5, tau=tau)  # independently: [z/2 - tau]_+^2
    assert torch.allclose(p, (z / 2 - tau).clamp(min=0) ** 2, atol=1e-6)
    assert st.sums.tolist() == pytest.approx(p.sum(-1).tolist(), rel=1e-4)
    assert st.zeros.tolist() == (p == 0).sum(-1).tolist()
    assert st.vocab == tiny["vocab"]


def test_command_alpha_relu_against_entmax(tiny, tmp_path):
    from test_alphas import _nontrivial_png

    from onmt_entmax.onmt.decoding.teacher_forcing import alpha_relu_stats_main

    assert alpha_relu_stats_main(["-model", tiny["learned"], tiny["dense"], "-name", "1.5-ReLU", "1.5-entmax",
                                  "-src", tiny["src"], "-tgt", tiny["tgt"], "-out_dir", str(tmp_path)]) == 0
    res = json.load(open(tmp_path / "alpha_relu_stats.json"))
    ent, relu = res["1.5-entmax"], res["1.5-ReLU"]
    assert ent["steps"] == relu["steps"] > 0
    assert ent["sum_mean"] == pytest.approx(1.0, abs=1e-4) and ent["sum_std"] < 1e-4  # normalized
    assert math.isfinite(relu["sum_mean"]) and relu["sum_std"] > 0  # not normalized
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    for name, key in (("1.5-ReLU", "learned"), ("1.5-entmax", "dense")):  # what the command wrote, per step
        model, vocabs = load_model(tiny[key])
        st = StepStats()
        run(model, vocabs, tiny["src"], tiny["tgt"], lambda fb: st.add(fb.log_probs, fb.tgt_mask), attention=False)
        zeros = st.zeros.double() / st.vocab
        assert res[name]["zero_share_mean"] == pytest.approx(float(zeros.mean()))
        assert res[name]["sum_mean"] == pytest.approx(float(st.sums.mean()))
    _nontrivial_png(str(tmp_path / "output_sums.png"))
    _nontrivial_png(str(tmp_path / "zero_shares.png"))


def test_empty_translations_count_one_step_and_bad_files_are_refused(tiny, tmp_path):
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    model, vocabs = load_model(tiny["dense"])
    src = [line for line in open(tiny["src"])][:3]
    (tmp_path / "s.txt").write_text("".join(src))
    (tmp_path / "t.txt").write_text("\nv1 v2\n\n")  # two empty hypotheses: only </s> is predicted
    st = StepStats()
    run(model, vocabs, str(tmp_path / "s.txt"), str(tmp_path / "t.txt"), lambda fb: st.add(fb.log_probs, fb.tgt_mask),
        attention=False)
    assert st.sums.numel() == 1 + 3 + 1
    (tmp_path / "short.txt").write_text("v1\n")
    with pytest.raises(ValueError, match="-tgt has 1"):
        run(model, vocabs, str(tmp_path / "s.txt"), str(tmp_path / "short.txt"), lambda fb: None)
    (tmp_path / "e.txt").write_text("w1\n\nw2\n")
    with pytest.raises(ValueError, match="empty line"):
        run(model, vocabs, str(tmp_path / "e.txt"), str(tmp_path / "t.txt"), lambda fb: None)


def test_teacher_forcing_own_translations_gives_the_decoding_steps(tiny, tmp_path):
    """Forcing the model's own beam output reproduces onmt_translate -sparsity_stats over those steps."""
    import re

    from tiny_transformers import finish, start_module

    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    hyp = str(tmp_path / "hyp.txt")
    proc = start_module(tiny["dir"], "onmt.bin.translate", "-model", tiny["learned"], "-src", tiny["src"],
                        "-output", hyp, "-beam_size", "4", "-sparsity_stats")
    log = finish(proc, "onmt_translate")
    m = re.search(r"sum of output probabilities: mean ([0-9.]+), std ([0-9.]+) over (\d+) target tokens", log)
    assert m, log[-2000:]
    model, vocabs = load_model(tiny["learned"])
    st = StepStats()
    run(model, vocabs, tiny["src"], hyp, lambda fb: st.add(fb.log_probs, fb.tgt_mask), attention=False)
    s = st.summary()
    assert s["steps"] == int(m.group(3))
    assert s["sum_mean"] == pytest.approx(float(m.group(1)), abs=2e-4)
    assert s["sum_std"] == pytest.approx(float(m.group(2)), abs=2e-4)
