"""Training runs backward on the calling thread (ONMT_ENTMAX_TRAIN_HOST=as-is keeps upstream's device thread)."""
import pytest
import torch

import onmt_entmax.onmt as plugin
from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.training.host import backward_on_calling_thread


@pytest.fixture
def restore_threading():
    before = torch.autograd.is_multithreading_enabled()
    yield
    torch.autograd.set_multithreading_enabled(before)


def _mode_seen_by_the_loop(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("ONMT_ENTMAX_TRAIN_HOST", raising=False)
    else:
        monkeypatch.setenv("ONMT_ENTMAX_TRAIN_HOST", value)
    torch.autograd.set_multithreading_enabled(True)
    return backward_on_calling_thread(lambda self: torch.autograd.is_multithreading_enabled())(None)


def test_the_training_loop_runs_backward_on_its_own_thread_unless_asked_not_to(monkeypatch, restore_threading):
    assert _mode_seen_by_the_loop(monkeypatch, None) is False
    assert _mode_seen_by_the_loop(monkeypatch, "calling-thread") is False
    assert _mode_seen_by_the_loop(monkeypatch, "as-is") is True


def test_a_misspelled_setting_is_refused_by_name(monkeypatch, restore_threading):
    with pytest.raises(EntmaxOptionError, match="ONMT_ENTMAX_TRAIN_HOST='calling_thread': expected one of"):
        _mode_seen_by_the_loop(monkeypatch, "calling_thread")


def test_onmt_train_loop_is_the_wrapped_one():
    plugin.activate()
    import onmt.trainer

    assert "training_host" in plugin.patches.applied()
    assert onmt.trainer.Trainer.train.__wrapped__ is plugin.patches.original("training_host")


def test_eole_training_loop_is_wrapped_the_same_way():
    pytest.importorskip("eole")
    from onmt_entmax.eole import patches as eole_patches

    eole_patches.apply_patches()
    import eole.trainer

    assert "training_host" in eole_patches.applied()
    assert eole.trainer.Trainer.train.__wrapped__ is eole_patches.original("training_host")
