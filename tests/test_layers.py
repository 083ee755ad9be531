"""The architecture's import rule: a layer imports only the layers above it, only `onmt_entmax.onmt`
touches OpenNMT-py and only `onmt_entmax.eole` touches Eole (so the math can be used, and tested,
without either), neither adapter imports the other, and no import cycle among the package's modules.

Order (docs/architecture.md says why it differs from the first plan): errors -> ops -> registry -> modules
-> decoding / analysis / evaluation / options / patching / upstream_noise / training -> onmt, eole (the adapters
that wire all of them into a toolkit)."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "onmt_entmax"
# package -> rank; a module may import packages of equal or lower rank only
LAYERS = {"errors": 0, "ops": 1, "registry": 2, "modules": 3, "decoding": 4, "analysis": 4, "evaluation": 4,
          "options": 4, "patching": 4, "upstream_noise": 4, "training": 4, "onmt": 5, "eole": 5}
ADAPTERS = {"onmt": "onmt", "eole": "eole"}  # adapter package -> the toolkit only it may import


def _layer(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).parts
    return rel[0].removesuffix(".py") if len(rel) > 1 or rel[0].removesuffix(".py") in LAYERS else ""


def _module(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGE = {_module(p): p for p in sorted(ROOT.rglob("*.py"))}  # dotted name -> file


def _imports(path: pathlib.Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function (a lazy import ties two modules
    together all the same), and every ``importlib.import_module("literal")``. ``from pkg import name``
    counts as ``pkg.name`` where that is one of our modules, else as ``pkg``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the module's package
                base = path.relative_to(ROOT.parent).with_suffix("").parts[:-node.level]
                module = ".".join([*base, *([node.module] if node.module else [])])
            submodules = {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in PACKAGE}
            names |= submodules
            if len(submodules) < len(node.names):
                names.add(module)
        elif (isinstance(node, ast.Call)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
    return names


MODULES = sorted(p for p in ROOT.rglob("*.py") if _layer(p) in LAYERS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_only_layers_above_it(path):
    layer = _layer(path)
    own = LAYERS[layer]
    for name in _imports(path):
        parts = name.split(".")
        for adapter, toolkit in ADAPTERS.items():
            if parts[0] == toolkit and layer != adapter:
                pytest.fail(f"{path.relative_to(ROOT)} imports {toolkit} ({name}); only onmt_entmax/{adapter}/ may")
        if parts[0] == "onmt_entmax" and len(parts) > 1 and parts[1] in LAYERS:
            assert LAYERS[parts[1]] <= own, f"{path.relative_to(ROOT)} (layer {own}) imports {name}"
            if parts[1] in ADAPTERS and layer in ADAPTERS:
                assert parts[1] == layer, f"{path.relative_to(ROOT)} (adapter {layer}) imports the {parts[1]} adapter"


def test_both_adapters_are_checked():
    """The rule above covers both adapters (a renamed package would silently drop out of it)."""
    checked = {_layer(p) for p in MODULES}
    assert {"onmt", "eole", "options", "patching"} <= checked


def _cycles(graph: dict[str, list[str]]) -> list[str]:
    """The import cycles a depth-first walk meets (each as ``a -> b -> a``); none for a DAG."""
    cycles, state = [], {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "on trail"
        for name in graph[module]:
            if state.get(name) == "on trail":
                cycles.append(" -> ".join(trail[trail.index(name):] + [name]))
            elif name not in state:
                visit(name, trail + [name])
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module, [module])
    return cycles


def test_cycle_check_sees_a_lazy_circle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a -> b -> c -> a"]
    assert _cycles({"a": ["b", "c"], "b": ["c"], "c": []}) == []


def test_no_import_cycles():
    """The modules of onmt_entmax import each other without a circle, lazy imports included (a
    function-level import that closes a circle works only as long as nobody calls it at import time).
    Importing ``a.b.c`` runs ``a/b/__init__.py`` first; that is not counted as an edge, so a package's
    ``__init__`` may import its own modules."""
    graph = {module: sorted(n for n in _imports(path) if n in PACKAGE and n != module)
             for module, path in PACKAGE.items()}
    assert not _cycles(graph), "import cycles:\n" + "\n".join(_cycles(graph))
