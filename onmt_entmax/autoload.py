"""Activation in every Python process: an import hook that runs an adapter's ``activate()`` right after its
toolkit is imported (``onmt`` -> ``onmt_entmax.onmt``, ``eole`` -> ``onmt_entmax.eole``).

OpenNMT-py and Eole spawn fresh interpreters (one per GPU, data-loader workers, the inference engine),
so patches made in the parent are lost. ``setup.py`` writes ``onmt_entmax-autoload.pth`` into
site-packages with one line that executes ``HOOK_SOURCE``: at every interpreter start it puts a
finder first on ``sys.meta_path``; when a toolkit is first imported, the finder lets the normal
machinery load it and then calls the adapter's ``activate()`` (just before the toolkit's modules
execute, it also filters the warnings they raise at import: each adapter's ``upstream_noise``).
The finder answers once per toolkit and leaves when both have been imported. Nothing else is
imported at start-up (no torch), and ``ONMT_ENTMAX_DISABLE=1`` turns it off. The finder carries
``HOOK_VERSION``: a newer hook (e.g. ``sitecustomize`` beside the ``.pth`` line of an earlier install)
replaces an older one instead of running behind it.
"""
from __future__ import annotations

PTH_NAME = "onmt_entmax-autoload.pth"
# 1: activate() after import onmt; 2: upstream's import-time warnings filtered first; 3: Eole too;
# 4: a hook whose package is gone says so in one line; 5: Eole's import-time warnings filtered first
HOOK_VERSION = 5
# toolkit -> (its adapter, the function run before the toolkit's modules execute, or None)
ADAPTERS = {
    "onmt": ("onmt_entmax.onmt", ("onmt_entmax.onmt.upstream_noise", "filter_upstream_warnings")),
    "eole": ("onmt_entmax.eole", ("onmt_entmax.eole.upstream_noise", "filter_upstream_warnings")),
}

HOOK_SOURCE = r'''
import os, sys

def _onmt_entmax_install():
    if os.environ.get("ONMT_ENTMAX_DISABLE"):
        return
    pending = {name: how for name, how in @ADAPTERS@.items() if name not in sys.modules}
    for finder in list(sys.meta_path):
        version = getattr(finder, "_onmt_entmax_hook", 0)  # True: version 1
        if version >= @HOOK_VERSION@:
            return
        if version:  # an older hook (the .pth line of an earlier install): this one replaces it
            sys.meta_path.remove(finder)
    if not pending:
        return
    import importlib
    import importlib.util

    def _plugin(toolkit, module, function):
        try:
            getattr(importlib.import_module(module), function)()
        except ModuleNotFoundError as err:
            if (err.name or "").split(".")[0] != "onmt_entmax":
                raise
            # the hook outlived its package (a broken or half-removed install): say so in one line
            sys.stderr.write("onmt-entmax: its start-up hook (%s in site-packages) runs, but the package "
                             "itself is not importable (%s): reinstall onmt-entmax, or set "
                             "ONMT_ENTMAX_DISABLE=1 to run %s stock\n" % (@PTH_NAME@, err, toolkit))
            raise SystemExit(1)
        except Exception as err:  # fail loudly: a silently stock run would ignore the user's options
            if not getattr(err, "onmt_entmax_refusal", False):  # (a refusal says it all in one line)
                sys.stderr.write("onmt-entmax: activation for %s failed (ONMT_ENTMAX_DISABLE=1 runs it "
                                 "stock): %r\n" % (toolkit, err))
            raise

    class _Finder:
        _onmt_entmax_hook = @HOOK_VERSION@

        def find_spec(self, name, path=None, target=None):
            if name not in pending:
                return None
            adapter, before = pending.pop(name)  # once a toolkit; also prevents recursion below
            if not pending:
                sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            upstream_exec = spec.loader.exec_module

            def exec_module(module):
                if before:
                    _plugin(name, *before)  # before upstream's modules run
                upstream_exec(module)
                _plugin(name, adapter, "activate")

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Finder())

_onmt_entmax_install()
'''.replace("@HOOK_VERSION@", str(HOOK_VERSION)).replace("@ADAPTERS@", repr(ADAPTERS)).replace(
    "@PTH_NAME@", repr(PTH_NAME))


def pth_line() -> str:
    """The single line of the ``.pth`` file (site.py executes lines that start with ``import``)."""
    return "import sys; exec(%r, {'__name__': 'onmt_entmax_autoload'})\n" % HOOK_SOURCE


def install_hook() -> None:
    """Install the hook in this process (what the ``.pth`` line does at start-up)."""
    exec(HOOK_SOURCE, {"__name__": "onmt_entmax_autoload"})
