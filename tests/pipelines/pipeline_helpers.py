"""Shared helpers of the pipeline tests: load the scripts as modules, locate ../shared/data."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def load_script(rel: str):
    """Import ``scripts/...py`` as a module (scripts are not a package)."""
    path = ROOT / rel
    name = "pipelines_" + path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def needs_shared(*parts: str):
    path = SHARED.joinpath(*parts)
    return pytest.mark.skipif(not path.exists(), reason=f"needs {path}")
