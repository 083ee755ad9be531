"""The dispatch's once-a-process kernel set-up: started in the background while a model loads
(`ops.prepare_kernels_in_background`), waited for by the warm-up (`ops.warm_up_kernels`)."""
import pytest
import torch

from onmt_entmax import ops
from onmt_entmax.ops import _dispatch

cache = pytest.importorskip("triton.runtime.cache")
if not hasattr(getattr(cache, "triton_key", None), "cache_info"):
    pytest.skip("this Triton computes its cache key elsewhere", allow_module_level=True)


@pytest.fixture
def fresh_process(monkeypatch):
    """As in a new process on a CUDA machine: no set-up started, Triton's cache key not computed."""
    monkeypatch.setattr(_dispatch, "_SETUP", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("ONMT_ENTMAX_NO_TRITON", raising=False)
    cache.triton_key.cache_clear()


def test_background_setup_computes_tritons_cache_key_once_and_the_warm_up_waits_for_it(fresh_process):
    assert ops.prepare_kernels_in_background()
    assert not ops.prepare_kernels_in_background()  # once a process
    thread = _dispatch._SETUP
    ops.warm_up_kernels(torch.device("cpu"))  # launches nothing on the CPU, but waits first
    assert not thread.is_alive()
    assert cache.triton_key.cache_info().currsize == 1  # the first launch will find it computed


def test_background_setup_needs_cuda_and_can_be_turned_off(fresh_process, monkeypatch):
    for off in ("warm_up", "prepare", "1"):
        monkeypatch.setenv("ONMT_ENTMAX_NO_TRITON", off)
        assert not ops.prepare_kernels_in_background()
    monkeypatch.delenv("ONMT_ENTMAX_NO_TRITON")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not ops.prepare_kernels_in_background()
    assert _dispatch._SETUP is None and cache.triton_key.cache_info().currsize == 0


def test_a_kernel_module_is_imported_once_not_at_every_call(monkeypatch):
    """The decoding ops find their kernel module at every layer and beam step (host-bound): after
    the first call the lookup must not go through the import machinery (~0.5-1 us each)."""
    import importlib

    from onmt_entmax.ops import triton as kernels

    kernels._submodule("alpha_relu")
    imports = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imports.append(name) or real(name, *a))
    for _ in range(3):
        kernels._submodule("alpha_relu")
    assert imports == []
