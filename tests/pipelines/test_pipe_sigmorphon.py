"""SIGMORPHON 2018 preprocessing: the multilingual files of Peters et al. and the bundled sample."""
import filecmp
import re

from pipeline_helpers import ROOT, SHARED, load_script, needs_shared

ARCHIVE = SHARED / "sigmorphon2018-task1.tar.gz"
SAMPLE = ROOT / "data/sigmorphon2018-sample"
prep = load_script("scripts/data/prepare_sigmorphon2018.py")


@needs_shared("sigmorphon2018-task1.tar.gz")
def test_bundled_sample_is_reproduced_by_the_command_in_its_readme(tmp_path):
    cmd = re.search(r"```\n(python3 scripts/data/prepare_sigmorphon2018\.py.*?)```", (SAMPLE / "README.md").read_text(),
                    re.S)
    args = cmd.group(1).replace("\\\n", " ").split()[2:]
    args[args.index("--source") + 1] = str(ARCHIVE)
    args[args.index("--out") + 1] = str(tmp_path)
    prep.main(args)
    for name in ("src-train.txt", "tgt-train.txt", "src-dev.txt", "tgt-dev.txt", "src-test.txt", "tgt-test.txt",
                 "languages.txt"):
        assert filecmp.cmp(tmp_path / name, SAMPLE / name, shallow=False), name


def test_bundled_sample_shape():
    langs = (SAMPLE / "languages.txt").read_text().split()
    assert len(langs) == 4
    for split, n in (("train", 400), ("dev", 100), ("test", 100)):
        src = (SAMPLE / f"src-{split}.txt").read_text(encoding="utf-8").splitlines()
        tgt = (SAMPLE / f"tgt-{split}.txt").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(tgt) == n
        assert {s.split()[0] for s in src} == set(langs)
        assert all(t.strip() for t in tgt)


@needs_shared("sigmorphon2018-task1.tar.gz")
def test_full_medium_setting_is_every_language_of_all_and_surprise(tmp_path):
    langs = prep.prepare(ARCHIVE, tmp_path, "medium")
    # the paper: 102 languages in the medium setting (86 in high), all/ and surprise/ together
    assert len(langs) == 102 and "english" in langs and "adyghe" in langs  # english is a surprise language
    src = (tmp_path / "src-train.txt").read_text(encoding="utf-8").splitlines()
    assert {s.split()[0] for s in src} == set(langs)
    # per-language dev/test files equal the combined ones, language by language
    dev = (tmp_path / "src-dev.txt").read_text(encoding="utf-8").splitlines()
    english = (tmp_path / "per-language/english.dev.src").read_text(encoding="utf-8").splitlines()
    assert english == [s for s in dev if s.split()[0] == "english"] and len(english) == 1000
    # training lines are shuffled across languages, not in blocks
    assert len({s.split()[0] for s in src[:200]}) > 20


@needs_shared("sigmorphon2018-task1.tar.gz")
def test_unknown_language_is_named(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="klingon"):
        prep.prepare(ARCHIVE, tmp_path, "medium", languages=["english", "klingon"])


@needs_shared("sigmorphon2018-task1.tar.gz")
def test_git_clone_layout_gives_the_files_of_the_archive(tmp_path):
    """download.py clones sigmorphon/conll2018, whose task1/ also holds baseline/ and evaluation/ folders."""
    import tarfile

    clone = tmp_path / "conll2018"
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(clone, filter="data")
    (clone / "task1/evaluation/sample-output/task1").mkdir(parents=True)
    (clone / "task1/baseline").mkdir()
    (clone / "task1/baseline/baseline.py").write_text("print()\n")
    sizes = {"train": 20, "dev": 5, "test": 5}
    langs = prep.prepare(clone, tmp_path / "from-clone", "high", sizes=sizes)
    assert prep.prepare(ARCHIVE, tmp_path / "from-archive", "high", sizes=sizes) == langs
    for name in ("src-train.txt", "tgt-train.txt", "src-test.txt", "languages.txt"):
        assert filecmp.cmp(tmp_path / "from-clone" / name, tmp_path / "from-archive" / name, shallow=False), name
