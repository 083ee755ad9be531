"""The adapter's patch table is everything it installs in Eole: each wrapper of ours anywhere in the
toolkit's touched packages is a row (target, feature, reason), each other object of ours bound there a
registration row's declared rebinding; rows of one target stack in table order."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("eole")

import onmt_entmax.eole as adapter  # noqa: E402
from onmt_entmax.eole import patches  # noqa: E402
from onmt_entmax.eole.model.attention import SparseFunctional  # noqa: E402
from onmt_entmax.eole.training.saving import AtomicSaveTorch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import patch_table  # noqa: E402


@pytest.fixture(scope="module")
def active():
    adapter.activate()
    patch_table.import_touched(patches.PATCHES)  # (eole.bin.run: the deferred row is installed as it loads)
    return patches


def test_everything_the_adapter_installs_is_a_row_of_its_table_and_in_place(active):
    assert patch_table.check_table(active.PATCHES, "eole") == []


def test_a_wrapper_installed_outside_the_table_is_reported(active, monkeypatch):
    from eole.predict import beam_search, greedy_search

    over_row = patch_table.rogue_wrapper(monkeypatch, beam_search.BeamSearchBase, "_pick")  # on a row's wrapper
    no_row = patch_table.rogue_wrapper(monkeypatch, greedy_search.GreedySearch, "advance")  # where no row is
    problems = patch_table.check_table(active.PATCHES, "eole")
    assert patch_table.reported(problems, over_row)
    assert patch_table.reported(problems, no_row)


def test_an_object_bound_outside_the_table_or_a_rebinding_undone_is_reported(active, monkeypatch):
    import torch
    from eole.models import model
    from eole.modules import multi_headed_attn

    module_name = patch_table.rogue(monkeypatch, model, "torch", AtomicSaveTorch())  # no row rebinds it
    class_attr = patch_table.rogue(monkeypatch, model.BaseModel, "functional", SparseFunctional(torch.nn.functional))
    undone = patch_table.rogue(monkeypatch, multi_headed_attn, "F", torch.nn.functional)  # attention_eager's
    problems = patch_table.check_table(active.PATCHES, "eole")
    assert patch_table.reported(problems, module_name)
    assert patch_table.reported(problems, class_attr)
    assert patch_table.reported(problems, undone)


def test_rows_of_one_target_stack_in_table_order_and_original_is_stock(active):
    assert patch_table.stack_problems(active, "eole.utils.optimizers:Optimizer.load_state_dict",
                                      ["optimizer_state_finite", "resume_state_load", "resume_state_counters"]) == []
