"""Kernel tests on CUDA, or in the Triton interpreter on the CPU (CI): where they run, and the
subprocess that reruns a test file under TRITON_INTERPRET=1 when there is no CUDA.

A kernel test file has one test that reruns the file in that subprocess (skipped where the kernels run
in-process) and marks its kernel tests ``kernel_tests(<that test's name>)``, so that on a machine without
CUDA each skip line names the test that ran them.
"""
import os
import subprocess
import sys

import pytest
import torch

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
DEV = "cuda" if torch.cuda.is_available() and not INTERP else "cpu"
ON_KERNEL = torch.cuda.is_available() or INTERP  # the kernels run here (else: in the subprocess)
IN_PROCESS = "this file's kernel tests run in-process here (CUDA or TRITON_INTERPRET=1)"
# A hang guard only: a busy 2-core machine runs the interpreter many times slower than an idle one.
HANG_S = 3600


def kernel_tests(runner: str) -> pytest.MarkDecorator:
    """The mark of a test that calls the kernels: it runs here on CUDA or under TRITON_INTERPRET=1, and on a
    machine without CUDA in the subprocess of ``runner``, its file's test that reruns the file."""
    return pytest.mark.skipif(not ON_KERNEL, reason=f"runs in the TRITON_INTERPRET=1 subprocess {runner}; "
                                                    "on CUDA in-process")


def interpreter_problem() -> str | None:
    """Why this Triton's interpreter cannot run the kernels here, or None. Triton 3.6's reads a
    runtime int argument with int() of a 1-element array, which numpy 2.4 refuses (TypeError: only
    0-dimensional arrays can be converted to Python scalars); 3.7 squeezes it first."""
    import numpy
    import triton

    def version(v: str) -> tuple:
        return tuple(int(p) for p in v.split("+")[0].split(".")[:2])

    if version(triton.__version__) < (3, 7) and version(numpy.__version__) >= (2, 4):
        return (f"Triton {triton.__version__}'s interpreter fails under numpy {numpy.__version__}: "
                "pip install 'triton>=3.7' (the test extra's latest) or 'numpy<2.4'")
    return None


def run_in_interpreter(test_file: str, timeout: int = HANG_S) -> None:
    """Run `test_file`'s tests in a subprocess under the Triton interpreter; fail with its output, or
    when none of them ran there (a file skipped whole passes too)."""
    problem = interpreter_problem()
    assert problem is None, problem
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary, proc.stdout[-3000:]
