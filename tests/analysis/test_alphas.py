"""Learned alpha per head and layer: the training CSV, checkpoint reading, plots and the command."""
import csv
import math
import os

import pytest
import torch

from onmt_entmax.analysis.alphas import (
    alphas_from_state_dict,
    attention_site,
    checkpoint_alphas,
    default_csv,
    main,
    plot_alphas_per_layer,
    plot_trajectories,
    read_alpha_csv,
    summary,
    trajectories,
)


def _nontrivial_png(path, min_bytes=8000):
    """A written PNG with real content: not tiny, and more than one colour."""
    import matplotlib.image

    assert os.path.getsize(path) > min_bytes
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and float(img[..., :3].std()) > 0.01


def test_module_names_map_to_kind_and_layer():
    assert attention_site("encoder.transformer.3.self_attn") == ("enc_self", 3)
    assert attention_site("decoder.transformer_layers.0.self_attn.softmax") == ("dec_self", 0)
    assert attention_site("decoder.transformer_layers.11.context_attn") == ("context", 11)
    assert attention_site("decoder.attn") is None
    assert attention_site("encoder.transformer.0.feed_forward") is None


def test_alphas_from_logits_follow_the_documented_parametrisation():
    # alpha = clamp(1 + sigmoid(a), 1.01, 2): never below 1 whatever a is
    a = torch.tensor([0.0, 2.0, -30.0, 30.0])
    state = {"encoder.transformer.1.self_attn.softmax.alpha.a": a,
             "decoder.transformer_layers.0.context_attn.softmax.alpha.a": a[:2],
             "encoder.transformer.1.self_attn.linear_keys.weight": torch.zeros(2, 2)}
    out = alphas_from_state_dict(state)
    assert list(out) == [("enc_self", 1), ("context", 0)]
    expected = [min(max(1 + 1 / (1 + math.exp(-x)), 1.01), 2.0) for x in a.tolist()]
    assert out[("enc_self", 1)] == pytest.approx(expected, abs=1e-6)
    assert out[("enc_self", 1)][2] == pytest.approx(1.01)
    assert out[("context", 0)] == pytest.approx(expected[:2], abs=1e-6)


def test_csv_trajectories_and_plots(tmp_path):
    path = tmp_path / "m_alphas.csv"
    rows = [(s, k, layer, h, 1.5 + 0.01 * s * (h - 0.5) * (layer + 1))
            for s in (0, 10, 20) for k in ("enc_self", "context") for layer in (0, 1) for h in (0, 1)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "kind", "layer", "head", "alpha"])
        w.writerows(rows)
    back = read_alpha_csv(str(path))
    assert back == rows
    traj = trajectories(back)
    assert traj[("enc_self", 1, 1)] == ([0, 10, 20], [1.5, 1.5 + 0.1 * 0.5 * 2, 1.5 + 0.2 * 0.5 * 2])
    last = {(k, layer): [r[4] for r in back if r[0] == 20 and r[1] == k and r[2] == layer]
            for k in ("enc_self", "context") for layer in (0, 1)}
    from drawn import capture

    with capture() as figs:
        _nontrivial_png(plot_trajectories(back, str(tmp_path / "traj.png")))
        _nontrivial_png(plot_alphas_per_layer(last, str(tmp_path / "layers.png")))
    # one line per (kind, layer, head) through its (step, alpha) points, one panel per kind
    traj_axes = figs[str(tmp_path / "traj.png")].axes
    drawn = sorted((tuple(ln.get_xdata()), tuple(round(y, 9) for y in ln.get_ydata()))
                   for ax in traj_axes for ln in ax.get_lines() if len(ln.get_xdata()) == 3)
    assert drawn == sorted((tuple(steps), tuple(round(a, 9) for a in alphas)) for steps, alphas in traj.values())
    # every head's last alpha is a dot at its layer (1-based) in its kind's panel
    top = figs[str(tmp_path / "layers.png")].axes[:2]
    for ax, kind in zip(top, ("enc_self", "context")):
        dots = [tuple(xy) for coll in ax.collections for xy in coll.get_offsets().tolist()]
        assert sorted(round(y, 9) for _, y in dots) == sorted(round(a, 9) for layer in (0, 1)
                                                              for a in last[(kind, layer)])
        assert sorted(round(x) for x, _ in dots) == [1, 1, 2, 2]
    s = summary({("enc_self", 0): [1.05, 1.95, 1.5, 1.9]})
    assert s["enc_self"]["low_share"] == 0.25 and s["enc_self"]["high_share"] == 0.5
    assert default_csv("run/model_step_300.pt") == "run/model_alphas.csv"


