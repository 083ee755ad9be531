"""The machinery of an adapter's patch list: every change to a toolkit, one ``Patch`` each, applied by name.

A ``Patch`` either wraps one upstream attribute (function, method, classmethod or module-level
name): the wrapper receives the upstream object and calls it, so no upstream code is copied; or it
runs a registration function (``apply``). Several patches may wrap one target: each wraps what the
patches before it in the list left there (the first is innermost), each wrapper is marked with its own
patch's name, and ``PatchSet.apply`` is idempotent per patch (a patch already in the target's chain of
wrappers is skipped). A registration patch declares, as data, what its function installs where: the names it
binds to an object of the plugin (``rebinds``: ``"module:name"``, e.g. a module's ``torch`` bound to a proxy)
and the upstream objects it adds to in place (``extends``: a config class's fields, a logger's filters), so
the list names every upstream place an adapter touches; tests/patch_table.py checks the declarations against
what activation installed. Each wrapper keeps what it wrapped as ``__wrapped__``; ``PatchSet.original(name)``
returns the stock object at the bottom of the chain. Each adapter
(``onmt_entmax.onmt``, ``onmt_entmax.eole``) keeps its own list in its ``patches.py``; this module
imports neither toolkit. The wrappers both lists install live with their features
(``onmt_entmax.training.host``, ``onmt_entmax.training.signals``, ...).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
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
    rebinds: tuple = ()  # with apply: "module:Attr.path" names it binds to an object of ours
    extends: tuple = ()  # with apply: "module:Attr.path" upstream objects it adds to in place (no name rebound)
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
