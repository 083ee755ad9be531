"""OpenNMT-py 3.5.1 integration: the only package that touches OpenNMT-py internals.

``activate()`` applies every patch in ``patches.PATCHES``. It runs by itself in every Python process
(spawned ones included) once this package is pip-installed: a ``.pth`` file installs an import hook
that calls it right after ``import onmt`` (see ``autoload``). ``ONMT_ENTMAX_DISABLE=1`` turns that off.
"""
from __future__ import annotations

from .model.surgery import generator_log_probs, learned_alphas, transformation_of


_activating = False


def activate() -> list[str]:
    """Apply all patches to OpenNMT-py (idempotent); returns the names of the applied patches.

    Re-entrant calls (a patch target importing ``onmt`` for the first time fires the import hook)
    return at once: the outer call finishes the job.
    """
    global _activating
    if _activating:
        return []
    _activating = True
    try:
        from .patches import apply_patches

        return apply_patches()
    finally:
        _activating = False


def is_active() -> bool:
    from .patches import applied

    return bool(applied())


__all__ = ["activate", "is_active", "generator_log_probs", "transformation_of", "learned_alphas"]
