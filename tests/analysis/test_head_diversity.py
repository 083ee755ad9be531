"""Head diversity per layer: mean Jensen-Shannon divergence between the heads' attention."""
import json
import math

import numpy as np
import pytest
import torch

from onmt_entmax.analysis.head_diversity import HeadDiversity, js_divergence, per_query_js, plot_head_diversity

stats = pytest.importorskip("scipy.stats")
from scipy.spatial.distance import jensenshannon  # noqa: E402


def _js_scipy(heads: np.ndarray) -> float:
    """Independent generalized JS: S(mean) - mean S, entropies by scipy (0 log 0 = 0)."""
    return float(stats.entropy(heads.mean(0)) - np.mean([stats.entropy(h) for h in heads]))


def test_two_heads_match_scipy_jensen_shannon():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(5, 2, 7, generator=g), -1)
    p[:, 0, :3] = 0  # sparse heads: exact zeros
    p = p / p.sum(-1, keepdim=True)
    ours = js_divergence(p)
    for i in range(5):
        assert float(ours[i]) == pytest.approx(jensenshannon(p[i, 0].numpy(), p[i, 1].numpy()) ** 2, abs=1e-6)


def test_bounds_zero_for_identical_heads_log_h_for_disjoint_ones():
    same = torch.softmax(torch.randn(3, 7), -1).expand(4, 3, 7).transpose(0, 1)
    assert torch.allclose(js_divergence(same), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    disjoint = torch.eye(4).unsqueeze(0)  # 4 heads on 4 different keys
    assert float(js_divergence(disjoint)[0]) == pytest.approx(math.log(4))


def test_padding_queries_are_left_out_of_the_layer_mean():
    g = torch.Generator().manual_seed(1)
    attn = torch.softmax(torch.randn(2, 3, 4, 6, generator=g), -1)  # (B, H, T_q, T_k)
    mask = torch.tensor([[True, True, False, False], [True, True, True, False]])
    js = per_query_js(attn, mask)
    want = [_js_scipy(attn[b, :, q].numpy()) for b in range(2) for q in range(4) if mask[b, q]]
    assert js.tolist() == pytest.approx(want, abs=1e-6)
    acc = HeadDiversity()
    acc.add(("enc_self", 0), attn[:1], mask[:1])
    acc.add(("enc_self", 0), attn[1:], mask[1:])
    assert acc.result()[("enc_self", 0)] == pytest.approx(np.mean(want), abs=1e-6)
    with pytest.raises(ValueError, match="query_mask"):
        per_query_js(attn, mask[:, :3])


def test_plot(tmp_path):
    from drawn import capture, legend_texts
    from test_alphas import _nontrivial_png

    res = {"softmax": {("enc_self", 0): 0.1, ("enc_self", 1): 0.2, ("context", 0): 0.05},
           "learned": {("enc_self", 0): 0.3, ("enc_self", 1): 0.4, ("context", 0): 0.25}}
    with capture() as figs:
        _nontrivial_png(plot_head_diversity(res, str(tmp_path / "hd.png")))
    enc, ctx = figs[str(tmp_path / "hd.png")].axes
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in enc.get_lines()] == [([1, 2], [0.1, 0.2]),
                                                                                      ([1, 2], [0.3, 0.4])]
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in ctx.get_lines()] == [([1], [0.05]), ([1], [0.25])]
    assert legend_texts(enc) == ["softmax", "learned"] and enc.get_title() == "encoder self-attention"


# --- a real checkpoint, teacher-forced ---------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("onmt")
    from tiny_transformers import trained

    return trained()


