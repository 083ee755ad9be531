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


def _compiled(directory, name="log_kernel", arch=90, version=None):
    """A cache entry as Triton writes it: <hash>/<kernel>.json with the target and Triton version."""
    import json

    import triton

    entry = directory / f"HASH{len(list(directory.iterdir())) if directory.exists() else 0}"
    entry.mkdir(parents=True)
    meta = {"name": name, "target": {"backend": "cuda", "arch": arch, "warp_size": 32},
            "triton_version": version or triton.__version__}
    (entry / f"{name}.json").write_text(json.dumps(meta))


def test_a_cold_cache_is_one_without_the_warm_up_kernel_for_this_gpu_and_triton(tmp_path, monkeypatch):
    """What decides the log line 'compiling the sparse kernels for this GPU' (mocked CUDA device)."""
    from onmt_entmax.ops import triton as kernels

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("ONMT_ENTMAX_NO_TRITON", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert kernels.cache_dir() == str(cache_dir)
    cuda = torch.device("cuda", 0)
    assert ops.cold_kernel_cache(cuda) == str(cache_dir)  # nothing there yet
    _compiled(cache_dir, arch=80)  # another GPU
    _compiled(cache_dir, version="0.0.1")  # another Triton
    _compiled(cache_dir, name="_other_kernel")
    assert ops.cold_kernel_cache(cuda) == str(cache_dir)
    _compiled(cache_dir)
    assert ops.cold_kernel_cache(cuda) is None
    assert ops.cold_kernel_cache(torch.device("cpu")) is None  # no kernels run there
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert ops.cold_kernel_cache(cuda) is None  # the arch-80 entry
    monkeypatch.setenv("ONMT_ENTMAX_NO_TRITON", "warm_up")
    assert ops.cold_kernel_cache(torch.device("cuda", 0)) is None
