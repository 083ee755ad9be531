"""reproduce.py runs (steps/runs.py): which row is a recorded run's."""
import results_csv


def test_of_two_rows_of_one_run_on_one_day_the_later_in_the_file_is_the_runs_row():
    run = {"setting": "medium", "output_alpha": "1.5", "attention_alpha": "1.5", "seed": "1"}
    rows = [{**run, "date": "2026-11-27", "test_acc": "70.0"}, {**run, "date": "2026-11-28", "test_acc": "71.0"},
            {**run, "date": "2026-11-28", "test_acc": "72.0"},
            {**run, "seed": "2", "date": "2026-11-29", "test_acc": "9"}]
    assert [r["test_acc"] for r in results_csv.latest_per_run(rows)] == ["72.0", "9"]
    older = {**run, "date": "2026-11-26", "test_acc": "60.0"}  # later in the file, of an earlier day
    assert [r["test_acc"] for r in results_csv.latest_per_run(rows + [older])] == ["72.0", "9"]