def test_bad_csv_is_refused(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an alphas CSV"):
        read_alpha_csv(str(bad))


# --- with the real onmt_train --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("onmt")
    from tiny_transformers import trained

    return trained()


def test_training_writes_alphas_csv_matching_the_checkpoint(tiny):
    rows = read_alpha_csv(tiny["csv"])
    steps = sorted({r[0] for r in rows})
    assert steps == [0, 5, 10, 15, 20]
    per_step = 3 * 2 * 4  # kinds x layers x heads
    assert len(rows) == per_step * len(steps)
    assert all(r[4] == 1.5 for r in rows if r[0] == 0)  # a fresh run starts at attention_alpha
    assert all(1.01 <= r[4] <= 2.0 for r in rows)
    assert any(abs(r[4] - 1.5) > 1e-3 for r in rows if r[0] == 20)  # alphas did learn
    final = checkpoint_alphas(tiny["learned"])
    assert set(final) == {(k, layer) for k in ("enc_self", "dec_self", "context") for layer in (0, 1)}
    for (kind, layer), heads in final.items():
        logged = [r[4] for r in rows if r[0] == 20 and r[1] == kind and r[2] == layer]
        assert logged == pytest.approx(heads, abs=2e-6)


def test_dense_checkpoint_has_no_alphas(tiny):
    with pytest.raises(ValueError, match="learn_alpha"):
        checkpoint_alphas(tiny["dense"])


def test_command_writes_both_plots(tiny, tmp_path, capsys):
    assert main(["-checkpoint", tiny["learned"], "-out_dir", str(tmp_path)]) == 0
    _nontrivial_png(str(tmp_path / "alphas_per_layer.png"))
    _nontrivial_png(str(tmp_path / "alpha_trajectories.png"))
    assert "enc_self layer 1:" in capsys.readouterr().out


def _fake_trainer(base_path, every=5):
    """What ``Trainer._maybe_report_training`` reads: report_every, model_saver.base_path, gpu_rank, model."""
    from types import SimpleNamespace

    from torch import nn

    from onmt_entmax.modules import AttentionNormalizer
    from onmt_entmax.registry import get_transformation

    attn = nn.Module()
    attn.softmax = AttentionNormalizer(get_transformation("entmax_bisect", alpha=1.5), heads=2, learn_alpha=True)
    layer = nn.Module()
    layer.self_attn = attn
    model = nn.Module()
    model.encoder = nn.Module()
    model.encoder.transformer = nn.ModuleList([layer])
    return SimpleNamespace(report_manager=SimpleNamespace(report_every=every), gpu_rank=0, model=model,
                           model_saver=SimpleNamespace(base_path=base_path)), attn.softmax.alpha


def test_report_hook_starts_fresh_runs_at_step_0_and_continues_resumed_ones(tmp_path):
    from onmt_entmax.onmt.training.alpha_log import wrap_maybe_report_training

    report = wrap_maybe_report_training(lambda self, step, n, lr, stats: stats)
    base = str(tmp_path / "m")
    trainer, alpha = _fake_trainer(base)
    for step in range(1, 11):
        with torch.no_grad():
            alpha.a.add_(0.1)
        assert report(trainer, step, 10, 1.0, "stats") == "stats"  # upstream's result passes through
    rows = read_alpha_csv(base + "_alphas.csv")
    assert [r[0] for r in rows] == [0, 0, 5, 5, 10, 10]
    assert rows[0][4] == rows[1][4] == 1.5
    assert rows[-1][4] == pytest.approx(1 + 1 / (1 + math.exp(-1.0)), abs=1e-6)  # a = 10 * 0.1
    # a -train_from run from step 5 rewrites what came after its checkpoint
    resumed, _ = _fake_trainer(base)
    report(resumed, 10, 20, 1.0, None)
    assert [r[0] for r in read_alpha_csv(base + "_alphas.csv")] == [0, 0, 5, 5, 10, 10]
    # a new run into the same save_model starts over; other ranks never write
    fresh, _ = _fake_trainer(base)
    fresh.gpu_rank = 1
    report(fresh, 5, 20, 1.0, None)
    fresh.gpu_rank = 0
    report(fresh, 5, 20, 1.0, None)
    assert [r[0] for r in read_alpha_csv(base + "_alphas.csv")] == [0, 0, 5, 5]


def test_reading_a_checkpoint_leaves_the_global_allowlist_alone(tmp_path):
    import argparse

    from onmt_entmax.analysis.alphas import load_checkpoint

    path = str(tmp_path / "c.pt")
    torch.save({"opt": argparse.Namespace(x=1), "model": {}}, path)
    before = list(torch.serialization.get_safe_globals())
    assert load_checkpoint(path)["opt"].x == 1
    assert list(torch.serialization.get_safe_globals()) == before
    torch.serialization.add_safe_globals([argparse.Namespace])  # as the plugin does when it activates
    try:
        load_checkpoint(path)
        assert argparse.Namespace in torch.serialization.get_safe_globals()
    finally:
        if argparse.Namespace not in before:
            torch.serialization.clear_safe_globals()
            torch.serialization.add_safe_globals(before)


def test_command_with_csv_only_and_a_clear_error_without_alphas(tiny, tmp_path, capsys):
    assert main(["-csv", tiny["csv"], "-out_dir", str(tmp_path)]) == 0
    _nontrivial_png(str(tmp_path / "alpha_trajectories.png"))
    with pytest.raises(SystemExit):
        main(["-checkpoint", tiny["dense"], "-out_dir", str(tmp_path)])
    assert "learn_alpha" in capsys.readouterr().err


def _alphas_refused(*args, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    lines = capsys.readouterr().err.splitlines()
    assert stop.value.code == 1 and len(lines) == 1, lines
    return lines[0]


def test_an_out_dir_that_is_a_file_and_a_binary_csv_are_refused_in_one_line(tmp_path, capsys):
    good = tmp_path / "model_alphas.csv"
    good.write_text("step,kind,layer,head,alpha\n5,enc_self,0,0,1.4\n")
    (tmp_path / "a_file").write_text("x")
    assert "-out_dir" in _alphas_refused("-csv", str(good), "-out_dir", str(tmp_path / "a_file"), capsys=capsys)
    for name, data in (("png.csv", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"), ("latin1.csv", b"step,kind\xe9\n"),
                       ("nul.csv", b"step,kind,layer,head,alpha\n5,enc\x00,0,0,1\n")):
        (tmp_path / name).write_bytes(data)
        line = _alphas_refused("-csv", str(tmp_path / name), "-out_dir", str(tmp_path / "out"), capsys=capsys)
        assert f"-csv: {tmp_path / name}" in line
    assert not (tmp_path / "out").exists()


def test_a_malformed_row_is_refused_naming_its_line(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("step,kind,layer,head,alpha\n5,enc_self,0,0,1.4\n10,enc_self,0,zero,1.3\n")
    with pytest.raises(ValueError, match=r"x.csv line 3: not an alphas CSV row"):
        read_alpha_csv(str(bad))
