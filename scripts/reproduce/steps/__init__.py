"""The steps of ``reproduce.py STEP TABLE``, one module a step (smoke_data.py: ``smoke-data``; ``all`` is
data, train, evaluate, record and table in turn, or analyze for an analysis); what several share:
common.py (where the work lives, the command runner, the experiments ``--only`` selects, the results
files), decode.py (decoding and scoring a test set), run_files.py (what a run's folder holds).

A step reads ``common.WORK``, ``common.SHARED`` and ``common.TRANSLATE_BATCH`` when it runs (not when it
is imported), so that setting them (``--translate-batch``, a test's work folder) reaches every step.
Importing the package first puts a source checkout's onmt_entmax on sys.path if it is not installed
(before the helpers: pieces.py and carry.py import it too)."""
import sys
from pathlib import Path

try:
    import onmt_entmax.evaluation  # noqa: F401
except ImportError:  # source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
