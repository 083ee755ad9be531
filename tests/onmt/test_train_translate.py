"""Every generator_function with a sparse attention, RNN and Transformer, through the real entry
points: train a few dozen steps, save, reload, resume with -train_from, translate."""
import pytest
import torch

from onmt_testkit import build_vocab, train, translate, yaml_config

from onmt_entmax.modules import AttentionNormalizer, EntmaxGenerator

GENERATORS = [
    ("softmax", {}, "entmax15"),
    ("sparsemax", {}, "sparsemax"),
    ("entmax15", {}, "entmax15"),
    ("entmax_bisect", dict(generator_alpha=1.3, bisect_iter=25), "entmax_bisect"),
    ("alpha_relu", dict(generator_alpha=1.5, generator_tau="auto"), "entmax15"),
]
ARCHS = {
    "rnn": lambda attn: dict(encoder_type="brnn", decoder_type="rnn", rnn_type="LSTM", layers=1, hidden_size=32,
                             word_vec_size=16, dropout=0.0, global_attention_function=attn, global_attention_alpha=1.2),
    "transformer": lambda attn: dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True,
                                     layers=1, hidden_size=32, word_vec_size=32, transformer_ff=32, heads=2,
                                     attention_function=attn, attention_alpha=1.4,
                                     learn_alpha=attn == "entmax_bisect"),
}


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("gen,gen_opts,attn", GENERATORS, ids=[g[0] for g in GENERATORS])
def test_train_save_resume_translate(toy, arch, gen, gen_opts, attn):
    model = dict(ARCHS[arch](attn), generator_function=gen, **gen_opts)
    config = yaml_config(toy, model, steps=20)
    build_vocab(config)
    train(config)
    first = toy / "run/model_step_20.pt"
    ckpt = torch.load(first)  # torch's weights-only default: our allowlist is enough
    assert ckpt["opt"].generator_function == gen
    if gen == "alpha_relu":
        tau = float(ckpt["generator"]["tau"][0])
        assert tau == tau, "generator_tau auto was resolved on the first batch and saved"
    if arch == "transformer" and attn == "entmax_bisect":
        alphas = [v for k, v in ckpt["model"].items() if k.endswith("softmax.alpha.a")]
        assert len(alphas) == 3 and all(a.shape == (2,) for a in alphas)  # enc self, dec self, context

    train(config, "-train_from", str(first), "-train_steps", "30")  # resume
    resumed = torch.load(toy / "run/model_step_30.pt")
    assert resumed["optim"]["training_step"] == 31
    changed = [k for k in ckpt["model"] if not torch.equal(ckpt["model"][k], resumed["model"][k])]
    assert changed, "resuming trained the loaded model further"

    out = translate(toy / "run/model_step_30.pt", toy / "src-test.txt", toy / "pred.txt", "-beam_size", "3",
                    "-max_length", "12")
    assert len(out) == 20
    assert all(set(line.split()) <= set("abcdefgh") for line in out)


def test_reloaded_model_has_the_trained_mapping_everywhere(toy):
    from onmt.bin.translate import _get_parser
    from onmt.model_builder import load_test_model

    model = dict(ARCHS["transformer"]("entmax_bisect"), generator_function="entmax_bisect", generator_alpha=1.3)
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    opt = _get_parser().parse_args(["-model", str(toy / "run/model_step_2.pt"), "-src", "x"])
    _, loaded, model_opt = load_test_model(opt)
    assert isinstance(loaded.generator, EntmaxGenerator)
    assert loaded.generator.transformation.spec()[:2] == ("entmax_bisect", 1.3)
    norms = [m for m in loaded.modules() if isinstance(m, AttentionNormalizer)]
    assert len(norms) == 3 and all(n.alpha is not None for n in norms)
    state = torch.load(toy / "run/model_step_2.pt")["model"]
    saved = [state[k] for k in sorted(state) if k.endswith("softmax.alpha.a")]
    loaded_alphas = [dict(loaded.named_parameters())[k] for k in sorted(state) if k.endswith("softmax.alpha.a")]
    assert all(torch.equal(a, b) for a, b in zip(saved, loaded_alphas))


def test_translate_time_override_and_its_limits(toy, caplog):
    model = dict(ARCHS["rnn"]("entmax15"), generator_function="entmax15")
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    ckpt = toy / "run/model_step_2.pt"
    stored = translate(ckpt, toy / "src-test.txt", toy / "p.txt", "-with_score")
    with caplog.at_level("WARNING"):
        out = translate(ckpt, toy / "src-test.txt", toy / "p.txt", "-generator_function", "sparsemax", "-with_score")
    assert "onmt_translate overrides the model's generator_function='entmax15' with 'sparsemax'" in caplog.text
    assert len(out) == 20
    # the scores are sparsemax's log-probabilities, not entmax15's: the override took effect
    assert [line.split("\t")[1] for line in out] != [line.split("\t")[1] for line in stored]
    assert _load(toy, 2, "-generator_function", "sparsemax").generator.transformation.name == "sparsemax"
    assert _load(toy, 2).generator.transformation.name == "entmax15"
    caplog.clear()
    with caplog.at_level("WARNING"):
        translate(ckpt, toy / "src-test.txt", toy / "p.txt", "-generator_alpha", "1.3")
    assert "onmt_translate override: generator_alpha=1.3 is ignored: entmax15 has alpha 1.5" in caplog.text
    with pytest.raises(ValueError, match="alpha_relu"):
        translate(ckpt, toy / "src-test.txt", toy / "p.txt", "-generator_function", "alpha_relu",
                  "-generator_tau", "0.1")


