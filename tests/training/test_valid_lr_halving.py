"""The valid_lr_halving rule both adapters share (layer 4): when it halves, what it keeps, what it refuses."""
import logging
import types

import pytest

from onmt_entmax.training import lr_halving as rule


def _optim(every=1):
    return types.SimpleNamespace(_learning_rate=1e-3, _entmax_halving=True, _entmax_halving_every=every)


def test_it_halves_at_a_checking_validation_whose_loss_rose_since_the_last_check():
    optim = _optim(every=2)
    halved = [rule.after_validation(optim, loss, logging.getLogger("t")) for loss in (2.0, 1.5, 1.6, 1.7, 1.4, 1.8)]
    assert halved == [False, False, False, True, False, True]  # checks at 2, 4, 6: 1.5, 1.7 > 1.5, 1.8 > 1.7
    assert optim._learning_rate == pytest.approx(2.5e-4) and optim._entmax_halvings == 2
    off = types.SimpleNamespace(_learning_rate=1e-3)
    assert not any(rule.after_validation(off, loss, logging.getLogger("t")) for loss in (1.0, 2.0, 3.0))
    assert off._learning_rate == 1e-3


def test_the_state_goes_back_into_a_fresh_optimizer_at_the_halved_rate():
    optim = _optim()
    for loss in (1.0, 2.0, 3.0):
        rule.after_validation(optim, loss, logging.getLogger("t"))
    fresh = types.SimpleNamespace(_learning_rate=1e-3)
    rule.load_into(fresh, rule.state_of(optim))
    assert fresh._learning_rate == pytest.approx(2.5e-4)
    assert (fresh._entmax_validations, fresh._entmax_last_valid) == (3, 3.0)


def test_a_refusal_names_the_options_as_the_toolkits_config_writes_them():
    options = types.SimpleNamespace(valid_lr_halving=True, decay_method="noam")
    assert rule.refusal(options, True) == ("valid_lr_halving is a learning-rate schedule and decay_method noam is "
                                           "another: remove one of them")
    assert rule.refusal(options, True, name=lambda n: f"training.{n}").startswith(
        "training.valid_lr_halving is a learning-rate schedule and training.decay_method noam")
    assert rule.refusal(types.SimpleNamespace(valid_lr_halving=True), True) is None
    assert "no validation data" in rule.refusal(types.SimpleNamespace(valid_lr_halving=True), False)
