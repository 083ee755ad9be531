"""Kernel tests on CUDA, or in the Triton interpreter on the CPU (CI): where they run, and the
subprocess that reruns a test file under TRITON_INTERPRET=1 when there is no CUDA."""
import os
import subprocess
import sys

import torch

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
DEV = "cuda" if torch.cuda.is_available() and not INTERP else "cpu"
ON_KERNEL = torch.cuda.is_available() or INTERP  # the kernels run here (else: in the subprocess)


def run_in_interpreter(test_file: str, timeout: int) -> None:
    """Run `test_file`'s tests in a subprocess under the Triton interpreter; fail with its output."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
