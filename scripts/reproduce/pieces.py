"""Training runs in time-limited pieces, several at a time on one device.

A run is a folder and an ``onmt_train`` command. Each piece appends to the folder's ``train.log``
and resumes with ``-train_from`` the newest complete checkpoint there; a run that exits normally
gets ``train.done`` and is never started again. A time limit stops the pieces still going, so the
same call later continues them: a long reproduction can be cut into pieces of a few minutes.
With several GPUs, each run starts on the GPU running the fewest runs at that moment (the choice is
made by ``CUDA_VISIBLE_DEVICES``: a one-GPU ``onmt_train`` always trains on its device 0).
While a piece runs, the folder's ``train.pid`` names its trainer: no second runner starts the run and
``pack`` leaves it alone (its newest checkpoint may be half-written) until that trainer has ended.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

from results_csv import last_piece, scores_of

from onmt_entmax.training.signals import STOP_SIGNALS

VALID_ACCURACY = re.compile(r"Validation accuracy: ([0-9.eE+-]+|nan)")
_SAVED = re.compile(r"Saving checkpoint (\S+_step_\d+\.pt)")


TRAINER = "train.pid"  # "<pid> <start time>" of the trainer of a piece under way


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (/proc/<pid>/stat, field 22, in clock ticks since boot), or None
    (no such process, or no /proc): with the pid, it names one process, not a later one given its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def trainer_of(run_dir: Path) -> int | None:
    """The pid of the trainer ``train.pid`` names while it is still running, else None (no piece under
    way: the file is missing, or its process has ended, e.g. a runner killed with its trainers)."""
    try:
        pid, started = (run_dir / TRAINER).read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)  # (signal 0: only asks whether the process exists)
    except ProcessLookupError:
        return None
    except PermissionError:  # it exists, another user's
        pass
    now = _start_time(pid)
    return pid if now is None or started == "-" or now == started else None


def _mark_trainer(run_dir: Path, pid: int) -> None:
    (run_dir / TRAINER).write_text(f"{pid} {_start_time(pid) or '-'}\n")


def _unmark_trainer(run_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (run_dir / TRAINER).unlink()


def step_of(checkpoint: str | Path) -> int:
    """N of ``model_step_N.pt``."""
    return int(Path(checkpoint).stem.rsplit("_", 1)[1])


def best_checkpoint(log_text: str) -> tuple[str, float]:
    """(checkpoint, validation accuracy) of the best validation in an onmt_train log.

    OpenNMT-py 3.5.1 logs "Validation accuracy: X" and then, at a checkpoint step,
    "Saving checkpoint <path>_step_<n>.pt"; configs save at every validation step.
    """
    best: tuple[str, float] | None = None
    pending: float | None = None
    for line in log_text.splitlines():
        if (m := VALID_ACCURACY.search(line)) is not None:
            pending = float(m.group(1))
        elif (m := _SAVED.search(line)) is not None and pending is not None:
            if best is None or pending > best[1]:
                best = (m.group(1), pending)
            pending = None
    if best is None:
        raise ValueError("no validated checkpoint in the training log (valid_steps must equal save_checkpoint_steps)")
    return best


def scored_step(run_dir: Path) -> int | None:
    """The checkpoint step the run's ``scores.json`` (written by ``reproduce.py evaluate``) scores, or None:
    none yet, or scores from before ``evaluate`` recorded its decoding options ("decode"), which it redoes."""
    done = scores_of(run_dir)
    return done.get("step") if done and "decode" in done else None


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete ``model_step_N.pt`` of a run. torch.save writes a zip archive whose
    directory comes last, so a file cut short by a time limit is not a zip file: it is removed."""
    for path in sorted(run_dir.glob("model_step_*.pt"), key=step_of, reverse=True):
        if zipfile.is_zipfile(path):
            return path
        print(f"removing incomplete checkpoint {path}", file=sys.stderr)
        path.unlink()
    return None


def resume_command(run_dir: Path, cmd: list[str]) -> list[str]:
    """``cmd`` with ``-train_from`` the run's newest complete checkpoint, if a piece saved one."""
    ckpt = latest_checkpoint(run_dir)
    return [str(c) for c in cmd] + (["-train_from", str(ckpt)] if ckpt is not None else [])


def _nvidia_smi(*args: str) -> str:
    """nvidia-smi's output for ``args`` (no CUDA context opened in this process); "" without it."""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def missing_gpus(gpus: list[int]) -> str | None:
    """Why GPU ids ``gpus`` cannot be used here (negative ids, no NVIDIA GPU, ids past the machine's
    GPUs as nvidia-smi counts them, whatever CUDA_VISIBLE_DEVICES says), or None: a run sent to a GPU
    that is not there would fail inside onmt_train, or train on the CPU for hours."""
    if min(gpus) < 0:
        return "GPU ids are 0 or more"
    out = _nvidia_smi("--query-gpu=index", "--format=csv,noheader").split()
    if not out:
        return "no NVIDIA GPU here (nvidia-smi lists none); leave the option out to run on the CPU"
    if max(gpus) >= len(out):
        return f"this machine has {len(out)} GPU(s), ids 0 to {len(out) - 1}"
    return None


