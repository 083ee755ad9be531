"""What an adapter's activation installed in a toolkit, compared with its patch table (``patches.py``): every
wrapper of ours found anywhere in the toolkit's modules must be a row of the table, at the row's target; every
other object of ours bound there (a module proxy such as a checkpoint module's ``torch``, a module or class of
ours) must be a registration row's declared ``rebinds``, at that place; and each row's target, rebinding and
extended object is in place after activation (``check_table``). Shared by tests/onmt/test_patches.py and
tests/eole/test_eole_patches.py, whose tests call the helpers below, one short test a property."""
from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
import types
from pathlib import Path

from onmt_entmax import patching
from onmt_entmax.training.host import backward_on_calling_thread

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


def _plugin_name(name) -> bool:
    return isinstance(name, str) and (name == "onmt_entmax" or name.startswith("onmt_entmax."))


def bound_object(obj) -> bool:
    """An object of this package that is no wrapper: an object of one of its classes (a module proxy such as
    ``WeightsOnlyTorch``), one of its classes or modules, or a plain function of its code."""
    try:
        if ours(obj):
            return False
        if _plugin_name(type(obj).__module__):
            return True
        if isinstance(obj, types.ModuleType):
            return _plugin_name(obj.__name__)
        if inspect.isclass(obj):
            return _plugin_name(obj.__module__)
        return inspect.isfunction(obj) and Path(obj.__code__.co_filename).resolve().is_relative_to(PACKAGE)
    except Exception:  # a proxy object that refuses attribute access outside its context
        return False


def import_touched(patches: list) -> None:
    """Import every module of each toolkit package a row's target, rebinding or extended object is in
    (``onmt.translate`` for ``onmt.translate.translator:...``), so that what is installed anywhere there is seen."""
    places = [place for p in patches for place in (p.target, *p.rebinds, *p.extends) if place is not None]
    modules = {place.partition(":")[0] for place in places}
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


def bound(toolkit: str) -> dict[str, object]:
    """``"module:Attr.path"`` -> each object of ours other than a wrapper (``bound_object``) bound in the
    toolkit's modules: a module-level name or an attribute of one of their classes."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == toolkit or name.startswith(f"{toolkit}.")):
            continue
        for attr, value in list(vars(module).items()):
            if bound_object(value):
                found[f"{name}:{attr}"] = value
            if inspect.isclass(value) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    if bound_object(member):
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
    found and which of its layers no row there names; and every other object of ours bound there that no
    row's ``rebinds`` names at its place (nothing installed outside the table)."""
    # id of each wrapper in the chain now at a row's target (or alias) -> names of the rows there (a module
    # that imported the name between two rows of one target holds the lower wrapper: still a row's)
    rows: dict[int, set] = {}
    for p in patches:
        if p.target is None:
            continue
        try:
            now = [at(p.target)] + [at(alias) for alias in p.aliases]
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
    declared = {place for p in patches for place in p.rebinds}
    for place, obj in sorted(bound(toolkit).items()):
        if place not in declared:
            problems.append(f"{place}: {_describe(obj)} is bound here, and no row's rebinds names this place")
    return problems


def not_in_place(patches: list) -> list[str]:
    """Each row as activation should have left it: a wrapping row in the chain at its target, each declared
    rebinding holding an object of ours, each declared extended object still there (an upstream that moved
    it fails here, not silently); rebinds and extends only on registration rows."""
    problems = []
    for p in patches:
        if p.target is not None and p.name not in patching.wrapper_names(at(p.target)):
            problems.append(f"{p.target}: row {p.name!r} is not in the chain of wrappers there")
        if (p.rebinds or p.extends) and p.apply is None:
            problems.append(f"row {p.name!r}: rebinds / extends declare what a registration row (apply) installs")
        for place in (*p.rebinds, *p.extends):
            try:
                owner, attr = patching.resolve(place)
                obj = getattr(owner, attr)
            except (ImportError, AttributeError) as err:
                problems.append(f"{place}: row {p.name!r} declares it, and it is not there ({err})")
                continue
            if place in p.rebinds and not (ours(obj) or bound_object(obj)):
                problems.append(f"{place}: row {p.name!r} rebinds it, and it holds {_describe(obj)}")
    return problems


def check_table(patches: list, toolkit: str) -> list[str]:
    """Everything wrong between an activated adapter and its table (``unlisted`` and ``not_in_place``)."""
    return unlisted(patches, toolkit) + not_in_place(patches)


def reported(problems: list[str], place: str) -> bool:
    """``problems`` has one about ``place`` (``"module:Attr.path"``)."""
    return any(problem.startswith(f"{place}:") for problem in problems)


def rogue(monkeypatch, owner, name: str, value) -> str:
    """Bind ``owner.name`` to ``value`` by hand, outside the table (undone after the test); its place."""
    monkeypatch.setattr(owner, name, value, raising=False)
    if inspect.isclass(owner):
        return f"{owner.__module__}:{owner.__qualname__}.{name}"
    return f"{owner.__name__}:{name}"


def rogue_wrapper(monkeypatch, owner, name: str) -> str:
    """Wrap ``owner.name`` by hand with a wrapper of the package's own code (``functools.wraps`` copies the
    mark of a row's wrapper it wraps); its place."""
    up = getattr(owner, name)
    return rogue(monkeypatch, owner, name, functools.wraps(up)(backward_on_calling_thread(up)))


def stack_problems(patches_module, target: str, names: list[str]) -> list[str]:
    """Rows ``names`` (outermost first) are the whole chain at ``target``, each ``original(name)`` is the one
    stock object at its bottom, and ``__wrapped__`` leads there through one layer a row."""
    now = at(target)
    if patching.wrapper_names(now) != names:
        return [f"{target}: wrappers {patching.wrapper_names(now)}, not {names}"]
    stock = patches_module.original(names[0])
    problems = [f"{target}: original({n!r}) is not original({names[0]!r})"
                for n in names if patches_module.original(n) is not stock]
    if patching.wrapper_names(stock):
        problems.append(f"{target}: original({names[0]!r}) is itself wrapped")
    for _ in names:
        now = now.__wrapped__
    if now is not stock:
        problems.append(f"{target}: {len(names)} layers of __wrapped__ do not reach the stock object")
    return problems


def _describe(obj) -> str:
    """What ``obj`` is, in a few words (without touching a proxy's delegated attributes)."""
    if type(obj) is types.ModuleType:
        return f"module {obj.__name__}"
    if inspect.isclass(obj) or inspect.isfunction(obj):
        return f"{'class' if inspect.isclass(obj) else 'function'} {obj.__module__}.{obj.__qualname__}"
    return f"an instance of {type(obj).__module__}.{type(obj).__qualname__}"


def at(target: str):
    """The object now at ``"module:Attr.path"`` (a classmethod's function), without importing the module."""
    module, _, path = target.partition(":")
    if module not in sys.modules:
        raise ImportError(module)
    owner, attr = patching.resolve(target)
    obj = owner.__dict__.get(attr) if isinstance(owner, type) and attr in owner.__dict__ else getattr(owner, attr)
    return getattr(obj, "__func__", obj)
