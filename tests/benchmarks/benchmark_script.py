"""A benchmark script of benchmarks/ loaded as a module of its own (the scripts are not a package)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(name: str):
    """benchmarks/NAME.py, executed once as the module NAME."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
