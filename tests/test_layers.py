"""The architecture's import rule: a layer imports only the layers above it, and only
`onmt_entmax.onmt` touches OpenNMT-py (so the math can be used, and tested, without it).

Order (docs/architecture.md says why it differs from the first plan): ops -> registry -> modules
-> decoding / analysis / evaluation -> onmt (the glue that wires all of them into OpenNMT-py)."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "onmt_entmax"
# package -> rank; a module may import packages of equal or lower rank only
LAYERS = {"ops": 1, "registry": 2, "modules": 3, "decoding": 4, "analysis": 4, "evaluation": 4, "onmt": 5}


def _layer(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).parts
    return rel[0].removesuffix(".py") if len(rel) > 1 or rel[0] == "registry.py" else ""


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = list(path.relative_to(ROOT.parent).with_suffix("").parts[:-node.level])
                names.add(".".join(base + ([node.module] if node.module else [])))
                if not node.module:
                    names.update(".".join(base + [a.name]) for a in node.names)
            elif node.module:
                names.add(node.module)
    return names


MODULES = sorted(p for p in ROOT.rglob("*.py") if _layer(p) in LAYERS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_only_layers_above_it(path):
    own = LAYERS[_layer(path)]
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "onmt" and _layer(path) != "onmt":
            pytest.fail(f"{path.relative_to(ROOT)} imports OpenNMT-py ({name}); only onmt_entmax/onmt/ may")
        if parts[0] == "onmt_entmax" and len(parts) > 1 and parts[1] in LAYERS:
            assert LAYERS[parts[1]] <= own, f"{path.relative_to(ROOT)} (layer {own}) imports {name}"
