"""The adapter's patch table is everything it installs in OpenNMT-py: each wrapper of ours anywhere in the
toolkit's touched packages is a row (target, feature, reason); rows of one target stack in table order."""
import functools
import sys
from pathlib import Path

import pytest

pytest.importorskip("onmt")

import onmt_entmax.onmt as plugin  # noqa: E402
from onmt_entmax import patching  # noqa: E402
from onmt_entmax.onmt import patches  # noqa: E402
from onmt_entmax.training.host import backward_on_calling_thread  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import patch_table  # noqa: E402


@pytest.fixture(scope="module")
def active():
    plugin.activate()
    patch_table.import_touched(patches.PATCHES)
    return patches


def test_every_wrapper_the_adapter_installs_is_a_row_of_its_table(active):
    assert patch_table.unlisted(active.PATCHES, "onmt") == []
    for p in active.PATCHES:  # and every row is installed at its target
        if p.target is not None:
            assert p.name in patching.wrapper_names(patch_table._at(p.target)), p.name


def test_a_wrapper_installed_outside_the_table_is_reported(active, monkeypatch):
    from onmt.translate import beam_search, greedy_search

    def rogue(owner, name):  # a wrapper of the package's own code, installed by hand
        up = getattr(owner, name)
        monkeypatch.setattr(owner, name, functools.wraps(up)(backward_on_calling_thread(up)))

    rogue(beam_search.BeamSearchBase, "advance")  # over a row's wrapper (whose mark functools.wraps copies)
    rogue(greedy_search.GreedySearch, "advance")  # where no row is
    problems = patch_table.unlisted(active.PATCHES, "onmt")
    assert any(p.startswith("onmt.translate.beam_search:BeamSearchBase.advance") for p in problems)
    assert any(p.startswith("onmt.translate.greedy_search:GreedySearch.advance") for p in problems)


def test_rows_of_one_target_stack_in_table_order_and_original_is_stock(active):
    from onmt.utils import optimizers

    assert patching.wrapper_names(optimizers.build_torch_optimizer) == ["adam_fused", "adam_eps"]
    assert patching.wrapper_names(optimizers.Optimizer.__dict__["from_opt"]) == \
        ["adam_fused_resume", "adam_eps_resume", "valid_lr_halving_flag"]
    stock = active.original("adam_eps")
    assert active.original("adam_fused") is stock and not patching.wrapper_names(stock)
    assert optimizers.build_torch_optimizer.__wrapped__.__wrapped__ is stock


def test_one_log_prob_path_serves_translation(active):
    """The translator's log_softmax and _decode_and_generate are wrapped once each, by the shared hook."""
    from onmt.translate import translator

    assert patching.wrapper_names(translator.log_softmax) == ["translator_log_probs"]
    assert patching.wrapper_names(translator.Inference._decode_and_generate) == ["translator_generator"]
    assert patching.wrapper_names(translator.log_softmax.__wrapped__) == []