def test_captured_attention_is_each_heads_distribution_and_js_matches_scipy(tiny):
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    model, vocabs = load_model(tiny["learned"])
    seen = []

    def check(fb):
        assert {s[0] for s in fb.attn} == {"enc_self", "dec_self", "context"}
        for site, attn in fb.attn.items():
            q = fb.query_mask(site)
            rows = attn.transpose(1, 2)[q]  # (queries, H, T_k)
            assert torch.allclose(rows.sum(-1), torch.ones_like(rows.sum(-1)), atol=1e-5)
            keys = fb.src_mask if site[0] != "dec_self" else fb.tgt_mask
            pad_keys = ~keys[:, None, None, :] & q[:, None, :, None]  # (B, 1, T_q, T_k), real queries only
            assert (attn[pad_keys.expand_as(attn)] == 0).all()  # padding keys get exactly zero weight
            if site[0] == "dec_self":  # causal: no weight on later target positions
                assert (attn.triu(1) == 0).all()
            seen.append((site, attn, q))

    run(model, vocabs, tiny["src"], tiny["tgt"], check, batch_size=10, outputs=False)
    # alpha-entmax heads: exact zeros inside the real keys too
    assert any(bool(((a == 0) & (q[:, None, :, None])).any()) for s, a, q in seen if s[0] == "enc_self")
    site, attn, q = seen[0]
    acc = HeadDiversity()
    for s, a, m in seen:
        if s == site:
            acc.add(s, a, m)
    want = [_js_scipy(a[b, :, t].double().numpy()) for s, a, m in seen if s == site
            for b in range(a.size(0)) for t in range(a.size(2)) if m[b, t]]
    assert acc.result()[site] == pytest.approx(np.mean(want), abs=1e-6)


def test_command_compares_models(tiny, tmp_path):
    from test_alphas import _nontrivial_png

    from onmt_entmax.onmt.decoding.teacher_forcing import head_diversity_main

    assert head_diversity_main(["-model", tiny["learned"], tiny["dense"], "-name", "learned alpha", "softmax",
                                "-src", tiny["src"], "-tgt", tiny["tgt"], "-out_dir", str(tmp_path)]) == 0
    res = json.load(open(tmp_path / "head_diversity.json"))
    assert set(res) == {"learned alpha", "softmax"}
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    for name, key in (("learned alpha", "learned"), ("softmax", "dense")):  # what the command wrote, per layer
        model, vocabs = load_model(tiny[key])
        acc = HeadDiversity()
        run(model, vocabs, tiny["src"], tiny["tgt"],
            lambda fb: [acc.add(site, a, fb.query_mask(site)) for site, a in fb.attn.items()], outputs=False)
        want = acc.result()
        assert len(res[name]) == len(want) == 6  # 3 kinds x 2 layers
        assert {(r["kind"], r["layer"] - 1): r["js"] for r in res[name]} == pytest.approx(want)
    _nontrivial_png(str(tmp_path / "head_diversity.png"))


def test_the_capture_takes_the_sparse_modules_off_the_fused_kernel(tiny):
    """On CUDA a sparse module's attention runs as one fused kernel that never calls its normalizer, so
    a hook on the normalizer would see nothing; while the capture is active no module is fusable (and
    every one is again afterwards)."""
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    from onmt_entmax.onmt.decoding.teacher_forcing import capture_attention, load_model
    from onmt_entmax.onmt.model import fused_attention

    model, _ = load_model(tiny["learned"])
    attention = [m for m in model.modules() if isinstance(m, MultiHeadedAttention)]
    assert len(attention) == 6 and all(fused_attention.fusable(m) is not None for m in attention)
    with capture_attention(model):
        assert all(fused_attention.fusable(m) is None for m in attention)
    assert all(fused_attention.fusable(m) is not None for m in attention)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_capture_matches_cpu_and_needs_the_explicit_path(tiny):
    """On CUDA, OpenNMT-py's default scaled-dot-flash runs SDPA and never the normalizer; the capture
    switches to scaled-dot, and the per-layer JS and per-step sums equal the CPU ones."""
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    from onmt_entmax.analysis.alpha_relu_stats import StepStats
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    for ckpt in (tiny["learned"], tiny["dense"]):
        out = []
        for gpu in (-1, 0):
            model, vocabs = load_model(ckpt, gpu)
            hd, st = HeadDiversity(), StepStats()

            def add(fb, hd=hd, st=st):
                for s, a in fb.attn.items():
                    hd.add(s, a, fb.query_mask(s))
                st.add(fb.log_probs, fb.tgt_mask)

            run(model, vocabs, tiny["src"], tiny["tgt"], add, batch_size=16)
            out.append((hd.result(), st.summary()["sum_mean"]))
        (cpu_js, cpu_sum), (gpu_js, gpu_sum) = out
        assert set(gpu_js) == set(cpu_js) and len(cpu_js) == 6
        assert all(gpu_js[s] == pytest.approx(cpu_js[s], abs=1e-5) for s in cpu_js)
        assert gpu_sum == pytest.approx(cpu_sum, abs=1e-5)
    model, vocabs = load_model(tiny["dense"], 0)
    called = set()
    for name, m in model.named_modules():
        if isinstance(m, MultiHeadedAttention):
            m.self_attn_type = "scaled-dot-flash"
            m.softmax.register_forward_hook(lambda mod, i, o, name=name: called.add(name))
    run(model, vocabs, tiny["src"], tiny["tgt"], lambda fb: None, attention=False)
    assert not any("decoder" in n for n in called)  # why capture_attention forces scaled-dot


