"""Host cost of one decoding-time call (and of one training loss call) along the GPU code path,
counted on the CPU.

Decoding is host-bound (one query per head, a few hundred rows), so what a call costs the host
matters as much as its kernel. This runs the no-grad calls that a beam-search step makes (attention
normalizers, generator log-probs, the beam's top-k with the certificate's statistics) on CPU
tensors with the Triton dispatch forced as on CUDA and every kernel launch replaced by nothing, and
reports the aten operations issued (each one is host work; on a GPU most launch a kernel) and the
host microseconds a call. Softmax / torch.topk are the baselines (these run their CPU kernels: small
rows). Then one training loss call, forward + backward, the public 1.5-entmax loss (kernel path, its
device assertion stubbed too: one launch on CUDA) against F.cross_entropy on the same small (N, V)
(CPU compute). Not a GPU timing: `bench_translate.py` and `bench_kernels.py` are.

    python benchmarks/bench_host_ops.py
"""
from __future__ import annotations

import os
import time

os.environ["TRITON_INTERPRET"] = "1"  # the kernel package then accepts CPU tensors

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import onmt_entmax.ops as ops  # noqa: E402
import onmt_entmax.ops._dispatch as dispatch  # noqa: E402
from onmt_entmax.modules import EntmaxGenerator  # noqa: E402
from onmt_entmax.modules.attention import AttentionNormalizer  # noqa: E402
from onmt_entmax.ops.triton import alpha_relu, attention, beam_step, loss, mapping  # noqa: E402
from onmt_entmax.registry import get_transformation  # noqa: E402


def aten_ops(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))


def host_us(fn, reps: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def main() -> None:
    mapping.launch = attention.launch = alpha_relu.launch = beam_step.launch = lambda *args, **kwargs: None
    dispatch.runs_kernels = lambda z: True  # the dispatch as on CUDA (CPU tensors)
    scores = torch.randn(64 * 5, 8, 1, 20)  # 64 sentences x beam 5, 8 heads, one query, 20 keys
    q, k = torch.randn(64 * 5, 8, 1, 64), torch.randn(64 * 5, 8, 20, 64)  # the same call as q, k, v
    pad = torch.zeros(64 * 5, 1, 1, 20, dtype=torch.bool)
    entmax = AttentionNormalizer(get_transformation("entmax15")).eval()
    learned = AttentionNormalizer(get_transformation("entmax15"), heads=8, learn_alpha=True).eval()

    def eager(norm):  # OpenNMT-py's explicit branch around the normalizer
        return lambda: torch.matmul(norm(torch.matmul(q / 8.0, k.transpose(2, 3)).masked_fill(pad, -1e18)), k)

    cases = {"softmax attention (normalizer only)": lambda: torch.softmax(scores, -1),
             "1.5-entmax attention (normalizer only)": lambda: entmax(scores),
             "learned-alpha attention (normalizer only)": lambda: learned(scores),
             "1.5-entmax attention, eager branch (scores, mask, normalizer, p v)": eager(entmax),
             "1.5-entmax attention, fused (attend)": lambda: entmax.attend(q, k, k, ~pad),
             "learned-alpha attention, eager branch": eager(learned),
             "learned-alpha attention, fused (attend)": lambda: learned.attend(q, k, k, ~pad)}
    logits = torch.randn(64 * 5, 64)  # the generator's output rows (a short vocabulary: CPU compute)
    gens = {name: EntmaxGenerator(8, 64, get_transformation(name, **kw)).eval()
            for name, kw in (("entmax15", {}), ("alpha_relu", {"alpha": 1.5, "tau": 0.0}))}
    cases["softmax scores: log_softmax"] = lambda: torch.log_softmax(logits, -1)
    cases["1.5-entmax scores: generator log_probs"] = lambda: gens["entmax15"].log_probs(logits)
    cases["1.5-ReLU scores: generator log_probs"] = lambda: gens["alpha_relu"].log_probs(logits)
    candidates = logits.log_softmax(-1).view(64, -1)  # a beam step's (sentences, beam x vocabulary)

    def topk_then_stats():  # the pick and the certificate apart (upstream's top-k)
        return ops.beam_stats(candidates, torch.topk(candidates, 5, dim=-1).indices)

    cases["beam pick: torch.topk (upstream, no certificate)"] = lambda: torch.topk(candidates, 5, dim=-1)
    cases["beam pick + certificate: torch.topk, then beam_stats"] = topk_then_stats
    cases["beam pick + certificate: ops.beam_topk"] = lambda: ops.beam_topk(candidates, 5)
    print("| call (no grad, launches stubbed) | aten ops | host us / call |")
    print("|---|---|---|")
    with torch.no_grad():
        for name, fn in cases.items():
            for _ in range(20):
                fn()
            us = "n/a (runs the CPU matmuls)" if "eager" in name else f"{host_us(fn):.1f}"
            print(f"| {name} | {aten_ops(fn)} | {us} |")
    loss_calls()


def loss_calls() -> None:
    loss.launch = lambda *args, **kwargs: None
    loss.device_check = lambda ok, message: None
    z = torch.randn(256, 64, requires_grad=True)  # few classes: the host's work, not the CPU's arithmetic
    y = torch.randint(0, 64, (256,))
    y[::7] = -100
    cases = {"F.cross_entropy, sum": lambda: F.cross_entropy(z, y, reduction="sum").backward(),
             "ops.entmax15_loss, sum (kernel path)": lambda: ops.entmax15_loss(z, y, reduction="sum").backward(),
             "F.cross_entropy, mean": lambda: F.cross_entropy(z, y).backward(),
             "ops.entmax15_loss, mean (kernel path)": lambda: ops.entmax15_loss(z, y).backward()}
    print()
    print("| loss call, forward + backward (launches stubbed) | aten ops | host us / call |")
    print("|---|---|---|")
    for name, fn in cases.items():
        for _ in range(20):
            fn()
        print(f"| {name} | {aten_ops(fn)} | {host_us(fn):.1f} |")


if __name__ == "__main__":
    main()
