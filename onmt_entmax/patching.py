"""The machinery of an adapter's patch list: every change to a toolkit, one ``Patch`` each, applied by name.

A ``Patch`` either wraps one upstream attribute (function, method, classmethod or module-level
name): the wrapper receives the upstream object and calls it, so no upstream code is copied; or it
runs a registration function (``apply``). Several patches may wrap one target: each wraps what the
patches before it in the list left there (the first is innermost), each wrapper is marked with its own
patch's name, and ``PatchSet.apply`` is idempotent per patch (a patch already in the target's chain of
wrappers is skipped). Each wrapper keeps what it wrapped as ``__wrapped__``; ``PatchSet.original(name)``
returns the stock object at the bottom of the chain. Each adapter
(``onmt_entmax.onmt``, ``onmt_entmax.eole``) keeps its own list in its ``patches.py``; this module
imports neither toolkit. Wrappers that both lists install unchanged live here too
(``backward_on_calling_thread``; ``stop_on_signal`` and ``stop_between_steps``).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

MARK = "__onmt_entmax_patch__"


@dataclass(frozen=True)
class Patch:
    name: str
    why: str
    target: Optional[str] = None  # "module:Attr.path" to wrap
    wrapper: Optional[Callable[[Callable], Callable]] = None  # upstream -> replacement
    aliases: tuple = ()  # "module:name" bindings made by ``from m import f`` before we ran
    apply: Optional[Callable[[], None]] = None  # registration-style patch
    deferred: bool = False  # wrap when the target's module is first imported, without importing it now


def resolve(target: str):
    """(owner, attribute name) of ``"module:Attr.path"``, importing the module."""
    module_name, _, path = target.partition(":")
    owner = importlib.import_module(module_name)
    *parents, attr = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    return owner, attr


def after_import(module_name: str, then: Callable[[], None]) -> None:
    """Run ``then()`` right after ``module_name`` is first imported (a one-shot import hook): patches of
    modules that are costly to import and that only some processes use (a command's entry point)."""

    class Hook:
        def find_spec(self, name, path=None, target=None):
            if name != module_name:
                return None
            sys.meta_path.remove(self)  # one shot; find_spec below must not come back here
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                load = spec.loader.exec_module
                spec.loader.exec_module = lambda module: (load(module), then())
            return spec

    sys.meta_path.insert(0, Hook())


class PatchSet:
    """One adapter's patches and what applying them replaced."""

    def __init__(self, patches: list[Patch]):
        self.patches = patches
        self._applied: dict[str, object] = {}

    def apply(self, patches: Optional[Iterable[Patch]] = None) -> list[str]:
        """Apply every patch (or the given ones; idempotent). Returns the names applied so far."""
        for patch in self.patches if patches is None else patches:
            if patch.apply is not None:
                if patch.name not in self._applied:
                    patch.apply()
                    self._applied[patch.name] = patch.apply
            elif patch.deferred and patch.target.partition(":")[0] not in sys.modules:
                after_import(patch.target.partition(":")[0], functools.partial(self._wrap_one, patch))
            else:
                self._wrap_one(patch)
        return list(self._applied)

    def applied(self) -> list[str]:
        return list(self._applied)

    def original(self, name: str):
        """The stock upstream object under a patch's wrapper (e.g. to compare with stock behaviour in tests)."""
        return self._applied[name]

    def _aliases(self, target: str) -> tuple:
        """The aliases of every patch of ``target``: each stacked wrapper replaces all of them."""
        return tuple(a for p in self.patches if p.target == target for a in p.aliases)

    def _wrap_one(self, patch: Patch) -> None:
        owner, attr = resolve(patch.target)
        raw = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
        if raw is None:
            raw = getattr(owner, attr)
        is_classmethod = isinstance(raw, classmethod)
        current = raw.__func__ if is_classmethod else raw
        if patch.name in wrapper_names(current):
            return  # this patch is in the chain already
        new = functools.wraps(current)(patch.wrapper(current))
        setattr(new, MARK, patch.name)
        setattr(owner, attr, classmethod(new) if is_classmethod else new)
        self._applied[patch.name] = stock(current)
        if is_classmethod:
            return
        for alias in (*patch.aliases, *self._aliases(patch.target)):
            module_name, _, name = alias.partition(":")
            module = sys.modules.get(module_name)
            if module is not None and getattr(module, name, None) is raw:
                setattr(module, name, new)


def wrapper_names(obj) -> list[str]:
    """The patch names of the wrappers stacked on ``obj``, outermost first ([] for a stock object)."""
    names = []
    obj = getattr(obj, "__func__", obj)
    while getattr(obj, MARK, None):
        names.append(getattr(obj, MARK))
        obj = getattr(obj, "__wrapped__", None)
    return names


def stock(obj):
    """The object at the bottom of ``obj``'s chain of our wrappers (``obj`` itself when it is stock)."""
    obj = getattr(obj, "__func__", obj)
    while getattr(obj, MARK, None):
        obj = obj.__wrapped__
    return obj


def adapter_activation(patches_module: str, check: Callable[[], None] = lambda: None):
    """``activate()`` and ``is_active()`` of an adapter whose ``PatchSet`` functions are in ``patches_module``
    (imported by the first activation, not before). ``activate()`` runs ``check()`` (e.g. the toolkit's
    version), then applies every patch (idempotent) and returns their names. A re-entrant call (a patch
    target importing the toolkit for the first time fires the import hook again) returns [] at once:
    the outer call finishes the job."""
    busy = [False]

    def activate() -> list[str]:
        if busy[0]:
            return []
        busy[0] = True
        try:
            check()
            return importlib.import_module(patches_module).apply_patches()
        finally:
            busy[0] = False

    def is_active() -> bool:
        return bool(importlib.import_module(patches_module).applied())

    return activate, is_active


# --------------------------------------------------------------- shared by both adapters' training loops

TRAIN_HOST_SETTINGS = ("calling-thread", "as-is")


def train_host_setting() -> str:
    """``ONMT_ENTMAX_TRAIN_HOST``: ``calling-thread`` (default) or ``as-is``; anything else is refused."""
    value = os.environ.get("ONMT_ENTMAX_TRAIN_HOST", "").strip() or TRAIN_HOST_SETTINGS[0]
    if value not in TRAIN_HOST_SETTINGS:
        from onmt_entmax.options.model import EntmaxOptionError

        raise EntmaxOptionError(f"ONMT_ENTMAX_TRAIN_HOST={value!r}: expected one of {', '.join(TRAIN_HOST_SETTINGS)}")
    return value


def backward_on_calling_thread(upstream: Callable) -> Callable:
    """Wrapper of a toolkit's training loop (``Trainer.train``): backward runs on the calling thread.

    On CUDA, autograd hands every backward from the thread that called it to its own device thread;
    with ``torch.autograd.set_multithreading_enabled(False)`` the calling thread runs it itself. On a
    host-bound step that is 1.21x softmax and 1.34x 1.5-entmax steps/s in one process, 1.16x and 1.24x
    in stock ``onmt_train`` (SIGMORPHON RNN, H100, docs/benchmarks.md). Nothing is lost: OpenNMT-py and
    Eole run one process per GPU, so no backward could overlap another. ``ONMT_ENTMAX_TRAIN_HOST=as-is``
    keeps the toolkit's behaviour (what benchmarks compare against).
    """

    def train(self, *args, **kwargs):
        if train_host_setting() == "calling-thread":
            import torch

            torch.autograd.set_multithreading_enabled(False)
        return upstream(self, *args, **kwargs)

    return train


# A training process asked to stop (SIGTERM from a runner's time limit or a cluster's pre-emption,
# SIGINT = Ctrl-C) finishes the step under way; the toolkit's loop then ends and saves its end-of-
# training checkpoint at that step (both toolkits save one after the loop), and the process exits
# with 128 + the signal's number, so a runner tells it from a finished run. A second signal stops at
# once. Only where one process trains (world_size 1): ranks stopping at different steps would wait
# for each other forever.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_stop_request: list[int] = []  # the signal number received, once one was
_previous_handlers: dict = {}  # signal number -> the handler ours replaced


def stop_requested() -> Optional[int]:
    """The signal that asked this training process to stop, or None."""
    return _stop_request[0] if _stop_request else None


def _on_stop_signal(signum, frame) -> None:
    if _stop_request:  # the second one: stop at once, as the handler before ours would
        signal.signal(signum, _previous_handlers.get(signum, signal.SIG_DFL))
        os.kill(os.getpid(), signum)
        return
    _stop_request.append(signum)


def stop_on_signal(upstream: Callable, single_process: Callable[..., bool]) -> Callable:
    """Wrapper of a toolkit's per-process training entry (``train_single.main``): while it runs,
    SIGTERM and SIGINT ask the loop to stop after its step (``stop_between_steps``); when it has, exit
    with 128 + the signal's number. ``single_process(*args)`` says whether this process trains alone."""

    @functools.wraps(upstream)
    def main(*args, **kwargs):
        if not single_process(*args, **kwargs) or threading.current_thread() is not threading.main_thread():
            return upstream(*args, **kwargs)
        _stop_request.clear()
        for signum in STOP_SIGNALS:
            _previous_handlers[signum] = signal.signal(signum, _on_stop_signal)
        try:
            result = upstream(*args, **kwargs)
        finally:
            for signum, handler in _previous_handlers.items():
                signal.signal(signum, handler)
            _previous_handlers.clear()
        if _stop_request:
            raise SystemExit(128 + _stop_request[0])
        return result

    return main


def stop_between_steps(upstream: Callable, logger: str) -> Callable:
    """Wrapper of a trainer's batch generator (``Trainer._accum_batches``): once a stop is requested,
    it hands the loop no further batch, so the loop ends after the step under way and saves its
    checkpoint there. Asked before this process trained a step, it exits at once (the newest
    checkpoint on disk is still the newest state). ``logger``: the toolkit's logger's name."""

    @functools.wraps(upstream)
    def _accum_batches(self, iterator):
        batches = upstream(self, iterator)
        trained = False
        while not _stop_request:
            try:
                item = next(batches)
            except StopIteration:
                return
            if _stop_request:
                break
            trained = True
            yield item
        name = signal.Signals(_stop_request[0]).name
        step = self.optim.training_step - 1  # the optimizer counts the step it will take next
        if not trained:
            logging.getLogger(logger).warning("%s: stopping before the first step of this process; nothing to save",
                                              name)
            raise SystemExit(128 + _stop_request[0])
        logging.getLogger(logger).warning("%s: stopping after step %d; its checkpoint is saved next "
                                          "(train_from it resumes the run)", name, step)

    return _accum_batches


# --- upstream noise: what both toolkits print that tells our users nothing, filtered at its source -------
# (message prefix, category, the modules Python attributes it to: a regex matched against the whole name)
WarningRow = tuple[str, type, str]

# torch's nn.LSTM(num_layers=1, dropout>0) warns that its dropout acts between layers only; both toolkits'
# 1-layer RNNs pass their dropout there and apply it around the LSTM themselves, so the warning (at every
# model build: each translate) says nothing about the model. torch raises it in its own module.
ONE_LAYER_LSTM_DROPOUT: WarningRow = ("dropout option adds dropout after all but last recurrent layer",
                                      UserWarning, r"torch\.nn\.modules\.rnn")


def ignore_warnings(rows: Iterable[WarningRow]) -> None:
    """Ignore exactly the warnings of ``rows``: message (a prefix), category and attributed module all
    match, so the same message from anywhere else and every other warning still show (idempotent:
    ``warnings`` drops an equal filter before inserting it again)."""
    import re
    import warnings

    for message, category, modules in rows:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category,
                                module=f"(?:{modules})\\Z")


CORPORA_LOADED = "Weighted corpora loaded so far:"  # both toolkits' WeightedMixer._logging


class CorporaLoadedOnce(logging.Filter):
    """Passes the first "Weighted corpora loaded so far" record of the process, on one line; drops the
    later ones (one for every further pass over a corpus: on a small corpus a line pair every few steps).
    Other records pass untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(CORPORA_LOADED)):
            return True
        if self.seen:
            return False
        self.seen = True
        counts = [line.strip(" \t*") for line in record.getMessage()[len(CORPORA_LOADED):].splitlines()]
        record.msg = f"{CORPORA_LOADED} {', '.join(c for c in counts if c)} (logged once a process)"
        record.args = ()
        return True


def log_corpora_once(logger: str) -> None:
    """Put the filter on the toolkit's logger ``logger`` once (their ``init_logger`` replaces its
    handlers, never its filters)."""
    log = logging.getLogger(logger)
    if not any(isinstance(f, CorporaLoadedOnce) for f in log.filters):
        log.addFilter(CorporaLoadedOnce())
