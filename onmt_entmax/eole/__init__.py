"""Eole integration: the only package that touches Eole internals (tested with Eole 0.6.4).

``activate()`` applies every patch in ``patches.PATCHES``. It runs by itself in every Python process
(Eole spawns one per GPU) once this package is pip-installed: the import hook of
``onmt_entmax.autoload`` calls it right after ``import eole``. ``ONMT_ENTMAX_DISABLE=1`` turns that off.
An Eole outside the tested range is refused (``version.py``).
"""
from __future__ import annotations

_activating = False


def activate() -> list[str]:
    """Apply all patches to Eole (idempotent); returns the names of the applied patches.

    Re-entrant calls (a patch target importing ``eole`` for the first time fires the import hook)
    return at once: the outer call finishes the job.
    """
    global _activating
    if _activating:
        return []
    _activating = True
    try:
        import eole

        from .version import check_version

        check_version(getattr(eole, "__version__", "0"))
        from .patches import apply_patches

        return apply_patches()
    finally:
        _activating = False


def is_active() -> bool:
    from .patches import applied

    return bool(applied())


__all__ = ["activate", "is_active"]
