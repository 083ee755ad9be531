"""The stop-on-signal wrappers both adapters install (onmt_entmax/training/signals.py), on a toy loop: a stop
signal ends the loop after the step under way, never inside it, and the process says so by its exit code."""
import os
import signal

import pytest

from onmt_entmax.training import signals


class _Optim:
    training_step = 1


class _Trainer:
    """The shape both toolkits' loops have: steps over ``_accum_batches``, then one save at the end."""

    def __init__(self, kill_at=None, signals=(signal.SIGTERM,)):
        self.optim, self.kill_at, self.signals, self.trained, self.saved = _Optim(), kill_at, signals, [], None

    def _accum_batches(self, iterator):
        yield from iterator

    def train(self, n, batches=None):
        for batch in self._accum_batches(iter(range(n)) if batches is None else batches):
            step = self.optim.training_step
            if step == self.kill_at:
                for signum in self.signals:  # arrives in the middle of the step
                    os.kill(os.getpid(), signum)
            self.trained.append(batch)
            self.optim.training_step += 1
        self.saved = step
        return self.saved


_Trainer._accum_batches = signals.stop_between_steps(_Trainer._accum_batches, "test")


def _main(trainer, n, single=True):
    return signals.stop_on_signal(lambda t, n: t.train(n), lambda t, n: single)(trainer, n)


def test_a_stop_signal_lets_the_step_finish_saves_there_and_exits_128_plus_the_signal(caplog):
    trainer = _Trainer(kill_at=4)
    with pytest.raises(SystemExit) as stop:
        _main(trainer, 10)
    assert stop.value.code == 128 + signal.SIGTERM
    assert trainer.trained == [0, 1, 2, 3] and trainer.saved == 4  # step 4 finished, nothing after it
    assert "SIGTERM: stopping after step 4" in caplog.text
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler before ours is back
    assert signals.stop_requested() == signal.SIGTERM


def test_a_stop_before_the_first_step_exits_without_saving_over_the_newest_checkpoint(caplog):
    trainer = _Trainer()

    def start_then_train(t, n):  # the signal comes while the toolkit builds the model and the data
        os.kill(os.getpid(), signal.SIGTERM)
        return t.train(n)

    with pytest.raises(SystemExit) as stop:
        signals.stop_on_signal(start_then_train, lambda t, n: True)(trainer, 10)
    assert stop.value.code == 128 + signal.SIGTERM
    assert trainer.trained == [] and trainer.saved is None
    assert "stopping before the first step of this process; nothing to save" in caplog.text


def test_a_stop_signal_while_the_next_batch_is_read_stops_before_training_it(caplog):
    def reading(n, signal_at):  # the data loader: the signal arrives while batch `signal_at` is read
        for batch in range(n):
            if batch == signal_at:
                os.kill(os.getpid(), signal.SIGTERM)
            yield batch

    trainer = _Trainer()
    trainer.train = lambda n, train=trainer.train: train(n, reading(n, 3))
    with pytest.raises(SystemExit) as stop:
        _main(trainer, 10)
    assert stop.value.code == 128 + signal.SIGTERM
    assert trainer.trained == [0, 1, 2] and trainer.saved == 3  # the batch read meanwhile is not trained
    assert "SIGTERM: stopping after step 3" in caplog.text


def test_without_a_signal_the_loop_runs_to_its_end_and_the_process_exits_normally():
    trainer = _Trainer()
    assert _main(trainer, 5) == 5 and trainer.trained == [0, 1, 2, 3, 4]
    assert signals.stop_requested() is None


def test_a_second_signal_stops_at_once_as_the_handler_before_ours_would():
    trainer = _Trainer(kill_at=2, signals=(signal.SIGINT, signal.SIGINT))
    # Python's own SIGINT handler before ours (a shell's background job inherits SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):  # Python's SIGINT handler, restored by the second Ctrl-C
            _main(trainer, 10)
        assert trainer.saved is None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_several_processes_training_together_keep_the_toolkits_handling():
    seen = []
    signals.stop_on_signal(lambda: seen.append(signal.getsignal(signal.SIGTERM)), lambda: False)()
    assert seen == [signal.SIG_DFL]
