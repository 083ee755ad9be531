"""End to end with Eole's own commands: ``eole build_vocab``, ``eole train -c configs/eole/<example>.yaml``
(shortened) and ``eole predict`` on the bundled SIGMORPHON sample, in fresh interpreters activated by the
import hook. One vocabulary and three short trainings are shared by the module's tests."""
import json
import math
import re
import shutil
import signal

import pytest
import torch
import yaml
from safetensors import safe_open

from console import stop_at_step
from eole_testkit import DATA, eole_command, run_eole, small_config

# each trained once for the module: (example config, steps)
EXAMPLES = {"rnn": ("rnn-entmax15", 40), "learned": ("transformer-learned-alpha", 20),
            "relu": ("transformer-alpha-relu", 10)}


@pytest.fixture(scope="module")
def vocab(workdir):
    config = small_config("rnn-entmax15", workdir, steps=1)
    run_eole(["build_vocab", "-c", config, "-n_sample", "-1"], cwd=workdir)
    return workdir / "run"


@pytest.fixture(scope="module")
def trained(workdir, vocab):
    """name -> (model directory, training log) of the shortened examples, trained on demand."""
    done: dict = {}

    def get(name):
        if name not in done:
            example, steps = EXAMPLES[name]
            directory = workdir / name
            directory.mkdir()
            config = small_config(example, directory, steps=steps)
            text = config.read_text().replace(str(directory / "run" / "vocab"), str(vocab / "vocab"))
            config.write_text(text)
            done[name] = (directory / "model", run_eole(["train", "-c", config], cwd=directory).stderr, config)
        return done[name]

    return get


