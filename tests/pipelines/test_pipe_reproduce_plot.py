"""reproduce.py plot (steps/plot.py): Figure 4 from the validations in the training logs."""
import experiments as E
from reproduce_helpers import LOG, scored_runs
from steps.plot import plot_fig4
from steps.table import collect


def test_figure4_plot_is_written(tmp_path):
    for which in ("attention", "output"):
        scored_runs(tmp_path, f"peters2019-fig4-{which}", {"1": [60.0, 60.5], "1.5": [61.0, 61.2], "2": [60.2]})
    out = plot_fig4(tmp_path / "fig4.png", runs=tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figure4_reads_validation_accuracy_from_training_logs(tmp_path):
    e = next(x for x in E.all_experiments() if x.table == "peters2019-fig4-output" and x.row == "1.33")
    (tmp_path / e.run_dir / "seed1").mkdir(parents=True)
    (tmp_path / e.run_dir / "seed1/train.log").write_text(LOG)
    assert collect("peters2019-fig4-output", runs=tmp_path) == {("1.33", "dev accuracy"): [70.25]}
