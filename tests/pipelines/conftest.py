"""Registers the ``slow`` marker of the pipeline tests (helpers live in pipeline_helpers.py)."""


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
