"""OpenNMT-py 3.5.1 integration: the only package that touches OpenNMT-py internals.

``activate()`` applies every patch in ``patches.PATCHES`` (idempotent; returns their names) and
``is_active()`` says whether it did. It runs by itself in every Python process (spawned ones
included) once this package is pip-installed: a ``.pth`` file installs an import hook that calls it
right after ``import onmt`` (see ``onmt_entmax.autoload``). ``ONMT_ENTMAX_DISABLE=1`` turns that off.
"""
from __future__ import annotations

from onmt_entmax.patching import adapter_activation

from .model.surgery import generator_log_probs, learned_alphas, transformation_of

activate, is_active = adapter_activation(f"{__name__}.patches")

__all__ = ["activate", "is_active", "generator_log_probs", "transformation_of", "learned_alphas"]
