"""language_gaps.py: two runs' test scores compared language by language from the languages CSVs."""
import csv
import subprocess
import sys

import pytest

from pipeline_helpers import ROOT, load_script

lg = load_script("scripts/reproduce/language_gaps.py")
COLUMNS = ("setting", "output_alpha", "attention_alpha", "seed", "language", "n", "test_acc", "test_lev", "commit")


def _write(path, runs):
    """runs: {(out, attn, seed): {language: accuracy}} as a languages CSV of the medium setting."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for (out, attn, seed), accs in runs.items():
            for lang, acc in accs.items():
                w.writerow(("medium", out, attn, seed, lang, 100, f"{acc:.2f}", "0.1", "abc1234"))
    return path


BASE = {"greek": 90.0, "armenian": 80.0, "latin": 50.0, "welsh": 70.0}
RUN = {"greek": 40.0, "armenian": 81.0, "latin": 44.0, "welsh": 70.0}


def test_the_mean_gap_is_the_difference_of_the_table_averages_and_shares_add_up(tmp_path):
    d = lg.gaps(RUN, BASE)
    s = lg.summary(d, below=5, group=["greek", "armenian"])
    assert s["mean"] == pytest.approx(sum(RUN.values()) / 4 - sum(BASE.values()) / 4)
    assert (s["gained"], s["lost"]) == (1, 2)
    assert s["below"] == [("greek", -50.0), ("latin", -6.0)]  # the largest loss first; 0 and +1 not listed
    assert s["below_share"] == pytest.approx(-56.0 / 4)
    # a group's share plus the others' mean weighted by their number is the whole difference
    assert s["group_share"] + s["others_mean"] * 2 / 4 == pytest.approx(s["mean"])


def test_runs_are_read_by_setting_alphas_and_seed(tmp_path):
    path = _write(tmp_path / "t-languages.csv", {("1", "1", "1"): BASE, ("1", "1.5", "1"): RUN,
                                                 ("1", "1.5", "2"): BASE})
    assert lg.scores(*lg.parse_run(f"{path}:1/1.5/1")) == RUN
    assert lg.scores(*lg.parse_run(f"{path}:medium/1/1.5/2")) == BASE
    with pytest.raises(ValueError, match="seed 3"):
        lg.scores(*lg.parse_run(f"{path}:1/1.5/3"))
    with pytest.raises(ValueError, match="expected CSV:OUT/ATTN/SEED"):
        lg.parse_run(f"{path}:1/1.5")


def test_runs_of_different_languages_are_refused_not_averaged():
    with pytest.raises(ValueError, match="different languages.*welsh"):
        lg.gaps({k: v for k, v in RUN.items() if k != "welsh"}, BASE)
    with pytest.raises(ValueError, match="--group: not a language of these runs: klingon"):
        lg.summary(lg.gaps(RUN, BASE), group=["klingon"])


def test_the_command_prints_the_gap_and_names_a_bad_run_in_one_line(tmp_path):
    path = _write(tmp_path / "t-languages.csv", {("1", "1", "1"): BASE, ("1", "1.5", "1"): RUN})
    script = str(ROOT / "scripts" / "reproduce" / "language_gaps.py")
    ok = subprocess.run([sys.executable, script, f"{path}:1/1.5/1", f"{path}:1/1/1", "--below", "5",
                         "--group", "greek"], capture_output=True, text=True, check=True)
    assert "-13.75 over 4 languages (1 gain, 2 lose)" in ok.stdout.replace("−", "-")
    assert "greek -50.0, latin -6.0" in ok.stdout
    bad = subprocess.run([sys.executable, script, f"{path}:2/2/1", f"{path}:1/1/1"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0
    assert "no rows for setting medium, output alpha 2, attention alpha 2, seed 1" in bad.stderr
