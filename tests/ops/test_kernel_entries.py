"""The kernel table the dispatch reads (`ops.triton.KERNELS`, one `KernelEntry` an op): every entry is
reached by the public op it names, whose torch reference runs instead wherever ONMT_ENTMAX_NO_TRITON
turns the op off (1: every op; a list: those named). CPU tensors with the dispatch's device test
answering as on CUDA; no kernel runs (each entry's kernel replaced by one that raises)."""
import dataclasses

import pytest
import torch

from onmt_entmax import ops
from onmt_entmax.ops import _dispatch

K = pytest.importorskip("onmt_entmax.ops.triton")
if not K.HAVE_TRITON:
    pytest.skip("no Triton", allow_module_level=True)


class Taken(Exception):
    """Raised by an entry's kernel: the call took the kernel path."""


def _calls() -> dict:
    """op -> a call of its public op that the kernel takes (what `reference` names)."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 7, generator=g)
    y = torch.tensor([0, 3, 6, 1])
    q, k, v = (torch.randn(1, 2, 3, 8, generator=g) for _ in range(3))
    scores = torch.randn(4, 12, generator=g)

    def no_grad(fn):
        def call():
            with torch.no_grad():
                return fn()
        return call

    return {
        "sparsemax": lambda: ops.sparsemax(z),
        "entmax15": lambda: ops.entmax15(z, dim=0),
        "entmax_bisect": lambda: ops.entmax_bisect(z, 1.3),
        "bounded_alpha": lambda: ops.bounded_alpha(torch.zeros(2)),
        "fy_loss": lambda: ops.entmax15_loss(z, y),
        "sparse_attention_train": lambda: ops.sparse_attention(q.requires_grad_(), k, v),
        "log_probs": no_grad(lambda: ops.log_probs(z, "sparsemax")),
        "alpha_relu_log": lambda: ops.alpha_relu_log(z, 1.5, 0.1),
        "beam_stats": lambda: ops.beam_stats(scores, torch.tensor([[0, 2]] * 4)),
        "beam_topk": lambda: ops.beam_topk(scores, 3),
        "sparse_attention_decode": no_grad(lambda: ops.sparse_attention(q.detach(), k, v)),
    }


def test_every_entry_names_its_public_op_its_kernel_and_how_a_call_is_decided():
    assert set(K.KERNELS) == set(_calls())  # a new entry needs its call above
    for op, entry in K.KERNELS.items():
        assert isinstance(entry, K.KernelEntry) and entry.op == op
        assert callable(entry.run) and (entry.supports is None or callable(entry.supports))
        assert callable(getattr(ops, entry.reference)), f"{op}: no public op {entry.reference!r}"


@pytest.fixture
def as_on_cuda(monkeypatch):
    """Every entry's kernel raises Taken; the dispatch takes CPU tensors as CUDA ones (TRITON_INTERPRET=1:
    the predicates too)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("ONMT_ENTMAX_NO_TRITON", raising=False)
    expected = {op: call() for op, call in _calls().items()}  # the references (CPU: no dispatch yet)

    def taken(*args, **kwargs):
        raise Taken

    for op, entry in K.KERNELS.items():
        monkeypatch.setitem(K.KERNELS, op, dataclasses.replace(entry, run=taken))
    monkeypatch.setattr(_dispatch, "runs_kernels", lambda z: True)
    return expected


def _same(a, b) -> None:
    for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
        torch.testing.assert_close(x, y, atol=0, rtol=0)


def test_every_public_op_takes_its_kernel_unless_no_triton_turns_it_off(as_on_cuda, monkeypatch):
    for op, call in _calls().items():
        with pytest.raises(Taken):
            call()
    monkeypatch.setenv("ONMT_ENTMAX_NO_TRITON", "1")
    for op, call in _calls().items():
        _same(call(), as_on_cuda[op])


def test_a_list_of_ops_turns_off_those_alone(as_on_cuda, monkeypatch):
    monkeypatch.setenv("ONMT_ENTMAX_NO_TRITON", "fy_loss, beam_stats")
    for op, call in _calls().items():
        if op in ("fy_loss", "beam_stats"):
            _same(call(), as_on_cuda[op])
        else:
            with pytest.raises(Taken):
                call()


def test_one_module_reads_no_triton():
    """ONMT_ENTMAX_NO_TRITON is read in one place (`_dispatch.disabled`), so its meaning is stated once."""
    import ast
    import pathlib

    root = pathlib.Path(ops.__file__).parents[1]
    readers = {str(path.relative_to(root)) for path in root.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and node.value == "ONMT_ENTMAX_NO_TRITON"}
    assert readers == {"ops/_dispatch.py"}
