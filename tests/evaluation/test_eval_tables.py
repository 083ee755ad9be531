"""Paper numbers are transcribed faithfully from the seed papers; tables print mean ± std beside them."""
import re
from pathlib import Path

import pytest

from onmt_entmax.evaluation import tables

SEEDS = Path(__file__).resolve().parents[2].parent / "shared/seeds"


def test_paper_numbers_load_and_are_unique():
    nums = tables.load_paper_numbers()
    assert len(nums) > 90
    assert nums[("peters2019", "1", "out1.5-attn1.5", "medium-ens")].value == 86.55
    assert nums[("peters2019", "2", "entmax15", "ro-en")].std == 0.06


@pytest.mark.skipif(not SEEDS.exists(), reason="needs ../shared/seeds")
def test_every_paper_number_appears_in_its_source_text():
    """Each value (and ±) as written in the CSV occurs in the cited seed file, catching transcription typos."""
    raw = [l for l in tables.PAPER_NUMBERS.read_text(encoding="utf-8").splitlines() if not l.startswith("#")][1:]
    for line in raw:
        paper, table, row, column, metric, value, std, source, *_ = line.split(",")
        text = (SEEDS / source).read_text(encoding="utf-8")
        quoted = re.search(r"seed text prints '([^']*)'", line)
        if quoted:  # a cell the text extraction mangled: the note quotes it, check the quote instead
            assert quoted.group(1).replace("<TAB>", "\t") in text, line
            continue
        forms = {value, value.lstrip("0") if value.startswith("0.") else value}
        assert any(re.search(rf"(?<![0-9.]){re.escape(f)}(?![0-9])", text) for f in forms), line
        if std:
            assert f"{value[-3:]} ± {std}" in text or f"{value} ± {std}" in text, line


def test_mean_std_is_sample_std():
    mean, std = tables.mean_std([1.0, 2.0, 3.0])
    assert mean == 2.0 and std == pytest.approx(1.0)
    assert tables.mean_std([5.0]) == (5.0, None)


def test_markdown_table_puts_paper_beside_ours():
    paper = {k[2:]: v for k, v in tables.load_paper_numbers().items() if k[:2] == ("tezekbayev", "1")}
    text = tables.markdown_table(["softmax", "relu15"], ["iwslt14 de-en"],
                                 {("relu15", "iwslt14 de-en"): [37.0, 37.5]}, paper)
    lines = text.splitlines()
    assert lines[0] == "|  | iwslt14 de-en (ours) | iwslt14 de-en (paper) |"
    assert lines[2] == "| softmax | – | 35.30 |"
    assert lines[3] == "| relu15 | 37.25 ± 0.35 (n=2) | 37.30 |"


def test_a_labelled_cell_says_its_label_in_place_of_the_seeds_it_was_averaged_over():
    """An ensemble's cell is one score of several seeds' models: "(3 seeds)", not "(n=1)"."""
    text = tables.markdown_table(["r"], ["medium-avg", "medium-ens"],
                                 {("r", "medium-avg"): [85.0, 86.0], ("r", "medium-ens"): [86.8]},
                                 labels={("r", "medium-ens"): "3 seeds"})
    assert text.splitlines()[2] == "| r | 85.50 ± 0.71 (n=2) | – | 86.80 (3 seeds) | – |"
