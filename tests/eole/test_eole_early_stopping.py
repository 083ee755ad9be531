"""A run resumed with Eole's train_from continues its early-stopping patience and best score
(``onmt_entmax.training.early_stopping``; Eole's checkpoints hold neither)."""
import torch
import yaml

from eole_testkit import run_eole, sample_vocabs, small_config


def test_eole_train_from_continues_the_early_stoppers_patience_and_best_score(tmp_path):
    """Stock train_from starts the patience and the best score afresh."""
    from onmt_entmax.training.early_stopping import STATE_KEY

    sample_vocabs(tmp_path)
    config = small_config("rnn-entmax15", tmp_path, steps=4, num_workers=0)
    cfg = yaml.safe_load(config.read_text())
    cfg["training"].update(valid_steps=1, save_checkpoint_steps=1, early_stopping=100,
                           early_stopping_criteria=["accuracy"])
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_eole(["train", "-c", config], cwd=tmp_path)
    state = torch.load(tmp_path / "model" / "step_2" / "optimizer.pt", weights_only=True)[STATE_KEY]
    assert state["tolerance"] == 100 and 1 <= state["current_step_best"] <= 2
    assert (state["current_tolerance"], state["stalled_tolerance"]) in {(100, 100), (99, 100), (100, 99)}
    cfg["training"].update(train_from=str(tmp_path / "model" / "step_2"), model_path=str(tmp_path / "resumed"))
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = run_eole(["train", "-c", config], cwd=tmp_path)
    best = state["best_scores"]["acc"]
    assert (f"early stopping resumed: best acc {best:g} at step {state['current_step_best']}, patience "
            f"{state['current_tolerance']}/100 (stalled {state['stalled_tolerance']}/100)") in proc.stderr + proc.stdout
