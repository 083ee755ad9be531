"""Activation in every Python process: an import hook that runs ``activate()`` right after ``import onmt``.

OpenNMT-py spawns fresh interpreters (one per GPU, data-loader workers, the inference engine), so
patches made in the parent are lost. ``setup.py`` writes ``onmt_entmax-autoload.pth`` into
site-packages with one line that executes ``HOOK_SOURCE``: at every interpreter start it puts a
one-shot finder first on ``sys.meta_path``; when ``onmt`` is first imported, the finder lets the
normal machinery load it and then calls ``onmt_entmax.onmt.activate()``; just before upstream's
modules execute, it filters the deprecation warnings they raise at import (``upstream_noise``).
Nothing else is imported at start-up (no torch), and ``ONMT_ENTMAX_DISABLE=1`` turns it off. The
finder carries ``HOOK_VERSION``: a newer hook (e.g. ``sitecustomize`` beside the ``.pth`` line of an
earlier install) replaces an older one instead of running behind it.
"""
from __future__ import annotations

PTH_NAME = "onmt_entmax-autoload.pth"
HOOK_VERSION = 2  # 1: activate() after import onmt; 2: upstream's import-time warnings filtered first

HOOK_SOURCE = r'''
import os, sys

def _onmt_entmax_install():
    if os.environ.get("ONMT_ENTMAX_DISABLE") or "onmt" in sys.modules:
        return
    for finder in list(sys.meta_path):
        version = getattr(finder, "_onmt_entmax_hook", 0)  # True: version 1
        if version >= @HOOK_VERSION@:
            return
        if version:  # an older hook (the .pth line of an earlier install): this one replaces it
            sys.meta_path.remove(finder)
    import importlib
    import importlib.util

    def _plugin(module, function):
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as err:  # fail loudly: a silently stock run would ignore the user's options
            sys.stderr.write("onmt-entmax: activation failed (ONMT_ENTMAX_DISABLE=1 runs stock "
                             "OpenNMT-py): %r\n" % (err,))
            raise

    class _Finder:
        _onmt_entmax_hook = @HOOK_VERSION@

        def find_spec(self, name, path=None, target=None):
            if name != "onmt":
                return None
            sys.meta_path.remove(self)  # one shot; also prevents recursion below
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            upstream_exec = spec.loader.exec_module

            def exec_module(module):
                _plugin("onmt_entmax.onmt.upstream_noise", "filter_upstream_warnings")  # before upstream's modules run
                upstream_exec(module)
                _plugin("onmt_entmax.onmt", "activate")

            spec.loader.exec_module = exec_module
            return spec

        def find_module(self, name, path=None):  # Python < 3.4 protocol, unused
            return None

    sys.meta_path.insert(0, _Finder())

_onmt_entmax_install()
'''.replace("@HOOK_VERSION@", str(HOOK_VERSION))


def pth_line() -> str:
    """The single line of the ``.pth`` file (site.py executes lines that start with ``import``)."""
    return "import sys; exec(%r, {'__name__': 'onmt_entmax_autoload'})\n" % HOOK_SOURCE


def install_hook() -> None:
    """Install the hook in this process (what the ``.pth`` line does at start-up)."""
    exec(HOOK_SOURCE, {"__name__": "onmt_entmax_autoload"})
