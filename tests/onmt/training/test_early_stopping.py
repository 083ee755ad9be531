"""early_stopping_resume: a run resumed with -train_from continues its early-stopping patience and best
scores (upstream starts both afresh), so a run trained in pieces stops where it would have at once."""
import logging
import re

import torch

from onmt_testkit import build_vocab, train, yaml_config

from onmt_entmax.analysis.checkpoint import load_checkpoint
from onmt_entmax.training import early_stopping


def _stopper(tolerance, criteria=("accuracy",)):
    from onmt.utils.earlystopping import AccuracyScorer, EarlyStopping, PPLScorer

    kinds = {"accuracy": AccuracyScorer, "ppl": PPLScorer}
    return EarlyStopping(tolerance, scorers=[kinds[c]() for c in criteria])


class _Stats:
    def __init__(self, acc, ppl=10.0):
        self._acc, self._ppl = acc, ppl

    def accuracy(self):
        return self._acc

    def ppl(self):
        return self._ppl


def _optimizer():
    from onmt.utils.optimizers import Optimizer

    return Optimizer(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))]), learning_rate=1e-3)


def test_patience_and_best_score_survive_the_checkpoint():
    first = _stopper(5)
    for step, acc in enumerate([50.0, 60.0, 55.0, 58.0], 1):  # best 60 at step 2, then two drops
        first(_Stats(acc), step)
    saving = _optimizer()
    saving._entmax_earlystopper = first
    resumed_optim = _optimizer()
    resumed_optim.load_state_dict(saving.state_dict())
    resumed = _stopper(5)
    assert early_stopping.restore(resumed, resumed_optim._entmax_early_state)
    assert (resumed.current_tolerance, resumed.current_step_best) == (3, 2)
    assert resumed.early_stopping_scorers[0].best_score == 60.0
    for step, acc in enumerate([59.0, 59.5, 58.0], 5):  # three more drops: 5 without a gain
        resumed(_Stats(acc), step)
    assert resumed.has_stopped()
    fresh = _stopper(5)  # upstream after -train_from: the same three validations do not stop it
    for step, acc in enumerate([59.0, 59.5, 58.0], 5):
        fresh(_Stats(acc), step)
    assert not fresh.has_stopped()


def test_spent_patience_stays_spent_when_n_changes_and_other_criteria_start_afresh():
    first = _stopper(5)
    for step, acc in enumerate([60.0, 50.0, 50.0, 50.0], 1):  # 3 of 5 spent
        first(_Stats(acc), step)
    state = early_stopping.snapshot(first)
    shorter = _stopper(3)
    early_stopping.restore(shorter, state)
    assert shorter.current_tolerance == 0 and shorter.has_stopped()
    longer = _stopper(10)
    early_stopping.restore(longer, state)
    assert longer.current_tolerance == 7 and not longer.has_stopped()
    other = _stopper(5, ("ppl",))
    assert not early_stopping.restore(other, state)
    assert other.current_tolerance == 5 and other.early_stopping_scorers[0].best_score == float("inf")


def test_a_stock_checkpoint_leaves_the_early_stopper_as_upstream_builds_it():
    optim = _optimizer()
    optim.load_state_dict({"training_step": 5, "decay_step": 5})  # a stock 3.5.1 checkpoint
    assert optim._entmax_early_state is None
    assert early_stopping.STATE_KEY not in optim.state_dict()  # no early stopper: nothing saved


def test_onmt_train_saves_the_state_its_validations_imply_and_a_resumed_run_continues_it(toy, caplog):
    model = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
                 generator_function="entmax15", global_attention_function="entmax15")
    config = yaml_config(toy, model, steps=6, extra="early_stopping: 100\nearly_stopping_criteria: [accuracy]\n"
                                                   "valid_steps: 1\nsave_checkpoint_steps: 1\n")
    build_vocab(config)
    caplog.set_level(logging.INFO, logger="onmt")
    train(config)
    accs = [float(m.group(1)) for m in map(re.compile(r"Validation accuracy: ([\d.]+)").search, caplog.messages) if m]
    assert len(accs) == 6
    # the state OpenNMT-py's rules give after three validations, computed here from the logged scores:
    # a gain resets both patiences, a drop spends one of the decreasing, an equal score one of the stalled
    best, best_step, left, stalled_left = -float("inf"), 0, 100, 100
    for step, acc in enumerate(accs[:3], 1):
        if acc > best:
            best, best_step, left, stalled_left = acc, step, 100, 100
        elif acc < best:
            left -= 1
        else:
            stalled_left -= 1
    state = load_checkpoint(toy / "run/model_step_3.pt")["optim"][early_stopping.STATE_KEY]
    assert (state["current_step_best"], state["current_tolerance"], state["stalled_tolerance"]) == \
        (best_step, left, stalled_left)
    assert abs(state["best_scores"]["acc"] - best) < 1e-6
    caplog.clear()
    train(config, "-train_from", str(toy / "run/model_step_3.pt"))
    resumed = [line for line in caplog.messages if line.startswith("early stopping resumed")]
    assert resumed == [f"early stopping resumed: best acc {best:g} at step {best_step}, "
                       f"patience {left}/100 (stalled {stalled_left}/100)"]
