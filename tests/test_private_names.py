"""No module of the package uses another module's private name (a leading underscore): a helper that
two modules share is public in the module that owns it. A private module (`ops/_common.py`,
`ops/triton/_solver.py`, ...) is private to its package: modules inside that package may import it,
no module outside may. The toolkits' own private names, which the adapters patch, are not ours and
not checked."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "onmt_entmax"


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGE = {_module(p) for p in ROOT.rglob("*.py")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _outside(importer: str, target: str) -> str | None:
    """The first private part of the dotted module `target` whose package `importer` is not inside."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        owner = ".".join(parts[:i])
        if _private(part) and importer != owner and not importer.startswith(owner + "."):
            return ".".join(parts[:i + 1])
    return None


def _private_uses(path: pathlib.Path, source: str | None = None) -> list[str]:
    """What the module at `path` (its text, or `source`) uses of another module's private names:
    `from m import _x`, `m._x` on an imported module of ours, and imports of a private module from
    outside its package."""
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    found, modules = [], {}  # modules: local name -> one of our modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("onmt_entmax."):
                    if alias.asname:
                        modules[alias.asname] = alias.name
                    if _outside(me, alias.name):
                        found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            if not source.startswith("onmt_entmax"):
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in PACKAGE:  # a module: private only to the package holding it
                    modules[alias.asname or alias.name] = full
                    bad = _outside(me, full)
                elif _private(alias.name):
                    bad = full
                else:
                    bad = _outside(me, source)
                if bad:
                    found.append(f"line {node.lineno}: from {source} import {alias.name} ({bad})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                and modules.get(node.value.id, me) != me:
            found.append(f"line {node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_private_names(path):
    found = _private_uses(path)
    assert not found, f"{path.relative_to(ROOT)} uses private names of other modules: " + "; ".join(found)


def test_the_scan_sees_each_form_of_private_use():
    """The three forms the rule refuses are found (a scan that finds nothing passes every module)."""
    found = _private_uses(ROOT / "modules" / "generator.py",
                          "from onmt_entmax.ops.entmax_bisect import _helper\n"
                          "from onmt_entmax.ops.triton import mapping\n"
                          "from ..ops._common import check_input\n"
                          "x = mapping._table\n")
    assert len(found) == 3 and "_helper" in found[0] and "ops._common" in found[1] and "mapping._table" in found[2]
    # a private module inside its package, and a module's own private names
    assert _private_uses(ROOT / "ops" / "triton" / "loss.py", "from .._common import check_input\n"
                         "from . import _solver as S\nfrom . import loss\nx = S.probs, loss._KINDS\n") == []