def weights(model_dir) -> dict:
    with safe_open(str(model_dir / "model.00.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def predict(model_dir, cwd, *args, src=DATA / "src-dev.txt", n=12):
    """``eole predict -model_path MODEL_DIR (a list: an ensemble) -src (the first n lines) ARGS``."""
    src_file = cwd / f"src{n}.txt"
    src_file.write_text("".join(src.read_text().splitlines(keepends=True)[:n]))
    out = cwd / "pred.txt"
    models = model_dir if isinstance(model_dir, list) else [model_dir]
    proc = run_eole(["predict", "-model_path", *models, "-src", src_file, "-output", out, *args], cwd=cwd)
    return out.read_text().splitlines(), proc.stderr


def test_rnn_entmax15_trains_with_its_fenchel_young_loss_and_decodes_with_every_analysis(workdir, trained):
    model, log, _ = trained("rnn")
    assert "entmax15 FY loss" in log and "ppl:" not in log and "perplexity" not in log and "out nnz" in log
    tgt = workdir / "tgt12.txt"
    tgt.write_text("".join((DATA / "tgt-dev.txt").read_text().splitlines(keepends=True)[:12]))
    report, heatmap = workdir / "report.jsonl", workdir / "heat.png"
    out, log = predict(model, workdir, "-beam_size", "4", "-n_best", "2", "-length_penalty", "none", "-with_score",
                       "-tgt", tgt, "-sparsity_stats", "-empty_check", "-forced_support", "-exact_search",
                       "-exact_max_expansions", "50", "-enumerate_support", "-enumerate_cap", "5",
                       "-attn_heatmap", heatmap, "-entmax_report", report)
    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["id"] for r in records] == list(range(1, 13))
    assert len(out) == sum(max(r["n_hyps"], 1) for r in records)  # n-best lines: only nonzero probabilities
    for r in records:
        assert {"certified", "output_support", "attended", "empty_wins", "forced", "support", "exact"} <= set(r)
        assert all(h["score"] is not None for h in r["hypotheses"])  # finite: no -65504 stand-in ever won
        if r["hypotheses"]:  # the analyses' forced pass gives the beam's own score of its best hypothesis
            assert r["beam_log_prob"] == pytest.approx(r["hypotheses"][0]["score"], abs=1e-4)
    scores = [float(line.split("\t")[1]) for line in out]
    assert all(math.isfinite(s) for s in scores)
    assert heatmap.read_bytes()[:4] == b"\x89PNG"
    assert "[entmax] 12 sentences" in log and "exactness certificate" in log
    assert "attention heatmap of sentence 1 (the decoder's global attention)" in log  # what it draws, named


@pytest.mark.parametrize("example", ["rnn", "learned"])
def test_the_scorer_steps_the_decoder_as_the_teacher_forced_pass_scores_and_exact_search_agrees(trained, example):
    """EoleScorer.start/advance (one decoder step a prefix, the KV cache for the Transformer) give the rows of
    the full-sequence pass: the same zeros, the same probabilities up to float rounding; exact search
    stepping finds what it finds scoring every prefix from BOS."""
    from eole.config.run import PredictConfig
    from eole.predict import build_predictor

    from onmt_entmax.decoding import exact_search
    from onmt_entmax.eole.decoding.scorer import EoleScorer

    model, _, _ = trained(example)
    predictor = build_predictor(PredictConfig(model_path=[str(model)], src=str(DATA / "src-dev.txt")), -1)
    voc = predictor.vocabs["src"]
    eos = predictor._tgt_eos_idx[0] if isinstance(predictor._tgt_eos_idx, list) else predictor._tgt_eos_idx
    for line in (DATA / "src-dev.txt").read_text().splitlines()[:3]:
        ids = [voc.lookup_token(t) for t in line.split()]
        scorer = EoleScorer(predictor, {"src": torch.tensor([ids]), "srclen": torch.tensor([len(ids)])}, 0)
        prefixes, stepped = [()], [scorer.start()]
        for _ in range(3):  # each row's two most probable children, one depth a call
            top = stepped[-1].topk(2, dim=-1).indices.tolist()
            parents = [i for i, t in enumerate(top) for _ in t]
            tokens = [v for t in top for v in t]
            stepped.append(scorer.advance(parents, tokens))
            prefixes += [prefixes[len(prefixes) - len(top) + p] + (v,) for p, v in zip(parents, tokens)]
        stepped = torch.cat(stepped)
        forced = scorer(prefixes)  # (after the steps: a full-sequence pass resets the decoder's state)
        with pytest.raises(RuntimeError, match="call start"):
            scorer.advance([0], [eos])  # (so stepping on from there is refused)
        assert torch.equal(torch.isfinite(stepped), torch.isfinite(forced))
        torch.testing.assert_close(stepped.exp(), forced.exp(), rtol=1e-3, atol=1e-5)  # probabilities
        found = exact_search(scorer, eos=eos, max_length=20, n_best=2)
        again = exact_search(lambda p: scorer(p), eos=eos, max_length=20, n_best=2)
        assert [t for t, _ in found] == [t for t, _ in again]
        assert [s for _, s in found] == pytest.approx([s for _, s in again], abs=1e-4)


def _scorers(model_dir):
    """sentence -> EoleScorer of one model alone (its own predictor), and the target vocabulary."""
    from eole.config.run import PredictConfig
    from eole.predict import build_predictor

    from onmt_entmax.eole.decoding.scorer import EoleScorer

    predictor = build_predictor(PredictConfig(model_path=[str(model_dir)], src=str(DATA / "src-dev.txt")), -1)
    voc = predictor.vocabs["src"]

    def scorer(line: str):
        ids = [voc.lookup_token(t) for t in line.split()]
        return EoleScorer(predictor, {"src": torch.tensor([ids]), "srclen": torch.tensor([len(ids)])}, 0)

    return scorer, predictor.vocabs["tgt"]


def test_an_ensemble_of_sparse_models_decodes_the_average_of_its_members_probabilities(workdir, trained):
    """``eole predict -model_path RNN TRANSFORMER``: each hypothesis's score is sum_t log((p1 + p2) / 2) of
    the two models' own 1.5-entmax probabilities (each scored alone here), a token is -inf exactly where
    both give it 0, and only nonzero-probability hypotheses are printed."""
    rnn, _, _ = trained("rnn")
    transformer, _, _ = trained("learned")
    report = workdir / "ensemble.jsonl"
    out, log = predict([rnn, transformer], workdir, "-beam_size", "4", "-n_best", "3", "-length_penalty", "none",
                       "-with_score", "-batch_size", "1", "-sparsity_stats", "-enumerate_support",
                       "-enumerate_cap", "5", "-entmax_report", report, n=4)
    assert "exactness certificate" in log
    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert len(out) == sum(max(r["n_hyps"], 1) for r in records)
    (score_rnn, tgt), (score_tf, _) = _scorers(rnn), _scorers(transformer)
    eos = tgt.lookup_token("</s>")
    checked = 0
    for r, line in zip(records, (DATA / "src-dev.txt").read_text().splitlines()[:4]):
        for h in r["hypotheses"]:
            hyp = [tgt.lookup_token(t) for t in h["text"].split()] + [eos]
            lp_rnn = score_rnn(line).forced([hyp[:-1]])[0][0, : len(hyp)]  # (T, V): log p(. | y_<t, x)
            lp_tf = score_tf(line).forced([hyp[:-1]])[0][0, : len(hyp)]
            average = torch.logsumexp(torch.stack([lp_rnn, lp_tf]), 0) - math.log(2)
            assert torch.equal(torch.isinf(average), torch.isinf(lp_rnn) & torch.isinf(lp_tf))
            assert torch.isinf(average).any()  # sparse: some tokens have probability 0 under both
            want = float(average.gather(1, torch.tensor(hyp).view(-1, 1)).sum())
            assert h["score"] == pytest.approx(want, abs=1e-4)
            checked += 1
    assert checked >= 4


def test_an_ensemble_of_a_model_with_itself_decodes_as_the_model_alone(workdir, trained):
    rnn, _, _ = trained("rnn")
    args = ("-beam_size", "4", "-n_best", "2", "-length_penalty", "none", "-with_score")
    alone, _ = predict(rnn, workdir, *args, n=6)
    twice, _ = predict([rnn, rnn], workdir, *args, n=6)
    assert [x.split("\t")[0] for x in twice] == [x.split("\t")[0] for x in alone]
    assert [float(x.split("\t")[1]) for x in twice] == pytest.approx([float(x.split("\t")[1]) for x in alone],
                                                                      abs=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_an_ensemble_decoded_on_cuda_gives_the_cpus_outputs_and_scores(workdir, trained):
    """The RNN + Transformer ensemble on the GPU (the Transformer's KV cache, the fused sparse attention
    and the kernels' log-probabilities) decodes what the CPU decodes."""
    models = [trained("rnn")[0], trained("learned")[0]]
    args = ("-beam_size", "4", "-n_best", "2", "-length_penalty", "none", "-with_score", "-batch_size", "8")
    cpu, _ = predict(models, workdir, *args, n=40)
    gpu, _ = predict(models, workdir, *args, "-gpu_ranks", "0", "-world_size", "1", n=40)
    assert [x.split("\t")[0] for x in gpu] == [x.split("\t")[0] for x in cpu]
    assert [float(x.split("\t")[1]) for x in gpu] == pytest.approx([float(x.split("\t")[1]) for x in cpu],
                                                                    abs=1e-3)


def test_an_ensemble_of_models_with_other_vocabularies_is_refused_in_one_line(workdir, trained):
    rnn, _, _ = trained("rnn")
    other = workdir / "other-vocab"
    shutil.copytree(rnn, other)
    vocab = json.loads((other / "vocab.json").read_text())
    vocab["tgt"][-2:] = vocab["tgt"][-1:-3:-1]  # two target tokens swapped
    (other / "vocab.json").write_text(json.dumps(vocab))
    src = workdir / "src1.txt"
    src.write_text((DATA / "src-dev.txt").read_text().splitlines(keepends=True)[0])
    proc = run_eole(["predict", "-model_path", rnn, other, "-src", src, "-output", workdir / "never.txt"],
                    cwd=workdir, check=False)
    assert proc.returncode != 0 and not (workdir / "never.txt").exists()
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("onmt-entmax: model_path: ensemble members must share one target vocabulary")
    assert "Traceback" not in proc.stderr


def test_learned_alphas_are_checkpoint_weights_restored_by_predict_and_train_from(workdir, trained):
    model, log, config = trained("learned")
    saved = {k: v for k, v in weights(model).items() if k.endswith("softmax.alpha.a")}
    assert len(saved) == 6  # 2 layers x (encoder self, decoder self, context)
    assert any(not torch.equal(a, torch.zeros_like(a)) for a in saved.values())  # they moved from alpha = 1.5
    alphas = next(x for x in log.splitlines() if "learned alpha enc: " in x)  # one line a report
    assert " | dec self: " in alphas and " | ctx: " in alphas and alphas.count(" / ") == 3  # 2 layers a kind
    out, _ = predict(model, workdir, "-beam_size", "3", n=4)
    assert len(out) == 4

    resumed = yaml.safe_load(config.read_text())
    resumed["training"].update(train_from=str(model), model_path=str(workdir / "resumed"), train_steps=21,
                               save_checkpoint_steps=21, valid_steps=21)
    resumed["report_every"] = 1
    config.write_text(yaml.safe_dump(resumed))
    run_eole(["train", "-c", config], cwd=config.parent)
    after = weights(workdir / "resumed")
    for key, a in saved.items():  # one Adam step (lr 1e-3) from the saved alphas, not from the start a = 0
        assert torch.allclose(after[key], a, atol=2e-3), key
    assert any(not torch.allclose(after[key], torch.zeros_like(a), atol=2e-3) for key, a in saved.items())


def test_alpha_relu_resolves_tau_on_the_first_batch_and_decodes_with_it(workdir, trained):
    model, log, _ = trained("relu")
    assert "generator_tau auto: tau =" in log and "1.5-ReLU FY loss" in log
    tau = weights(model)["generator.tau"]
    logged = float(log.split("generator_tau auto: tau = ")[1].split()[0])
    assert tau.shape == (1,) and tau.item() == pytest.approx(logged, rel=1e-5)
    out, log = predict(model, workdir, "-beam_size", "3", "-sparsity_stats", n=4)
    assert len(out) == 4 and "per-step sum of output probabilities: mean" in log
    # which attention the attended-token count (and a heatmap) reads: Eole's Transformer returns one head
    assert re.search(r"attended source tokens .*; head 1 of \d+ of the context attention of decoder layer \d+", log)


def test_predict_refuses_to_write_over_its_source_in_one_line(workdir, trained):
    model_dir, _, _ = trained("rnn")
    src = workdir / "keep.src.txt"
    src.write_text("".join((DATA / "src-dev.txt").read_text().splitlines(keepends=True)[:3]))
    before = src.read_bytes()
    proc = run_eole(["predict", "-model_path", model_dir, "-src", src, "-output", src], cwd=workdir, check=False)
    assert proc.returncode != 0 and src.read_bytes() == before
    assert proc.stderr.strip().splitlines()[-1] == (f"onmt-entmax: -output {src} is the -src file: it would be "
                                                    "written over; choose another -output")


def test_predict_never_writes_into_its_model_folder(workdir, trained):
    """``-output M/model.00.safetensors`` (a link into ``M/step_N/``) is refused before anything is opened:
    the weights keep their bytes and the command ends in one line."""
    model_dir, _, _ = trained("rnn")
    target = model_dir / "model.00.safetensors"
    before = target.read_bytes()
    src = workdir / "keep.src.txt"
    src.write_text("".join((DATA / "src-dev.txt").read_text().splitlines(keepends=True)[:3]))
    proc = run_eole(["predict", "-model_path", model_dir, "-src", src, "-output", target], cwd=workdir, check=False)
    assert proc.returncode == 1 and target.read_bytes() == before
    assert len(proc.stderr.strip().splitlines()) == 1 and "-output" in proc.stderr


def test_a_bad_option_is_one_line_naming_it_before_anything_runs(workdir):
    (workdir / "bad").mkdir()
    config = small_config("rnn-entmax15", workdir / "bad", steps=1)
    config.write_text(config.read_text().replace("generator_function: entmax15", "generator_fuction: entmax15"))
    proc = run_eole(["train", "-c", config], cwd=workdir / "bad", check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("onmt-entmax: ") and "model.generator_fuction: unknown option; did you mean " \
                                                    "'generator_function'?" in last
    assert "Traceback" not in proc.stderr


def test_sigterm_ends_eole_train_after_its_step_with_that_step_saved(workdir, vocab):
    """stop_on_signal / stop_between_steps in Eole: the step under way finishes, step_N is saved, exit 143."""
    directory = workdir / "stopped"
    directory.mkdir()
    config = small_config("rnn-entmax15", directory, steps=1_000_000, num_workers=0)
    cfg = yaml.safe_load(config.read_text().replace(str(directory / "run" / "vocab"), str(vocab / "vocab")))
    cfg["report_every"] = 1
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    code, log = stop_at_step(eole_command() + ["train", "-c", str(config)], directory, 3)
    assert code == 128 + signal.SIGTERM, log[-3000:]
    step = int(re.search(r"SIGTERM: stopping after step (\d+); its checkpoint is saved next", log).group(1))
    assert step >= 3 and step == max(int(s) for s in re.findall(r"Step +(\d+)[/;]", log))
    assert [p.name for p in (directory / "model").glob("step_*")] == [f"step_{step}"]
    assert (directory / "model" / f"step_{step}" / "optimizer.pt").exists()


def test_eole_train_takes_rnn_cuda_graphs_and_refuses_what_its_graphs_cannot_replay(workdir, vocab):
    directory = workdir / "graphs"
    directory.mkdir()
    config = small_config("rnn-entmax15", directory, steps=2, rnn_cuda_graphs=True)
    config.write_text(config.read_text().replace(str(directory / "run" / "vocab"), str(vocab / "vocab")))
    log = run_eole(["train", "-c", config], cwd=directory).stderr
    assert "rnn_cuda_graphs: the decoder's training steps run as CUDA graphs (on a GPU only: eager here)" in log
    config.write_text(config.read_text().replace("rnn_cuda_graphs: true", "rnn_cuda_graphs: true\n  accum_count: [2]"))
    proc = run_eole(["train", "-c", config], cwd=directory, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "training.accum_count 2 is set" in last and "Traceback" not in proc.stderr


def test_predict_refuses_a_source_line_longer_than_the_position_encoding_before_decoding(workdir, trained):
    """Eole's sinusoidal table has 5000 rows: a longer line ended the run in SequenceTooLongError at its batch."""
    model_dir, _, _ = trained("relu")
    src = workdir / "long.src.txt"
    src.write_text("a b\n" + " ".join(["a"] * 5001) + "\n")
    out = workdir / "long.pred.txt"
    proc = run_eole(["predict", "-model_path", model_dir, "-src", src, "-output", out], cwd=workdir, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"-src {src} line 2 has 5001 tokens" in lines[-1] and "5000" in lines[-1]
    assert not out.exists() or out.read_text() == ""


def _model_copy(model_dir, to, change=None):
    """A copy of a model folder (its links into step_N/ copied as files); ``change(tensors)`` edits its weights
    and returns the name of the weight it changed: (the copy, that name)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, to)
    if change is None:
        return to, None
    tensors = load_file(str(to / "model.00.safetensors"))
    key = change(tensors)
    save_file(tensors, str(to / "model.00.safetensors"))
    return to, key


def _poison(value, key_end):
    def change(tensors):
        key = next(k for k in tensors if k.endswith(key_end))
        tensors[key] = tensors[key].clone()
        tensors[key].view(-1)[0] = value
        return key
    return change


def test_predict_and_train_from_refuse_a_model_whose_weights_are_not_finite(workdir, trained):
    """A NaN learned alpha or an inf weight (a diverged run) decoded every line empty with exit status 0, and
    train_from trained on at NaN: refused in one line naming the weight and its file."""
    from eole.config.run import PredictConfig, TrainConfig
    from eole.predict import build_predictor
    from eole.train_single import main as train_main

    from onmt_entmax.errors import ConfigError

    model, _, config = trained("learned")
    nan, key = _model_copy(model, workdir / "nan-alpha", _poison(float("nan"), "softmax.alpha.a"))
    src = workdir / "src2.txt"
    src.write_text("".join((DATA / "src-dev.txt").read_text().splitlines(keepends=True)[:2]))
    out = workdir / "nan.pred.txt"
    proc = run_eole(["predict", "-model_path", nan, "-src", src, "-output", out], cwd=workdir, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and not out.exists()
    assert str(nan / "model.00.safetensors") in last and key in last
    inf, inf_key = _model_copy(model, workdir / "inf-weight", _poison(float("inf"), "mlp.down_proj.weight"))
    with pytest.raises(ConfigError, match=inf_key):
        build_predictor(PredictConfig(model_path=[str(inf)], src=str(src)), -1)
    resumed = yaml.safe_load(config.read_text())
    resumed["training"].update(train_from=str(nan), model_path=str(workdir / "from-nan"))
    with pytest.raises(ConfigError, match=key):
        train_main(TrainConfig(**resumed), -1)
    assert not (workdir / "from-nan").exists()


def test_train_from_refuses_an_optimizer_state_that_is_not_finite(workdir, trained):
    """Finite weights with a NaN Adam moment in optimizer.pt trained to NaN from the first resumed step: refused
    before a step runs, naming the state."""
    import torch
    from eole.config.run import TrainConfig
    from eole.train_single import main as train_main

    from onmt_entmax.errors import ConfigError

    model, _, config = trained("learned")
    copy, _ = _model_copy(model, workdir / "nan-moment")
    state = torch.load(copy / "optimizer.pt", weights_only=True)
    moments = next(iter(state["optimizer"]["state"].values()))
    moments["exp_avg"].view(-1)[0] = float("nan")
    torch.save(state, copy / "optimizer.pt")
    resumed = yaml.safe_load(config.read_text())
    resumed["training"].update(train_from=str(copy), model_path=str(workdir / "from-nan-moment"))
    with pytest.raises(ConfigError, match="exp_avg holds NaN"):
        train_main(TrainConfig(**resumed), -1)
    assert not (workdir / "from-nan-moment").exists()


def test_a_model_folder_with_a_file_missing_truncated_or_malformed_is_refused_naming_it(workdir, trained):
    """What Eole reads from a model folder (config.json, vocab.json, model.00.safetensors) ended in a traceback
    or an error naming no file; every load path (predict, an ensemble member, train_from) names it."""
    import eole.train_single
    from eole.config.run import PredictConfig
    from eole.predict import build_predictor

    from onmt_entmax.errors import ConfigError

    model, _, _ = trained("rnn")
    src = workdir / "src1.txt"
    src.write_text((DATA / "src-dev.txt").read_text().splitlines(keepends=True)[0])

    def truncate(path):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    def bad_value(path):
        config = json.loads(path.read_text())
        config["model"]["hidden_size"] = "wide"
        path.write_text(json.dumps(config))

    cases = {"model.00.safetensors": (lambda p: p.unlink(), truncate),
             "vocab.json": (lambda p: p.unlink(), truncate),
             "config.json": (lambda p: p.unlink(), truncate, bad_value)}
    for name, changes in cases.items():
        for i, change in enumerate(changes):
            folder, _ = _model_copy(model, workdir / f"broken-{name}-{i}")
            change(folder / name)
            names = (str(folder / name), str(folder))  # (the folder for a file it lacks)
            loads = [lambda: build_predictor(PredictConfig(model_path=[str(model), str(folder)], src=str(src)), -1),
                     lambda: eole.train_single.get_metadata(str(folder))]
            if (name, i) != ("config.json", 0):  # (without one, eole predict's file checks refuse the folder first)
                loads.append(lambda: build_predictor(PredictConfig(model_path=[str(folder)], src=str(src)), -1))
            for load in loads:
                with pytest.raises(ConfigError) as err:
                    load()
                text = str(err.value)
                assert "\n" not in text and any(text.startswith(n) for n in names), (name, i, text)
