"""Where two runs' test scores part, language by language, read from the committed
``docs/results/<table>-languages.csv`` files (``reproduce.py record`` writes them).

    python3 scripts/reproduce/language_gaps.py RUN BASE [--below 10] [--group greek armenian ...]

RUN and BASE name one run each as ``CSV:OUT/ATTN/SEED`` (setting medium) or ``CSV:SETTING/OUT/ATTN/SEED``,
e.g. ``docs/results/peters2019-table1-fork-languages.csv:1/1.5/1``. The table's score is the unweighted
mean over the L languages, so RUN − BASE is the mean of the per-language differences d_l, and a set G of
languages contributes sum_{l in G} d_l / L of it (its "share"). Printed: that mean, how many languages gain
and lose, the languages more than ``--below`` points below BASE with their share, and (``--group``) the
group's share and the mean d_l of the other languages.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (its neighbours, also when imported)
import results_csv  # noqa: E402


def parse_run(spec: str) -> tuple[Path, tuple[str, str, str, str]]:
    """``CSV:[SETTING/]OUT/ATTN/SEED`` as (the CSV's path, (setting, output α, attention α, seed))."""
    path, sep, run = spec.rpartition(":")
    parts = run.split("/")
    if not sep or len(parts) not in (3, 4) or not all(parts):
        raise ValueError(f"{spec!r}: expected CSV:OUT/ATTN/SEED or CSV:SETTING/OUT/ATTN/SEED")
    key = tuple(parts) if len(parts) == 4 else ("medium", *parts)
    return Path(path), key


def scores(path: Path, key: tuple[str, str, str, str]) -> dict[str, float]:
    """Test exact match (%) by language of the run ``key`` in the languages CSV ``path``."""
    if not path.is_file():
        raise ValueError(f"{path}: no such languages CSV")
    rows = [r for r in results_csv.read_rows(path, results_csv.LANGUAGE_COLUMNS)
            if (r["setting"], r["output_alpha"], r["attention_alpha"], r["seed"]) == key]
    if not rows:
        raise ValueError(f"{path}: no rows for setting {key[0]}, output alpha {key[1]}, attention alpha "
                         f"{key[2]}, seed {key[3]}")
    return {r["language"]: float(r["test_acc"]) for r in rows}


def gaps(run: dict[str, float], base: dict[str, float]) -> dict[str, float]:
    """d_l = run_l − base_l for every language; both runs must score the same languages."""
    if set(run) != set(base):
        only = sorted(set(run) ^ set(base))
        raise ValueError(f"the two runs score different languages (in one only: {', '.join(only[:5])})")
    return {lang: run[lang] - base[lang] for lang in sorted(run)}


def summary(d: dict[str, float], below: float = 10.0, group: list[str] | None = None) -> dict:
    """The mean of d (= the difference of the two averages), the counts of gains and losses, the
    languages with d_l < −below (largest loss first) and their share sum d_l / L, and for ``group``
    its share and the mean d_l of the languages outside it."""
    n = len(d)
    low = sorted((v, lang) for lang, v in d.items() if v < -below)
    out = {"languages": n, "mean": sum(d.values()) / n, "gained": sum(v > 0 for v in d.values()),
           "lost": sum(v < 0 for v in d.values()), "below": [(lang, v) for v, lang in low],
           "below_share": sum(v for v, _ in low) / n}
    if group:
        missing = sorted(set(group) - set(d))
        if missing:
            raise ValueError(f"--group: not a language of these runs: {', '.join(missing)}")
        others = [v for lang, v in d.items() if lang not in group]
        out["group_share"] = sum(d[lang] for lang in group) / n
        out["others_mean"] = sum(others) / len(others) if others else 0.0
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="CSV:[SETTING/]OUT/ATTN/SEED")
    ap.add_argument("base", help="CSV:[SETTING/]OUT/ATTN/SEED, the run compared against")
    ap.add_argument("--below", type=float, default=10.0, help="list the languages this many points below BASE")
    ap.add_argument("--group", nargs="+", help="languages whose share of the difference to print")
    a = ap.parse_args(argv)
    try:
        d = gaps(scores(*parse_run(a.run)), scores(*parse_run(a.base)))
        s = summary(d, a.below, a.group)
    except ValueError as e:
        sys.exit(f"language_gaps: {e}")
    print(f"{a.run} − {a.base}: {s['mean']:+.2f} over {s['languages']} languages "
          f"({s['gained']} gain, {s['lost']} lose)")
    listed = ", ".join(f"{lang} {v:+.1f}" for lang, v in s["below"]) or "none"
    print(f"more than {a.below:g} below: {len(s['below'])} ({listed}); their share {s['below_share']:+.2f}")
    if a.group:
        print(f"--group: share {s['group_share']:+.2f}; the other languages {s['others_mean']:+.2f} on average")


if __name__ == "__main__":
    main()
