"""The adapter's patch table is everything it installs in Eole: each wrapper of ours anywhere in the
toolkit's touched packages is a row (target, feature, reason); rows of one target stack in table order."""
import functools
import sys
from pathlib import Path

import pytest

pytest.importorskip("eole")

import onmt_entmax.eole as adapter  # noqa: E402
from onmt_entmax import patching  # noqa: E402
from onmt_entmax.eole import patches  # noqa: E402
from onmt_entmax.training.host import backward_on_calling_thread  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import patch_table  # noqa: E402


@pytest.fixture(scope="module")
def active():
    adapter.activate()
    patch_table.import_touched(patches.PATCHES)  # (eole.bin.run: the deferred row is installed as it loads)
    return patches


def test_every_wrapper_the_adapter_installs_is_a_row_of_its_table(active):
    assert patch_table.unlisted(active.PATCHES, "eole") == []
    for p in active.PATCHES:  # and every row is installed at its target
        if p.target is not None:
            assert p.name in patching.wrapper_names(patch_table._at(p.target)), p.name


def test_a_wrapper_installed_outside_the_table_is_reported(active, monkeypatch):
    from eole.predict import beam_search, greedy_search

    def rogue(owner, name):  # a wrapper of the package's own code, installed by hand
        up = getattr(owner, name)
        monkeypatch.setattr(owner, name, functools.wraps(up)(backward_on_calling_thread(up)))

    rogue(beam_search.BeamSearchBase, "_pick")  # over a row's wrapper (whose mark functools.wraps copies)
    rogue(greedy_search.GreedySearch, "advance")  # where no row is
    problems = patch_table.unlisted(active.PATCHES, "eole")
    assert any(p.startswith("eole.predict.beam_search:BeamSearchBase._pick") for p in problems)
    assert any(p.startswith("eole.predict.greedy_search:GreedySearch.advance") for p in problems)


def test_rows_of_one_target_stack_in_table_order_and_original_is_stock(active):
    from eole.utils import optimizers

    assert patching.wrapper_names(optimizers.Optimizer.load_state_dict) == \
        ["optimizer_state_finite", "resume_state_load", "resume_state_counters"]
    stock = active.original("resume_state_load")
    assert active.original("resume_state_counters") is stock and not patching.wrapper_names(stock)
    assert optimizers.Optimizer.load_state_dict.__wrapped__.__wrapped__.__wrapped__ is stock