def _load(toy, step, *args):
    from onmt.bin.translate import _get_parser
    from onmt.model_builder import load_test_model

    opt = _get_parser().parse_args(["-model", str(toy / f"run/model_step_{step}.pt"), "-src", "x", *args])
    return load_test_model(opt)[1]


def test_per_kind_attention_and_the_sdpa_switch(toy):
    """Sparse attention modules leave OpenNMT-py's SDPA (softmax) fast path; softmax ones keep it."""
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    model = dict(ARCHS["transformer"]("entmax15"), generator_function="sparsemax",
                 dec_attention_function="entmax_bisect", dec_attention_alpha=1.25, context_attention_function="softmax")
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    loaded = _load(toy, 2)  # onmt_translate asks for scaled-dot-flash by default; the plugin overrides it
    seen = {}
    for m in loaded.modules():
        if isinstance(m, MultiHeadedAttention):
            norm = m.softmax
            kind = getattr(norm, "kind", "context")
            seen[kind] = (norm.transformation.describe() if isinstance(norm, AttentionNormalizer) else "softmax",
                          m.self_attn_type)
    assert seen["enc"] == ("entmax15", "scaled-dot")
    assert seen["dec"] == ("entmax_bisect(alpha=1.25)", "scaled-dot")
    assert seen["context"] == ("softmax", "scaled-dot-flash")


def test_tensorboard_has_fy_loss_sparsity_and_alpha_per_head_and_no_perplexity(toy):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = dict(ARCHS["transformer"]("entmax_bisect"), generator_function="entmax15")
    config = yaml_config(toy, model, steps=2, extra=f"tensorboard: true\ntensorboard_log_dir: {toy}/tb\n")
    build_vocab(config)
    train(config, "-report_every", "1")
    (run,) = (toy / "tb").iterdir()
    acc = EventAccumulator(str(run))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/fy_loss", "train/out_nnz", "train/attn_nnz", "valid/fy_loss"} <= set(tags)
    assert not any(t.endswith("/ppl") or t.endswith("/xent") for t in tags)
    alpha_tags = [t for t in tags if t.startswith("train/alpha/")]
    assert len(alpha_tags) == 3 * 2  # enc self, dec self, context x 2 heads


def test_alpha_relu_model_without_a_resolved_tau_is_refused_at_translation(toy):
    model = dict(ARCHS["rnn"]("entmax15"), generator_function="alpha_relu", generator_tau="auto")
    config = yaml_config(toy, model, steps=1)
    build_vocab(config)
    train(config)
    ckpt = torch.load(toy / "run/model_step_1.pt")
    ckpt["generator"]["tau"].fill_(float("nan"))  # as if saved before the first batch
    torch.save(ckpt, toy / "run/broken.pt")
    with pytest.raises(ValueError, match="generator_tau"):
        translate(toy / "run/broken.pt", toy / "src-test.txt", toy / "p.txt")
    out = translate(toy / "run/broken.pt", toy / "src-test.txt", toy / "p.txt", "-generator_tau", "0.3")
    assert len(out) == 20


def test_generator_tau_formula_sets_the_closed_form_threshold(toy):
    """generator_tau: formula = eq. (3) of Speeding Up Entmax for this model's d_model and vocabulary,
    fixed when the model is built, saved, and usable as a translate-time override too."""
    from onmt_entmax.ops.tau_estimate import tau_formula

    model = dict(ARCHS["transformer"]("entmax15"), generator_function="alpha_relu", generator_alpha=1.5,
                 generator_tau="formula")
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    ckpt = torch.load(toy / "run/model_step_2.pt")
    weight = ckpt["generator"]["weight"]
    expected = tau_formula(weight.shape[1], weight.shape[0], alpha=1.5)
    assert float(ckpt["generator"]["tau"][0]) == pytest.approx(expected, rel=1e-6)
    out = translate(toy / "run/model_step_2.pt", toy / "src-test.txt", toy / "p.txt", "-generator_tau", "formula")
    assert len(out) == 20


def test_a_gpu_load_starts_the_kernel_setup_of_a_sparse_model_only(toy, monkeypatch):
    """onmt_translate -gpu N: a sparse model's load starts the kernels' host set-up in the
    background, while its weights load (the warm-up then finds it done); a softmax model (here the
    same checkpoint with its output overridden to softmax), or a CPU load, starts nothing."""
    import onmt.utils.misc
    from onmt.bin.translate import _get_parser
    from onmt.model_builder import load_test_model

    from onmt_entmax import ops

    model = dict(ARCHS["transformer"]("softmax"), generator_function="entmax15")
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    started = []
    monkeypatch.setattr(ops, "prepare_kernels_in_background", lambda: started.append(True) or True)
    on_gpu = [False]  # what our wrapper is told; upstream keeps loading onto the CPU
    monkeypatch.setattr(onmt.utils.misc, "use_gpu", lambda opt: on_gpu[0])

    def load(*extra):
        opt = _get_parser().parse_args(["-model", str(toy / "run/model_step_2.pt"), "-src", "x", *extra])
        return load_test_model(opt)[1]

    load()
    assert started == []
    on_gpu[0] = True
    assert isinstance(load().generator, EntmaxGenerator)
    assert started == [True]
    assert load("-generator_function", "softmax").generator.transformation.spec()[0] == "softmax"
    assert started == [True]
