"""Run a command in a fresh interpreter with the package's import hooks active even without ``pip install``
(the OpenNMT-py and Eole tests start their toolkits' real console scripts with it)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def console_env(cwd: Path, env: dict | None = None) -> dict:
    """The environment of ``run_console``: the import hook active even without ``pip install``.

    If the package is pip-installed, its ``.pth`` file already does this; otherwise a
    ``sitecustomize.py`` on PYTHONPATH runs the same hook source at start-up, so spawned children
    (which inherit PYTHONPATH) are activated the same way.
    """
    from onmt_entmax.autoload import HOOK_SOURCE

    site = cwd / "_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HOOK_SOURCE)
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    full_env.pop("ONMT_ENTMAX_DISABLE", None)
    full_env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return full_env


def run_console(args: list[str], cwd: Path, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a command in a fresh interpreter with the import hook active even without ``pip install``."""
    return subprocess.run(args, cwd=cwd, env=console_env(cwd, env), capture_output=True, text=True, timeout=timeout)


def stop_at_step(args: list[str], cwd: Path, step: int, signum: int = signal.SIGTERM,
                 timeout: float = 240.0) -> tuple[int, str]:
    """Start a training command as ``run_console`` does, send the trainer ``signum`` once its
    log reports step ``step`` (``report_every: 1``), and return its exit code and whole log."""
    proc = subprocess.Popen(args, cwd=cwd, env=console_env(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines, start = [], time.monotonic()
    for line in proc.stdout:
        lines.append(line)
        if re.search(rf"Step +{step}[/;]", line):
            proc.send_signal(signum)
            break
        if time.monotonic() - start > timeout:
            proc.kill()
            raise AssertionError(f"no step {step} after {timeout:g} s:\n" + "".join(lines[-20:]))
    lines += proc.stdout.readlines()
    return proc.wait(120), "".join(lines)
