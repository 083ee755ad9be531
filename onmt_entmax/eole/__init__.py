"""Eole integration: the only package that touches Eole internals (tested with Eole 0.6.4).

``activate()`` applies every patch in ``patches.PATCHES`` (idempotent; returns their names) and
``is_active()`` says whether it did. It runs by itself in every Python process
(Eole spawns one per GPU) once this package is pip-installed: the import hook of
``onmt_entmax.autoload`` calls it right after ``import eole``. ``ONMT_ENTMAX_DISABLE=1`` turns that off.
An Eole outside the tested range is refused (``version.py``).
"""
from __future__ import annotations

from onmt_entmax.patching import adapter_activation


def _supported_eole() -> None:
    import eole

    from .version import check_version

    check_version(getattr(eole, "__version__", "0"))


activate, is_active = adapter_activation(f"{__name__}.patches", check=_supported_eole)

__all__ = ["activate", "is_active"]