def device_name(gpu: int | None) -> str:
    """What a piece trains on and ``evaluate`` decodes on: GPU ``gpu``'s name as nvidia-smi gives it (no
    CUDA context opened in this process), or "cpu"."""
    if gpu is None:
        return "cpu"
    return _nvidia_smi("--query-gpu=name", "--format=csv,noheader", "-i", str(gpu)) or f"GPU {gpu}"


def _log_line(text: str) -> str:
    """A line of this runner in a ``train.log`` (``results_csv`` finds the pieces by its prefix)."""
    return f"[reproduce] {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n"


def cpu_threads(jobs: int, cores: int | None = None) -> dict[str, str]:
    """The environment that gives each of ``jobs`` trainers on the CPU its share of the ``cores``
    (default: all this process may use) as torch's threads. Left to itself, each takes every core and
    their threads spin against each other, each trainer then many times slower than with its share
    (docs/benchmarks.md, "Several SIGMORPHON trainers on the CPU"). Empty for one job, or when
    OMP_NUM_THREADS is set already (the user's choice)."""
    if jobs <= 1 or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, (cores or usable_cores()) // jobs))}


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container or ``taskset`` can allow fewer
    than the machine has), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def _start(run_dir: Path, cmd: list[str], cwd: Path, gpu: int | None = None, jobs: int = 1) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    base_cmd, cmd = cmd, resume_command(run_dir, cmd)
    extra = cpu_threads(jobs) if gpu is None else {"CUDA_VISIBLE_DEVICES": str(gpu)}
    env = {**os.environ, **extra} if extra else None
    # the console output, not -log_file: with num_workers 0 OpenNMT-py 3.5.1's data iterator calls
    # init_logger() in the main process and drops the file handler after the model summary.
    log = open(run_dir / "train.log", "a", encoding="utf-8")
    on = "" if gpu is None else f"CUDA_VISIBLE_DEVICES={gpu} "
    if gpu is not None and os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):  # (reproduce.py --mps)
        on = f"CUDA_MPS_PIPE_DIRECTORY={os.environ['CUDA_MPS_PIPE_DIRECTORY']} {on}"
    # the device is named in the log: a run resumed lease after lease may train on several kinds
    log.write(_log_line(f"piece on {device_name(gpu)}: {on}{' '.join(cmd)}"))
    log.flush()
    print("+", on + " ".join(cmd), ">>", run_dir / "train.log", flush=True)
    # own process group, so that a time limit stops the data-loader workers too
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    proc.run_dir, proc.log, proc.gpu, proc.base_cmd = run_dir, log, gpu, base_cmd
    _mark_trainer(run_dir, proc.pid)
    return proc


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b[^\n]*$", re.M)


def failure_of(log: Path, tail: int = 65536) -> str | None:
    """The exception of the last piece's traceback in a run's log (``last_piece`` of its last ``tail``
    bytes), its first sentence (a CUDA out-of-memory error goes on for five more), or None when the
    piece died without one (killed, a worker's exit; an earlier piece's traceback is not this one's)."""
    with contextlib.suppress(OSError), open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
        text = last_piece(f.read().decode("utf-8", "replace"))
        start = text.rfind("Traceback (most recent call last):")
        found = _ERROR_LINE.search(text, start) if start >= 0 else None
        if found:
            return re.split(r"(?<=\.) ", found.group(0), maxsplit=1)[0]
    return None


def _failure(proc: subprocess.Popen, running: list) -> str:
    """``exit status N`` and, when its log has one, the exception that ended the piece; for a GPU out of
    memory, how many runs shared it."""
    cause = failure_of(proc.run_dir / "train.log")
    if not cause:
        return f"exit status {proc.returncode}"
    if "out of memory" in cause and proc.gpu is not None:
        sharing = 1 + sum(p.gpu == proc.gpu for p in running)
        cause += f" ({sharing} run(s) on GPU {proc.gpu}: fewer --jobs a GPU leave each more memory)"
    return f"exit status {proc.returncode}, {cause}"


def _note(run_dir: Path, text: str) -> None:
    """A line in the run's ``train.log`` and on the console."""
    with open(run_dir / "train.log", "a", encoding="utf-8") as log:
        log.write(_log_line(text))
    print(f"{run_dir}: {text}", flush=True)


