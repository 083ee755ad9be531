"""``--mps``: the training runs that share a GPU go through NVIDIA's Multi-Process Service.

Without it, each trainer has its own CUDA context and the GPU time-slices between contexts: the kernels
of one process run at a time. A SIGMORPHON step is a few ms of small kernels (batch 64, 300 units) and
leaves most of the GPU idle, so the runs side by side mostly wait for each other's turn. Under MPS the
processes' kernels go through one server context and run at the same time: each of several runs
under MPS is faster than either of two as they are, and the losses of the same seed are the same
either way (docs/benchmarks.md, "Several runs a GPU: MPS").

``daemon()`` starts ``nvidia-cuda-mps-control -d`` with a pipe and log folder of its own, exports them to
the trainers it starts (``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_LOG_DIRECTORY``) and stops the daemon
(``quit``) when training ends, however it ends. A daemon the caller already runs (its pipe folder set in
``CUDA_MPS_PIPE_DIRECTORY``) is used as it is and left running.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

CONTROL = "nvidia-cuda-mps-control"
# where driver containers put it when it is not on PATH (the lent GPU machines: /usr/local/nvidia/bin)
PLACES = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin")
PIPE, LOG = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"


class MpsError(RuntimeError):
    """MPS was asked for and cannot be started here (the message is one line, naming --mps)."""


def find_control() -> str | None:
    """The path of ``nvidia-cuda-mps-control`` (PATH first, then the driver's usual folders), or None."""
    found = shutil.which(CONTROL)
    if found:
        return found
    return next((str(Path(d) / CONTROL) for d in PLACES if os.access(Path(d) / CONTROL, os.X_OK)), None)


def _control(control: str, env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    # the daemon sees every GPU: a client's CUDA_VISIBLE_DEVICES (set per run by pieces.py, as nvidia-smi
    # counts GPUs) is read against the devices the MPS server sees
    full = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run([control, *args], input=stdin, env={**full, **env}, capture_output=True,
                          text=True, timeout=60)


@contextlib.contextmanager
def daemon() -> Iterator[dict[str, str]]:
    """Run the body with an MPS daemon serving the processes it starts; yields the environment they get."""
    if os.environ.get(PIPE):
        print(f"--mps: the MPS daemon of {PIPE}={os.environ[PIPE]} serves the runs (started elsewhere, left "
              "running)", flush=True)
        yield {PIPE: os.environ[PIPE]}
        return
    control = find_control()
    if control is None:
        raise MpsError(f"--mps: {CONTROL} not found (on PATH or in {', '.join(PLACES)}); it comes with the "
                       "NVIDIA driver. Leave --mps out to share the GPU by time slices")
    # a short folder: the daemon's control socket lives in it, and socket paths are limited to ~100 bytes
    folder = Path(tempfile.mkdtemp(prefix="mps-"))
    env = {PIPE: str(folder / "pipe"), LOG: str(folder / "log")}
    for path in env.values():
        Path(path).mkdir()
    try:
        started = _control(control, env, "-d")
    except (OSError, subprocess.TimeoutExpired) as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise MpsError(f"--mps: {control} -d did not start: {err}") from None
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        said = (started.stderr or started.stdout).strip().splitlines()
        raise MpsError(f"--mps: {control} -d failed (exit status {started.returncode})"
                       + (f": {said[-1]}" if said else ""))
    print(f"--mps: MPS daemon started ({PIPE}={env[PIPE]})", flush=True)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        try:
            _control(control, env, stdin="quit\n")
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, subprocess.TimeoutExpired) as err:
            print(f"--mps: the MPS daemon did not take 'quit' ({err}); it ends with the machine", flush=True)
