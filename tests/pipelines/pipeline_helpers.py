"""Shared helpers of the pipeline tests: load the scripts as modules, locate ../shared/data."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
MULTI30K_SAMPLE = ROOT / "data" / "multi30k-sample"  # the release's first 400 lines a split, bundled


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
    """Skip unless ../shared/data/<parts> is there: real data too large (or not ours) to bundle in data/."""
    path = SHARED.joinpath(*parts)
    return pytest.mark.skipif(not path.exists(), reason=f"needs the real data ../shared/data/{'/'.join(parts)}, "
                              "not bundled (README: where it comes from)")
