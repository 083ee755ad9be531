"""End to end: real onmt_build_vocab / onmt_train / onmt_translate on a tiny sequence-reversal task.

A 1-layer LSTM with 1.5-entmax output and attention learns to reverse strings over 6 symbols
in 150 steps (~10 s on 2 CPU cores); a softmax twin is the dense reference. Each translation is a
subprocess through the real entry points with the plugin activated by its import hook.
"""
import json
import math
import os
import random
import re
import subprocess
import sys

import pytest
import torch

pytest.importorskip("onmt")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DRIVER = f"""
import os, sys
sys.path.insert(0, {REPO!r})
mode, module = sys.argv[1], sys.argv[2]
if mode == "plugin":
    from onmt_entmax.autoload import install_hook
    install_hook()
else:  # everything but this issue's decoding patches: the stock decoder as reference
    import onmt
    from onmt_entmax.onmt.patches import PATCHES, SPARSE_DECODING, apply_patches
    apply_patches([p for p in PATCHES if p.name not in SPARSE_DECODING])
import importlib
sys.argv = [module] + sys.argv[3:]
importlib.import_module(module).main()
"""
CONFIG = """
save_data: run
src_vocab: run/vocab.src
tgt_vocab: run/vocab.tgt
overwrite: true
data:
  corpus_1: {{path_src: src-train.txt, path_tgt: tgt-train.txt}}
save_model: run/{name}
save_checkpoint_steps: {steps}
train_steps: {steps}
batch_size: 32
batch_type: sents
bucket_size: 2048
num_workers: 0
encoder_type: rnn
decoder_type: rnn
rnn_type: LSTM
layers: 1
hidden_size: 48
word_vec_size: 24
optim: adam
learning_rate: 0.01
report_every: 50
seed: 1
generator_function: {fn}
global_attention_function: {fn}
"""
RELU_CONFIG = """
save_data: run
src_vocab: run/vocab.src
tgt_vocab: run/vocab.tgt
overwrite: true
data:
  corpus_1: {path_src: src-train.txt, path_tgt: tgt-train.txt}
save_model: run/relu
save_checkpoint_steps: 150
train_steps: 150
batch_size: 32
batch_type: sents
bucket_size: 2048
num_workers: 0
encoder_type: transformer
decoder_type: transformer
position_encoding: true
layers: 1
heads: 2
hidden_size: 32
word_vec_size: 32
transformer_ff: 64
dropout: 0.0
optim: adam
learning_rate: 0.005
seed: 1
generator_function: alpha_relu
generator_tau: auto
attention_function: entmax15
"""


