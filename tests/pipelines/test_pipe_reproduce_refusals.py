"""reproduce.py refuses bad options in one line, before it starts or writes anything."""
import pytest

import pieces
from pipeline_helpers import load_script
from steps import common
from steps.common import experiments
from steps.evaluate import evaluate

rep = load_script("scripts/reproduce/reproduce.py")


def _fake_nvidia_smi(tmp_path, monkeypatch, gpus: int) -> None:
    """An nvidia-smi on PATH that lists ``gpus`` GPUs by index (0: none)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + "".join(f"echo {i}\n" for i in range(gpus)))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as err:
        rep.main(argv)
    return str(err.value) + capsys.readouterr().err


def test_an_only_glob_that_matches_nothing_is_named_instead_of_doing_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    said = _refused(["train", "peters2019-table1", "--only", "medium/out1-attn1", "medium/out15-attn15",
                     "--seeds", "1"], capsys)
    assert said.startswith("--only medium/out15-attn15: no experiment of peters2019-table1 matches")
    assert "medium/out1.5-attn1.5" in said  # the names it could have been
    assert not (tmp_path / "runs").exists()
    said = _refused(["analyze", "peters2019-sec4.1", "--only", "medium/nope"], capsys)
    assert said.startswith("--only medium/nope: no experiment of peters2019-sec4.1 matches")
    assert [e.name for e in experiments("peters2019-table1", "medium/out2-*")] == \
        ["medium/out2-attn1", "medium/out2-attn1.5", "medium/out2-attn2"]


def test_gpu_ids_the_machine_lacks_are_refused_before_any_run_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    _fake_nvidia_smi(tmp_path, monkeypatch, 2)
    assert pieces.missing_gpus([0, 1]) is None
    assert pieces.missing_gpus([2]) == "this machine has 2 GPU(s), ids 0 to 1"
    assert pieces.missing_gpus([-1]) == "GPU ids are 0 or more"
    train = ["train", "peters2019-table1", "--only", "medium/out2-attn2", "--seeds", "1"]
    assert "--gpus 0 2: this machine has 2 GPU(s)" in _refused([*train, "--gpus", "0", "2"], capsys)
    assert "--gpu 5: this machine has 2 GPU(s)" in _refused(["evaluate", *train[1:], "--gpu", "5"], capsys)
    assert not (tmp_path / "runs").exists()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert "--gpus 0: no NVIDIA GPU here" in _refused([*train, "--gpus", "0"], capsys)


@pytest.mark.parametrize("option", [["--max-minutes", "0"], ["--jobs", "0"], ["--translate-batch", "-4"],
                                    ["--analysis-lines", "0"]])
def test_counts_and_minutes_below_one_are_refused(option, capsys):
    said = _refused(["train", "peters2019-table1", "--only", "medium/out2-attn2", *option], capsys)
    assert f"{option[0]} {float(option[1]):g}: give a number above 0" in said


def test_a_runs_folder_that_is_not_there_is_refused_rather_than_an_empty_table(tmp_path, capsys):
    assert f"--runs {tmp_path / 'nope'}: no such folder" in \
        _refused(["table", "peters2019-table1", "--runs", str(tmp_path / "nope")], capsys)


def test_evaluate_skips_a_run_not_yet_validated_and_names_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = experiments("peters2019-table1", "medium/out2-attn2")[0]
    run_dir = tmp_path / e.run_dir / "seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "train.log").write_text("[..] Step 500/149000; acc: 50.1\n")
    evaluate(e, [1], None)
    assert f"skip {run_dir}: no validated checkpoint" in capsys.readouterr().err
    assert not (run_dir / "scores.json").exists()


def test_sigmorphon_data_without_its_archive_names_the_option_and_the_download(tmp_path, monkeypatch, capsys):
    """Without the shared archive the preparation script ended in a FileNotFoundError traceback."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    monkeypatch.setattr(common, "SHARED", tmp_path / "shared")
    for extra in ([], ["--sigmorphon", str(tmp_path / "nowhere.tar.gz")]):
        said = _refused(["data", "peters2019-table1", "--only", "medium/out2-attn2", *extra], capsys)
        assert "--sigmorphon" in said and "scripts/data/download.py sigmorphon2018" in said
        assert len(said.strip().splitlines()) == 1
    assert not (tmp_path / "work").exists()


def test_plot_without_runs_is_refused_naming_where_it_looked(tmp_path, monkeypatch, capsys):
    """It wrote an empty figure and exited 0."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    out = tmp_path / "figure4.png"
    said = _refused(["plot", "--out", str(out)], capsys)
    assert str(tmp_path / "runs") in said and len(said.strip().splitlines()) == 1
    assert not out.exists()