def _end_group(proc: subprocess.Popen) -> None:
    """Kill what is left of an ended piece's process group (data-loader workers of a failed trainer
    would otherwise hold their memory while the run starts again)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _stop(procs: list[subprocess.Popen], grace: float = 120.0) -> None:
    """Ask each ``onmt_train`` to stop (one SIGTERM: the plugin's ``stop_on_signal`` finishes the step
    under way and saves its checkpoint, so no step is lost; a second would stop it at once), then end
    what is left of its process group (the data-loader workers); a trainer still running ``grace``
    seconds later is killed with its group."""
    for proc in procs:  # the trainer only: workers killed first would fail its step
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(deadline - time.monotonic(), 0.0))
        _end_group(proc)
        proc.wait()
        proc.log.close()
        _unmark_trainer(proc.run_dir)


def least_busy(gpus: list[int], running: list) -> int:
    """The first of ``gpus`` with the fewest of the ``running`` processes on it."""
    return min(gpus, key=lambda g: sum(p.gpu == g for p in running))


def run_pieces(runs: list[tuple[Path, list[str]]], cwd: Path, jobs: int = 1,
               max_minutes: float | None = None, gpus: list[int] | None = None,
               resume_only: bool = False, retries: int = 1) -> list[Path]:
    """Run (folder, onmt_train command) pairs, ``jobs`` at a time, each resumed from its newest
    checkpoint, spread over ``gpus`` (each run on the least busy one; None: as the command says);
    stop what is still going after ``max_minutes``. Returns the folders not finished.
    A run whose piece fails (a non-zero exit before the time limit, e.g. a data-loader worker that died)
    is started again from its newest checkpoint, at most ``retries`` times, so one transient failure
    does not cost it the rest of a lease; the failure stays in its ``train.log``. A trainer that was
    asked to stop (SIGTERM or SIGINT sent to it: ``stop_on_signal`` saved its step) stays stopped and is
    returned as unfinished. Ctrl-C or SIGTERM to this runner stops every trainer the same way before
    it exits (the trainers run in sessions of their own: the terminal's Ctrl-C does not reach them).
    ``resume_only``: refuse (before starting any) when an unfinished run has no checkpoint to resume,
    e.g. on a fresh machine the carried runs were not unpacked on: a run started there from scratch
    would cost a whole piece and, carried back, compete with the real one."""
    deadline = None if max_minutes is None else time.monotonic() + 60.0 * max_minutes
    todo = [(d, cmd) for d, cmd in runs if not (d / "train.done").exists()]
    busy = [f"{d} (process {pid})" for d, _ in todo if (pid := trainer_of(d)) is not None]
    if busy:  # two trainers of one run would write over each other's checkpoints and log
        raise SystemExit("being trained by another runner: " + ", ".join(busy) + " (stop it, or let it end, first)")
    fresh = [str(d) for d, _ in todo if latest_checkpoint(d) is None] if resume_only else []
    if fresh:
        raise SystemExit("--resume-only: no checkpoint to resume in " + ", ".join(fresh)
                         + " (unpack the carried runs first)")
    running: list[subprocess.Popen] = []
    failed: list[str] = []
    stopped: list[Path] = []
    unfinished: list[Path] = []
    restarts = {d: 0 for d, _ in todo}
    with _stops_trainers_on_interrupt(running):
        while todo or running:
            while todo and len(running) < jobs and (deadline is None or time.monotonic() < deadline):
                running.append(_start(*todo.pop(0), cwd, least_busy(gpus, running) if gpus else None, jobs))
            for proc in [p for p in running if p.poll() is not None]:
                running.remove(proc)
                proc.log.close()
                _end_group(proc)
                _unmark_trainer(proc.run_dir)
                if proc.returncode == 0:
                    (proc.run_dir / "train.done").write_text("")
                elif was_asked_to_stop(proc.returncode):
                    _note(proc.run_dir, f"exit status {proc.returncode}: stopped by a signal at its newest "
                                        "checkpoint (not started again; the same command resumes it)")
                    stopped.append(proc.run_dir)
                elif restarts[proc.run_dir] < retries and (deadline is None or time.monotonic() < deadline):
                    restarts[proc.run_dir] += 1
                    _note(proc.run_dir, f"{_failure(proc, running)}: started again from its newest checkpoint "
                                        f"(retry {restarts[proc.run_dir]} of {retries})")
                    todo.insert(0, (proc.run_dir, proc.base_cmd))
                else:
                    failed.append(f"{proc.run_dir} ({_failure(proc, running)}; see its train.log)")
            if deadline is not None and time.monotonic() >= deadline:
                _stop(running)
                unfinished = [p.run_dir for p in running] + [d for d, _ in todo]
                print(f"time limit of {max_minutes:g} min: {len(unfinished)} run(s) stopped or not started; "
                      "the same command resumes them from their newest checkpoints", flush=True)
                break
            time.sleep(1.0)
    if failed:
        raise SystemExit("training failed: " + "; ".join(failed))
    return stopped + unfinished


def was_asked_to_stop(returncode: int) -> bool:
    """The exit of a trainer stopped by one of the plugin's stop signals (SIGTERM, SIGINT): 128 + the
    signal once ``stop_on_signal`` saved its step, minus the signal when the signal itself ended it."""
    return any(returncode in (128 + sig, -sig) for sig in STOP_SIGNALS)


@contextlib.contextmanager
def _stops_trainers_on_interrupt(running: list[subprocess.Popen]):
    """Ctrl-C or SIGTERM to the runner: each running trainer saves its step and stops (``_stop``),
    then the runner exits with status 130."""
    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()  # (signals: main thread only)
    previous = signal.signal(signal.SIGTERM, on_sigterm) if main_thread else None
    try:
        yield
    except KeyboardInterrupt:
        print(f"interrupted: stopping {len(running)} trainer(s) at their current step; the same command "
              "resumes them", flush=True)
        _stop(running)
        raise SystemExit(130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