def run(workdir, module, *args, mode="plugin", check=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    if mode == "plugin":
        env.pop("ONMT_ENTMAX_DISABLE", None)
    else:
        env["ONMT_ENTMAX_DISABLE"] = "1"
    proc = subprocess.run([sys.executable, "driver.py", mode, module, *map(str, args)], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} {' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}")
    return proc


def translate(workdir, *args, **kw):
    return run(workdir, "onmt.bin.translate", "-src", "src-test.txt", *args, **kw)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("decoding_e2e")
    rng = random.Random(0)
    for name, n in (("train", 600), ("test", 20)):
        src = [[rng.choice("abcdef") for _ in range(rng.randint(2, 5))] for _ in range(n)]
        (d / f"src-{name}.txt").write_text("".join(" ".join(s) + "\n" for s in src))
        (d / f"tgt-{name}.txt").write_text("".join(" ".join(reversed(s)) + "\n" for s in src))
    (d / "driver.py").write_text(DRIVER)
    for name, fn, steps in (("sparse", "entmax15", 150), ("dense", "softmax", 40)):
        (d / f"{name}.yaml").write_text(CONFIG.format(name=name, fn=fn, steps=steps))
    (d / "relu.yaml").write_text(RELU_CONFIG)
    run(d, "onmt.bin.build_vocab", "-config", "sparse.yaml", "-n_sample", "-1")
    for name in ("sparse", "dense", "relu"):
        run(d, "onmt.bin.train", "-config", f"{name}.yaml")
    return d


SPARSE, DENSE, RELU = "run/sparse_step_150.pt", "run/dense_step_40.pt", "run/relu_step_150.pt"


def _lines(path):
    return [line.rstrip("\n") for line in open(path, encoding="utf-8")]


SPARSE_ARGS = ["-beam_size", 30, "-n_best", 30, "-with_score", "-length_penalty", "none"]


@pytest.fixture(scope="module")
def sparse_run(workdir):
    return translate(workdir, "-model", SPARSE, "-tgt", "tgt-test.txt", "-output", "pred.txt", *SPARSE_ARGS,
                     "-entmax_report", "rep.jsonl", "-enumerate_support", "-exact_search", "-empty_check",
                     "-sparsity_stats", "-forced_support", "-attn_heatmap", "heat.png", "-heatmap_sentence", 2)


def test_sparse_translation_certificates_enumeration_and_analyses(workdir, sparse_run):
    proc = sparse_run
    recs = [json.loads(line) for line in open(workdir / "rep.jsonl")]
    assert [r["id"] for r in recs] == list(range(1, 21))
    out = _lines(workdir / "pred.txt")
    # n_best lists hold only nonzero-probability hypotheses: fewer lines than 20 * 30, all finite scores
    assert len(out) == sum(max(r["n_hyps"], 1) for r in recs) < 20 * 30
    assert all(math.isfinite(float(line.split("\t")[1])) for line in out)
    certified = [r for r in recs if r["certified"]]
    assert certified, "a trained sparse model should give some exhaustive beams at beam 30"
    for r in recs:
        assert all(h["score"] is not None for h in r["hypotheses"])
        if r["certified"]:  # Peters et al.'s certificate: the beam found the whole support
            assert "size" in r["support"] and r["n_hyps"] == r["support"]["size"]
            assert {h["text"] for h in r["hypotheses"]} == {s["text"] for s in r["support"]["sequences"]}
            assert r["exact"]["agrees"] and r["optimal"]
        if "size" in r["support"]:
            assert r["support"]["mass"] == pytest.approx(1.0, abs=1e-3)
        else:
            assert "cap=100" in r["support"]["error"]
        assert r["empty_wins"] is False or r["empty_log_prob"] is not None
        assert r["output_support"] >= 1 and r["attended"] >= 1 and r["prob_sum"] == pytest.approx(1.0, abs=1e-4)
        steps = r["forced"]
        assert steps[-1]["gold"] == "</s>"
        for s in steps:  # every listed candidate has p > 0; the gold's p matches its listing
            assert all(p > 0 for _, p in s["support"])
            listed = dict(s["support"])
            assert s["gold_prob"] == pytest.approx(listed.get(s["gold"], 0.0), abs=1e-5)
    assert "exactness certificate" in proc.stderr and f"{len(certified)}/20" in proc.stderr
    assert (workdir / "heat.png").read_bytes()[:4] == b"\x89PNG"
    # per target token: each sentence weighs by its number of steps
    tokens = sum(r["target_tokens"] for r in recs)
    per_token = sum(r["output_support"] * r["target_tokens"] for r in recs) / tokens
    assert (f"nonzero output probabilities per target token: {per_token:.2f} (best hypotheses, {tokens} target "
            "tokens, EOS included)") in proc.stderr
    assert "attended source tokens per target token" in proc.stderr and "the decoder's global attention" in proc.stderr
    assert all(not h["cut"] for r in recs for h in r["hypotheses"])  # max_length 100: every one ended with EOS


def test_dense_model_decodes_exactly_as_stock(workdir):
    args = ["-model", DENSE, "-beam_size", 4, "-n_best", 2, "-min_length", 1, "-block_ngram_repeat", 3]
    stock = translate(workdir, *args, "-output", "stock.txt", mode="stock")
    ours = translate(workdir, *args, "-output", "ours.txt")
    assert _lines(workdir / "ours.txt") == _lines(workdir / "stock.txt")
    score = [line for line in stock.stderr.splitlines() if "PRED SCORE" in line][0].split("INFO] ")[1]
    assert score in ours.stderr
    assert "[entmax]" not in ours.stderr  # nothing extra for a dense model unless asked


def test_certificate_of_a_dense_model_is_refused(workdir):
    proc = translate(workdir, "-model", DENSE, "-output", "x.txt", "-certificate", check=False)
    assert proc.returncode != 0 and "-certificate needs a sparse output layer" in proc.stderr


def test_ensemble_averages_raw_probabilities(workdir, sparse_run):
    translate(workdir, "-model", SPARSE, SPARSE, "-tgt", "tgt-test.txt", *SPARSE_ARGS, "-output", "twice.txt")
    # (p + p) / 2 = p: an ensemble of a model with itself is that model, zeros included
    single = [line.split("\t") for line in _lines(workdir / "pred.txt")]
    twice = [line.split("\t") for line in _lines(workdir / "twice.txt")]
    assert [t for t, _ in twice] == [t for t, _ in single]
    assert [float(s) for _, s in twice] == pytest.approx([float(s) for _, s in single], abs=1e-5)


def test_ensemble_of_two_different_models_averages_their_probabilities(workdir):
    """A sparse (1.5-entmax) and a dense (softmax) model: each step's ensemble distribution is
    (p_sparse + p_dense) / 2, each member through its own mapping; not the mean of their log-probabilities."""
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    members = [SparseDecoder(str(workdir / m)) for m in (SPARSE, DENSE)]
    ensemble = SparseDecoder([str(workdir / SPARSE), str(workdir / DENSE)])
    src = (workdir / "src-test.txt").read_text().splitlines()[:4]
    tgt = (workdir / "tgt-test.txt").read_text().splitlines()[:4]
    for s, t in zip(src, tgt):
        steps = [[dict(x.support) for x in m.support_sets(s, t)] for m in members]
        both = [x.support for x in ensemble.support_sets(s, t)]
        for sparse, dense, got in zip(*steps, both):
            expected = {w: (sparse.get(w, 0.0) + dense[w]) / 2 for w in dense}
            assert dict(got) == pytest.approx(expected, abs=1e-5)
        mean = sum(math.log((sp.get(w, 0.0) + de[w]) / 2) for sp, de, w in zip(*steps, t.split() + ["</s>"]))
        assert ensemble.log_prob(s, t) == pytest.approx(mean, abs=1e-4)
        if any(w not in sp for sp, w in zip(steps[0], t.split() + ["</s>"])):
            assert math.isfinite(ensemble.log_prob(s, t))  # the dense member keeps the reference possible


def test_library_callers_get_a_value_error_never_system_exit(workdir):
    from onmt_entmax.errors import CheckpointError, EntmaxOptionError
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    with pytest.raises(EntmaxOptionError, match="invalid int value: .five."):
        SparseDecoder(str(workdir / SPARSE), options=["-beam_size", "five"])
    with pytest.raises(EntmaxOptionError, match="did you mean 'generator_alpha'"):
        SparseDecoder(str(workdir / SPARSE), options=["-generator_alhpa", "1.3"])
    with pytest.raises(EntmaxOptionError, match="-enumerate_cap must be >= 1"):
        SparseDecoder(str(workdir / SPARSE), options=["-enumerate_cap", "0"])
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        SparseDecoder(str(workdir / "run/none.pt"))


def test_a_report_over_the_checkpoint_is_refused_in_one_line_before_decoding(workdir):
    before = (workdir / SPARSE).read_bytes()
    proc = translate(workdir, "-model", SPARSE, "-output", "never.txt", "-entmax_report", SPARSE, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"onmt.bin.translate: error: -entmax_report {SPARSE} is the -model file: it would be written over; "
        "choose another -entmax_report")
    assert (workdir / SPARSE).read_bytes() == before
    assert not (workdir / "never.txt").exists()  # refused before upstream opened -output


def test_ensemble_of_models_with_different_target_vocabularies_is_refused(workdir):
    from onmt_entmax.onmt.checkpoint import allow_checkpoint_globals  # the integration's allowlist

    allow_checkpoint_globals()
    ckpt = torch.load(workdir / SPARSE, map_location="cpu")
    tgt = ckpt["vocab"]["tgt"]
    i, j = len(tgt) - 1, len(tgt) - 2
    tgt[i], tgt[j] = tgt[j], tgt[i]  # same words, different ids: averaging by index would be wrong
    torch.save(ckpt, workdir / "run" / "swapped.pt")
    proc = translate(workdir, "-model", SPARSE, "run/swapped.pt", "-output", "x.txt", check=False)
    assert proc.returncode != 0
    assert "ensemble members must share one target vocabulary" in proc.stderr


@pytest.mark.parametrize("options", [
    ["-coverage_penalty", "wu", "-beta", 0.3, "-stepwise_penalty", "-attn_debug", "-replace_unk",
     "-min_length", 3, "-block_ngram_repeat", 2, "-ban_unk_token"],
    ["-coverage_penalty", "summary", "-beta", 0.3, "-length_penalty", "wu", "-alpha", 0.6,
     "-tgt", "tgt-test.txt", "-tgt_file_prefix"],
])
def test_no_nan_and_no_zero_probability_output_with_any_option(workdir, options):
    # sparse attention gives zero coverage (log 0 in the wu penalty); the RNN is input-feed (time-first attention)
    translate(workdir, "-model", SPARSE, "-beam_size", 4, "-n_best", 2, "-with_score", "-output", "opt.txt",
              "-entmax_report", "opt.jsonl", *options)
    recs = [json.loads(line) for line in open(workdir / "opt.jsonl")]
    assert all(r["optimal"] is None for r in recs)  # a coverage penalty: the log-prob bound proves nothing
    lines = _lines(workdir / "opt.txt")
    assert len(lines) == sum(max(r["n_hyps"], 1) for r in recs)
    for line, r in zip(lines, (r for r in recs for _ in range(max(r["n_hyps"], 1)))):
        score = float(line.split("\t")[1])
        assert not math.isnan(score)
        assert math.isfinite(score) or (r["n_hyps"] == 0 and line.split("\t")[0] == "")


def test_transformer_alpha_relu_decodes_unnormalised_scores(workdir):
    proc = translate(workdir, "-model", RELU, "-tgt", "tgt-test.txt", "-beam_size", 5, "-n_best", 2, "-with_score",
                     "-output", "relu.txt", "-entmax_report", "relu.jsonl", "-sparsity_stats", "-forced_support")
    recs = [json.loads(line) for line in open(workdir / "relu.jsonl")]
    sums = [r["prob_sum"] for r in recs]
    assert all(s > 0 for s in sums) and max(sums) - min(sums) > 1e-3  # not renormalised to 1
    assert all(r["optimal"] is None for r in recs)  # the pruning bound needs p <= 1
    tokens = sum(r["target_tokens"] for r in recs)
    mean = sum(r["prob_sum"] * r["target_tokens"] for r in recs) / tokens
    lines = [line for line in proc.stderr.splitlines() if "sum of output probabilities" in line]
    assert len(lines) == 1 and f"mean {mean:.4f}" in lines[0] and f"over {tokens} target tokens" in lines[0]
    assert "head 1 of 2 of the context attention of decoder layer 1 (the last)" in proc.stderr
    refused = translate(workdir, "-model", RELU, "-output", "x.txt", "-exact_search", check=False)
    assert refused.returncode != 0 and "-exact_search needs a normalised output layer" in refused.stderr


def test_cut_hypotheses_are_flagged_and_a_gold_score_of_minus_inf_explained(workdir):
    (workdir / "tgt-wrong.txt").write_text((workdir / "src-test.txt").read_text())  # not reversed
    proc = translate(workdir, "-model", SPARSE, "-tgt", "tgt-wrong.txt", "-output", "cut.txt", "-beam_size", 5,
                     "-n_best", 3, "-max_length", 3, "-entmax_report", "cut.jsonl", "-forced_support")
    recs = [json.loads(line) for line in open(workdir / "cut.jsonl")]
    hyps = [h for r in recs for h in r["hypotheses"]]
    assert any(h["cut"] for h in hyps) and not all(h["cut"] for h in hyps)
    # cut = reached -max_length 3 without EOS: three tokens; a complete output has at most two before EOS
    assert all(len(h["text"].split()) == 3 if h["cut"] else len(h["text"].split()) <= 2 for h in hyps)
    cut = [r for r in recs if any(h["cut"] for h in r["hypotheses"])]
    assert f"{len(cut)} sentences have hypotheses cut at -max_length before EOS" in proc.stderr
    assert f"sentence {cut[0]['id']}: hypothesis" in proc.stderr
    zero = [r for r in recs if r["gold_score"] is None]  # log 0 = -inf, written as null
    assert zero and all(r["gold_log_prob"] is None for r in zero)  # forced decoding agrees on which
    assert "GOLD SCORE: -inf" in proc.stderr
    assert f"GOLD SCORE is -inf (GOLD PPL inf) because {len(zero)} of 20 references contain a token" in proc.stderr


def test_forced_support_alone_logs_every_reference_step(workdir):
    """-forced_support without -entmax_report: each reference's forced steps are in the log, a line a token
    (EOS last) with the reference's token marked, and the references ruled out are those upstream scores -inf."""
    refs = _lines(workdir / "tgt-test.txt")
    refs = [r if i % 2 else " ".join(reversed(r.split())) for i, r in enumerate(refs)]  # half of them wrong
    (workdir / "tgt-half.txt").write_text("".join(r + "\n" for r in refs))
    proc = translate(workdir, "-model", SPARSE, "-tgt", "tgt-half.txt", "-output", "half.txt", "-forced_support")
    log = proc.stderr.splitlines()
    heads = [i for i, line in enumerate(log) if "[entmax] forced decoding of the reference of sentence" in line]
    assert [int(log[i].split("sentence ")[1].split(" ")[0]) for i in heads] == list(range(1, 21))
    step = re.compile(r"^\s*\d+ \|\s*\d+\| ")
    ruled_out = 0
    for i, ref in zip(heads, refs):
        rows = []
        for line in log[i + 1:]:
            if not step.match(line):
                break
            rows.append(line)
        assert len(rows) == len(ref.split()) + 1  # one step a reference token, then EOS
        for row, gold in zip(rows, ref.split() + ["</s>"]):
            assert f"*{gold} " in row or f"[gold {gold!r} has p = 0]" in row
        ruled_out += "log p = -inf" in log[i]
    assert 0 < ruled_out < 20
    assert f"because {ruled_out} of 20 references contain a token" in proc.stderr


def test_exact_search_disagreements_are_split_by_the_length_penalty(workdir):
    """A weak dense model (exact search needs no sparsity, only p <= 1) ranked with -length_penalty avg:
    each disagreement's cause follows from the numbers in the report."""
    (workdir / "src-4.txt").write_text("".join((workdir / "src-test.txt").read_text().splitlines(True)[:4]))
    proc = translate(workdir, "-model", DENSE, "-output", "ex.txt", "-beam_size", 3, "-length_penalty", "avg",
                     "-max_length", 4, "-exact_search", "-entmax_report", "ex.jsonl", "-src", "src-4.txt")
    recs = [json.loads(line) for line in open(workdir / "ex.jsonl")]
    for r in recs:
        exact, best = r["exact"], r["hypotheses"][0]
        if exact["agrees"] or exact["cause"] == "cut":
            continue
        n_exact, n_beam = len(exact["text"].split()), len(best["text"].split())
        # avg: upstream's score is log p / (tokens + 2) (its step count includes BOS and EOS), as reported
        assert best["score"] == pytest.approx(exact["beam_log_prob"] / (n_beam + 2), abs=1e-4)
        assert exact["score"] > exact["beam_log_prob"]  # the exact best is more probable...
        prefers_beam = best["score"] >= exact["score"] / (n_exact + 2)  # ...but the penalty may rank it lower
        assert exact["cause"] == ("length_penalty" if prefers_beam else "search")
    causes = [r["exact"]["cause"] for r in recs if not r["exact"]["agrees"]]
    assert "length_penalty" in causes  # this untrained model: a short output wins log p, the penalty prefers longer
    assert f"{causes.count('length_penalty')} the beam's ranking (-length_penalty avg) prefers its best" in proc.stderr


def test_python_api_support_sets_suggestions_enumeration(workdir):
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    dec = SparseDecoder(str(workdir / SPARSE))
    src = (workdir / "src-test.txt").read_text().splitlines()
    tgt = (workdir / "tgt-test.txt").read_text().splitlines()
    enumerated = 0
    for s, t in list(zip(src, tgt))[:6]:
        steps = dec.support_sets(s, t)
        assert [x.gold for x in steps] == t.split() + ["</s>"]
        words = t.split()
        for k, step in enumerate(steps):  # suggestions after a prefix = that step's support, same order
            got = dec.suggest(s, " ".join(words[:k]))
            assert [w for w, _ in got] == [w for w, _ in step.support]
            assert [p for _, p in got] == pytest.approx([p for _, p in step.support], abs=1e-5)
        logp = dec.log_prob(s, t)
        expected = sum(math.log(x.gold_prob) if x.gold_prob > 0 else -math.inf for x in steps)
        assert logp == pytest.approx(expected, abs=1e-4) or logp == expected == -math.inf
        try:
            outputs = dec.enumerate(s, cap=50)
        except ValueError as err:
            assert "cap=50" in str(err)
            continue
        enumerated += 1
        assert sum(p for _, p in outputs) == pytest.approx(1.0, abs=1e-3)
        (best, best_lp), = dec.exact(s)
        assert best == outputs[0][0] and math.exp(best_lp) == pytest.approx(outputs[0][1], rel=1e-4)
    assert enumerated > 0


def test_enumeration_steps_the_decoder_as_the_beam_does_and_finds_what_scoring_each_prefix_finds(workdir):
    """Enumeration advances each live prefix by one decoder step from its parent's state (the beam
    search's cache) instead of decoding every prefix from BOS: the same outputs and probabilities, or
    the same refusal, for an RNN and an ensemble. (The Transformer here gives the padding token p > 0,
    and a prefix holding it is masked as padding when decoded from BOS: there only stepping computes
    what the beam search computes, checked against its scores.)"""
    from onmt_entmax.decoding import enumerate_support
    from onmt_entmax.errors import SupportTooLarge
    from onmt_entmax.onmt.decoding.api import SparseDecoder

    def enumerated(scorer, eos):
        try:
            sup = enumerate_support(scorer, eos=eos, max_length=12, cap=30)
        except SupportTooLarge as err:
            return str(err)
        return {tokens: lp for tokens, lp in sup.sequences}

    src = (workdir / "src-test.txt").read_text().splitlines()[:8]
    compared = 0
    for models in ([SPARSE], [SPARSE, DENSE]):
        dec = SparseDecoder([str(workdir / m) for m in models] if len(models) > 1 else str(workdir / models[0]))
        eos = dec.translator._tgt_eos_idx
        for s in src:
            stepped = enumerated(dec.scorer(s), eos)
            prefixes = dec.scorer(s)
            from_bos = enumerated(lambda p: prefixes(p), eos)  # (a plain callable: every prefix from BOS)
            if isinstance(from_bos, str):
                assert stepped == from_bos
                continue
            assert stepped.keys() == from_bos.keys()
            # probabilities, not log-probabilities: an output holding a token near its step's threshold
            # tau has p ~ ((alpha - 1) z - tau)^(1 / (alpha - 1)) with float rounding in z of the order of
            # that difference, so its log p (-42.5 in one GPU run) moves by more than 1e-4 while p (~1e-19)
            # does not move at all on the scale of the distribution
            assert [math.exp(stepped[k]) for k in from_bos] == pytest.approx(
                [math.exp(lp) for lp in from_bos.values()], rel=1e-4, abs=1e-6)
            compared += 1
    assert compared >= 4
    translate(workdir, "-model", RELU, "-src", "src-test.txt", "-output", "relu_beam.txt", "-beam_size", 3,
              "-n_best", 3, "-with_score", "-length_penalty", "none")
    dec = SparseDecoder(str(workdir / RELU))
    vocab, eos = dec.translator._tgt_vocab, dec.translator._tgt_eos_idx
    lines = (workdir / "relu_beam.txt").read_text().splitlines()[:24]
    for k in range(0, len(lines), 3):  # a sentence's three hypotheses stepped side by side, as enumeration does
        hyps = [[vocab.tokens_to_ids[w] for w in line.split("\t")[0].split()] + [eos] for line in lines[k : k + 3]]
        scorer, scores = dec.scorer(src[k // 3]), [0.0, 0.0, 0.0]
        row, lp = {0: 0, 1: 0, 2: 0}, scorer.start()  # hypothesis -> its row of lp
        for t in range(max(map(len, hyps))):
            for i, r in row.items():
                scores[i] += float(lp[r, hyps[i][t]])
            going = [i for i in row if t + 1 < len(hyps[i])]
            if not going:
                break
            lp = scorer.advance([row[i] for i in going], [hyps[i][t] for i in going])
            row = {i: n for n, i in enumerate(going)}
        assert scores == pytest.approx([float(line.split("\t")[1]) for line in lines[k : k + 3]], rel=1e-4, abs=1e-4)

    # a teacher-forced pass, or another scorer's start, replaces the decoder state a search steps: refused
    first, second = dec.scorer(src[0]), dec.scorer(src[1])
    first.start()
    second.start()
    with pytest.raises(RuntimeError, match="call start\\(\\) again"):
        first.advance([0], [eos])
    second.score([eos])
    with pytest.raises(RuntimeError, match="a teacher-forced pass or another scorer's start"):
        second.advance([0], [eos])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_every_analysis_runs_on_the_gpu_and_agrees_with_the_cpu(workdir, sparse_run):
    """The analyses index the model's log-probabilities with token ids; on a GPU those live on CUDA
    (the -empty_check of 2026-11-26 crashed there with a device mismatch). Same report as on the CPU."""
    translate(workdir, "-model", SPARSE, "-tgt", "tgt-test.txt", "-output", "pred_gpu.txt", *SPARSE_ARGS,
              "-entmax_report", "rep_gpu.jsonl", "-enumerate_support", "-exact_search", "-empty_check",
              "-sparsity_stats", "-forced_support", "-gpu", 0)
    cpu = [json.loads(line) for line in open(workdir / "rep.jsonl")]
    gpu = [json.loads(line) for line in open(workdir / "rep_gpu.jsonl")]
    assert len(gpu) == len(cpu) == 20
    # float32 on another device may move an entmax threshold across a tiny probability: allow one
    # sentence of 20 to differ in its best hypothesis or certificate, none in the empty-output score
    def best(r):
        return r["hypotheses"][0]["text"] if r["hypotheses"] else None

    same_best = sum(best(g) == best(c) for c, g in zip(cpu, gpu))
    same_cert = sum(g["certified"] == c["certified"] for c, g in zip(cpu, gpu))
    assert same_best >= 19 and same_cert >= 19
    for c, g in zip(cpu, gpu):
        assert g["empty_log_prob"] == pytest.approx(c["empty_log_prob"], abs=1e-3)
        assert g["output_support"] >= 1 and g["prob_sum"] == pytest.approx(1.0, abs=1e-4)


def test_certificate_does_not_depend_on_how_many_hypotheses_are_printed(workdir):
    """Peters et al.'s certificate is a property of the beam search, not of -n_best: the search of a
    sentence goes on past upstream's stop (top beam finished, n_best found) until its certificate is
    settled, while the output stays what upstream's stopping rule chose."""
    reports, outputs = {}, {}
    for n in (1, 2, 5):
        translate(workdir, "-model", SPARSE, "-output", f"nbest{n}.txt", "-beam_size", 5, "-n_best", n,
                  "-length_penalty", "none", "-entmax_report", f"nbest{n}.jsonl")
        reports[n] = [json.loads(line) for line in open(workdir / f"nbest{n}.jsonl")]
        outputs[n] = _lines(workdir / f"nbest{n}.txt")
    certified = {n: [r["certified"] for r in recs] for n, recs in reports.items()}
    assert certified[1] == certified[2] == certified[5]
    assert 0 < sum(certified[1]) < 20  # (some sentences of each kind: the comparison means something)
    # the 1-best line is the first of each longer list: the output is what upstream's stopping rule
    # gives (with scores that only decrease along a hypothesis, later finishes cannot beat it)
    firsts = [lines[0] for lines in _split_nbest(outputs[5], reports[5])]
    assert outputs[1] == firsts
    for r in reports[1]:  # a certified beam of 5 held the whole support: at most 5 outputs have p > 0
        assert not r["certified"] or r["max_candidates"] <= 5


def _split_nbest(lines, recs):
    """The output file of -n_best k cut into each input line's hypotheses (n_hyps of them, or one empty line)."""
    out, i = [], 0
    for r in recs:
        n = max(r["n_hyps"], 1)
        out.append(lines[i:i + n])
        i += n
    return out
