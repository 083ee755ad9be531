"""Packaging metadata lives in setup.cfg; this file only ships the autoload ``.pth`` file.

The ``.pth`` line (see onmt_entmax/autoload.py) makes the plugin active in every Python
process, including those OpenNMT-py spawns. It is placed at the root of site-packages for
``pip install .`` (via build_py) and for ``pip install -e .`` (via the editable wheel's purelib data).
"""
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _autoload():
    spec = importlib.util.spec_from_file_location(
        "_onmt_entmax_autoload", os.path.join(HERE, "onmt_entmax", "autoload.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # plain Python, imports nothing heavy
    return module


def _write_pth(directory):
    auto = _autoload()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, auto.PTH_NAME)
    with open(path, "w", encoding="utf-8") as f:
        f.write(auto.pth_line())
    return path


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            self._pth = _write_pth(self.build_lib)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "_pth", None):
            outputs.append(self._pth)
        return outputs


cmdclass = {"build_py": BuildPyWithPth}

try:
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheelWithPth(editable_wheel):
        # files under <name>.data/purelib/ of a wheel are installed at the root of site-packages
        def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
            result = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
            _write_pth(os.path.join(str(unpacked_wheel), f"{dist_name}.data", "purelib"))
            return result

    cmdclass["editable_wheel"] = EditableWheelWithPth
except ImportError:  # setuptools < 64: `pip install -e .` uses develop; install the plugin normally
    pass

setup(cmdclass=cmdclass)
