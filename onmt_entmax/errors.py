"""The refusals: what onmt-entmax raises when it will not do what it was asked, every class in one place.

A refusal names the option, file or tensor at fault. Bad input is a ``ValueError`` (library callers catch
it like any other bad argument), a state a run cannot go on from a ``RuntimeError``, a toolkit outside the
tested range an ``ImportError``. When one ends a command, the adapter's excepthook prints it as one line
and the process exits with status 1 (``onmt_entmax.onmt.errors``, ``onmt_entmax.eole.errors``): the
OpenNMT-py hook prints ``EntmaxOptionError`` and ``CheckpointError`` and whatever carries
``onmt_entmax_refusal``; the Eole hook prints the ``OneLine`` errors. ``onmt_entmax_refusal`` also tells
the start-up hook (``onmt_entmax.autoload``) that the message says it all.

This module imports nothing, not even torch, and comes first in the layers (tests/test_layers.py ranks it
0, before ``ops``): every layer, the math included, and both adapters can raise and catch these.
"""
from __future__ import annotations


class EntmaxOptionError(ValueError):
    """A bad Entmax option; the message names the option."""


class NoAttention(EntmaxOptionError):
    """A model without the Transformer attention an analysis reads (an RNN's)."""


class CheckpointError(ValueError):
    """A checkpoint that is refused (it would run code, or is not a checkpoint); names the file."""


class CheckpointSaveError(RuntimeError):
    """A checkpoint that could not be written whole; a refusal (one line when it ends a command)."""

    onmt_entmax_refusal = True


class SupportTooLarge(ValueError):
    """The nonzero support has more sequences than the cap allows (or is not finite)."""


class CaptureError(RuntimeError):
    """A capture failed: CUDA's random-number state is left inside the aborted capture, so the process
    cannot go on training (eager dropout would fail too). Printed in one line by the adapters."""

    onmt_entmax_refusal = True


class OneLine(Exception):
    """What the Eole adapter's hook prints as one line (``onmt-entmax: <message>``)."""

    onmt_entmax_refusal = True


class ConfigError(OneLine, ValueError):
    """A bad option in an Eole config (YAML or command line); the message names it."""


class UnsupportedEole(OneLine, ImportError):
    """Eole outside the tested range: onmt-entmax refuses to patch it."""