def _refused(main, *args) -> str:
    """The command's one stderr line, asserting it ended with exit status 1."""
    import contextlib
    import io

    err = io.StringIO()
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stderr(err):
        main(list(args))
    lines = err.getvalue().splitlines()
    assert stop.value.code == 1 and len(lines) == 1, err.getvalue()
    return lines[0]


def test_a_target_file_shorter_than_the_source_is_refused_in_one_line_before_a_model_loads(tiny, tmp_path):
    from onmt_entmax.onmt.decoding import teacher_forcing

    short = tmp_path / "short.txt"
    short.write_text("".join(open(tiny["tgt"]).readlines()[:3]))
    for main in (teacher_forcing.head_diversity_main, teacher_forcing.alpha_relu_stats_main):
        line = _refused(main, "-model", tiny["dense"], "-src", tiny["src"], "-tgt", str(short),
                        "-out_dir", str(tmp_path / "out"))
        assert f"-tgt {short}" in line
    assert not (tmp_path / "out").exists()


def test_an_out_dir_that_is_a_file_is_refused_in_one_line(tiny, tmp_path):
    from onmt_entmax.onmt.decoding.teacher_forcing import head_diversity_main

    (tmp_path / "a_file").write_text("x")
    line = _refused(head_diversity_main, "-model", tiny["dense"], "-src", tiny["src"], "-tgt", tiny["tgt"],
                    "-out_dir", str(tmp_path / "a_file"))
    assert "-out_dir" in line


def test_an_rnn_model_is_refused_in_one_line_naming_it(tiny, tmp_path):
    """Head diversity compares the heads of Transformer attention; an RNN has none."""
    from onmt.bin.train import _get_parser, train

    from tiny_transformers import CONFIG

    from onmt_entmax.onmt.decoding.teacher_forcing import head_diversity_main

    config = CONFIG.format(name="rnn", steps=1, layers=1, heads=1, d=8).replace("_type: transformer", "_type: rnn")
    config = config.replace("vocab.src", f"{tiny['dir']}/vocab.src").replace("vocab.tgt", f"{tiny['dir']}/vocab.tgt")
    config = config.replace("src-train.txt", tiny["src"]).replace("tgt-train.txt", tiny["tgt"])
    (tmp_path / "rnn.yaml").write_text(config.replace("save_model: run/", f"save_model: {tmp_path}/"))
    train(_get_parser().parse_known_args(["-config", str(tmp_path / "rnn.yaml")])[0])
    model = str(tmp_path / "rnn_step_1.pt")
    line = _refused(head_diversity_main, "-model", model, "-src", tiny["src"], "-tgt", tiny["tgt"],
                    "-out_dir", str(tmp_path / "out"))
    assert f"-model {model}" in line and "Transformer" in line
