"""What an adapter's activation installed in a toolkit, compared with its patch table (``patches.py``): every
wrapper of ours found anywhere in the toolkit's modules must be a row of the table, at the row's target.
Shared by tests/onmt/test_patches.py and tests/eole/test_patches.py."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

from onmt_entmax import patching

PACKAGE = Path(patching.__file__).resolve().parent


def ours(obj) -> bool:
    """A function whose code is this package's and that replaced something (``functools.wraps``)."""
    try:
        func = getattr(obj, "__func__", obj)
        code = getattr(func, "__code__", None)
        return code is not None and hasattr(func, "__wrapped__") \
            and Path(code.co_filename).resolve().is_relative_to(PACKAGE)
    except Exception:  # a proxy object (werkzeug's request) that refuses attribute access outside its context
        return False


def import_touched(patches: list) -> None:
    """Import every module of each toolkit package a row's target is in (``onmt.translate`` for
    ``onmt.translate.translator:...``), so that a wrapper installed anywhere there is seen."""
    modules = {p.target.partition(":")[0] for p in patches if p.target is not None}
    for package_name in sorted({m.rpartition(".")[0] for m in modules if m.count(".") > 1} | modules):
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), f"{package_name}."):
            try:
                importlib.import_module(info.name)
            except (Exception, SystemExit):  # an optional dependency missing, or a script: nothing of ours there
                pass


def installed(toolkit: str) -> dict[str, object]:
    """``"module:Attr.path"`` -> each of our wrappers reachable from the toolkit's modules (module-level
    names and the attributes of their classes)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == toolkit or name.startswith(f"{toolkit}.")):
            continue
        for attr, value in list(vars(module).items()):
            if ours(value):
                found[f"{name}:{attr}"] = value
            if inspect.isclass(value) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    member = getattr(member, "__func__", member)
                    if ours(member):
                        found[f"{name}:{attr}.{key}"] = member
    return found


def chain(obj) -> list:
    """``obj`` and what it wraps, down to the first object that is not ours."""
    out = []
    obj = getattr(obj, "__func__", obj)
    while ours(obj):
        out.append(obj)
        obj = obj.__wrapped__
    return out


def unlisted(patches: list, toolkit: str) -> list[str]:
    """Every wrapper of ours in the toolkit that no row of ``patches`` names at its target: where it was
    found and which of its layers no row there names (nothing installed outside the table)."""
    # id of each wrapper in the chain now at a row's target (or alias) -> names of the rows there (a module
    # that imported the name between two rows of one target holds the lower wrapper: still a row's)
    rows: dict[int, set] = {}
    for p in patches:
        if p.target is None:
            continue
        try:
            now = [_at(p.target)] + [_at(alias) for alias in p.aliases]
        except (ImportError, AttributeError):
            continue  # a deferred row whose module this process never imported: nothing installed there
        for obj in now:
            for layer in chain(obj):
                rows.setdefault(id(layer), set()).add(p.name)
    problems = []
    for place, wrapper in sorted(installed(toolkit).items()):
        allowed, seen = rows.get(id(wrapper), set()), set()
        for layer in chain(wrapper):
            name = getattr(layer, patching.MARK, None)
            if name in seen:  # a wrapper installed outside the table, its mark copied by functools.wraps
                problems.append(f"{place}: {layer.__qualname__} carries row {name!r} twice in one chain")
            seen.add(name)
            if name not in allowed:
                problems.append(f"{place}: {layer.__qualname__} ({'row ' + repr(name) if name else 'no row'}) "
                                f"is not a row of this target (rows here: {sorted(allowed)})")
    return problems


def _at(target: str):
    """The object now at ``"module:Attr.path"`` (a classmethod's function), without importing the module."""
    module, _, path = target.partition(":")
    if module not in sys.modules:
        raise ImportError(module)
    owner, attr = patching.resolve(target)
    obj = owner.__dict__.get(attr) if isinstance(owner, type) and attr in owner.__dict__ else getattr(owner, attr)
    return getattr(obj, "__func__", obj)
