"""The adapter's patch table is everything it installs in OpenNMT-py: each wrapper of ours anywhere in the
toolkit's touched packages is a row (target, feature, reason), each other object of ours bound there a
registration row's declared rebinding; rows of one target stack in table order."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("onmt")

import onmt_entmax.onmt as plugin  # noqa: E402
from onmt_entmax import patching  # noqa: E402
from onmt_entmax.onmt import patches  # noqa: E402
from onmt_entmax.onmt.checkpoint import WeightsOnlyTorch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import patch_table  # noqa: E402


@pytest.fixture(scope="module")
def active():
    plugin.activate()
    patch_table.import_touched(patches.PATCHES)
    return patches


def test_everything_the_adapter_installs_is_a_row_of_its_table_and_in_place(active):
    assert patch_table.check_table(active.PATCHES, "onmt") == []


def test_a_wrapper_installed_outside_the_table_is_reported(active, monkeypatch):
    from onmt.translate import beam_search, greedy_search

    over_row = patch_table.rogue_wrapper(monkeypatch, beam_search.BeamSearchBase, "advance")  # on a row's wrapper
    no_row = patch_table.rogue_wrapper(monkeypatch, greedy_search.GreedySearch, "advance")  # where no row is
    problems = patch_table.check_table(active.PATCHES, "onmt")
    assert patch_table.reported(problems, over_row)
    assert patch_table.reported(problems, no_row)


def test_an_object_bound_outside_the_table_or_a_rebinding_undone_is_reported(active, monkeypatch):
    import torch
    from onmt.models import model_saver
    from onmt.translate import translator

    module_name = patch_table.rogue(monkeypatch, translator, "torch", WeightsOnlyTorch())  # no row rebinds it
    class_attr = patch_table.rogue(monkeypatch, translator.Translator, "functional", WeightsOnlyTorch())
    undone = patch_table.rogue(monkeypatch, model_saver, "torch", torch)  # checkpoint_weights_only's, undone
    problems = patch_table.check_table(active.PATCHES, "onmt")
    assert patch_table.reported(problems, module_name)
    assert patch_table.reported(problems, class_attr)
    assert patch_table.reported(problems, undone)


def test_rows_of_one_target_stack_in_table_order_and_original_is_stock(active):
    assert patch_table.stack_problems(active, "onmt.utils.optimizers:build_torch_optimizer",
                                      ["adam_fused", "adam_eps"]) == []
    assert patch_table.stack_problems(active, "onmt.utils.optimizers:Optimizer.from_opt",
                                      ["adam_fused_resume", "adam_eps_resume", "valid_lr_halving_flag"]) == []


def test_one_log_prob_path_serves_translation(active):
    """The translator's log_softmax and _decode_and_generate are wrapped once each, by the shared hook."""
    from onmt.translate import translator

    assert patching.wrapper_names(translator.log_softmax) == ["translator_log_probs"]
    assert patching.wrapper_names(translator.Inference._decode_and_generate) == ["translator_generator"]
    assert patching.wrapper_names(translator.log_softmax.__wrapped__) == []
