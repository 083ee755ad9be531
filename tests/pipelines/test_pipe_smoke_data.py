"""The smoke runs' data on a fresh clone: ``reproduce.py smoke-data`` prepares the MT families' Multi30k
from the bundled sample, without ../shared/data (the runs themselves are ``slow``: test_pipe_smoke.py)."""
import gzip

import pytest
import yaml

from pipeline_helpers import MULTI30K_SAMPLE, ROOT, SHARED, load_script
from steps import common
from steps.smoke_data import SAMPLE_LINES, smoke_data

mk = load_script("scripts/reproduce/make_configs.py")


def test_smoke_data_needs_no_shared_folder_and_gives_every_file_the_mt_smoke_configs_read(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "SHARED", tmp_path / "no-shared-data")  # a fresh clone: no ../shared/data
    smoke_data(tmp_path, lines=100, merges=300)
    mt = [f for f, (e, _) in mk.smoke_configs().items() if e.task == "mt"]
    assert len(mt) == 3
    for family in mt:
        cfg = yaml.safe_load((ROOT / f"configs/smoke/{family}.yaml").read_text())
        for corpus in cfg["data"].values():
            for key in ("path_src", "path_tgt"):
                lines = (tmp_path / corpus[key]).read_text(encoding="utf-8").splitlines()
                assert len(lines) == 100 and all(lines)
    for name in ("test.bpe.de", "test.tok.en", "test.raw.en"):  # what the smoke run translates and scores
        assert len((tmp_path / "work/smoke/multi30k" / name).read_text(encoding="utf-8").splitlines()) == 100


@pytest.mark.skipif(not (SHARED / "multi30k").exists(), reason="needs the real data ../shared/data/multi30k, "
                    "not bundled (README: where it comes from)")
def test_the_sample_is_the_releases_first_lines():
    """Its README's claim, so that the smoke data are the same with or without ../shared/data."""
    for path in sorted(MULTI30K_SAMPLE.glob("*.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as mine, gzip.open(SHARED / "multi30k" / path.name, "rt",
                                                                         encoding="utf-8") as full:
            sample = mine.read().splitlines()
            assert len(sample) == SAMPLE_LINES
            assert sample == [next(full).rstrip("\n") for _ in sample], path.name
    assert len(list(MULTI30K_SAMPLE.glob("*.gz"))) == 6
