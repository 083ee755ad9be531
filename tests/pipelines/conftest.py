"""Registers the ``slow`` marker of the pipeline tests (helpers live in pipeline_helpers.py), and puts
scripts/reproduce on sys.path: its modules import one another by name (reproduce.py puts it there too), and the
tests import them so (``from steps.status import print_status``), the same module objects the steps use."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "reproduce"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer than a few seconds (deselect with -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    """Slow pipeline tests run only when asked for (``-m slow``): CI runs ``pytest tests`` as is."""
    import pytest

    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow (40-150 s each on 2 busy CPU cores): run with -m slow")
    for item in items:
        if "slow" in item.keywords and "pipelines" in str(item.fspath):
            item.add_marker(skip)
