"""batch_overlap.py: how much of a batch recurs between buckets of OpenNMT-py 3.5.1's iterator."""
import statistics

from pipeline_helpers import load_script

bo = load_script("scripts/reproduce/batch_overlap.py")


def _corpus(n):
    src = [" ".join(["x"] * (1 + i % 7)) + f" w{i}" for i in range(n)]  # distinct sources, 7 lengths
    return src, [f"t{i}" for i in range(n)]


def test_a_bucket_of_exactly_one_pass_gives_the_same_batches_every_pass():
    src, tgt = _corpus(640)
    first, second = bo.buckets(src, tgt, 2, bucket_size=640, batch_size=64)
    assert sorted(map(sorted, first)) == sorted(map(sorted, second))
    assert bo.largest_overlaps(first, second) == [1.0] * len(second)


def test_batches_never_repeat_a_source_and_a_line_comes_back_once_a_pass():
    src, tgt = _corpus(300)
    (batches,) = bo.buckets(src, tgt, 1, bucket_size=750, batch_size=64)  # 2.5 passes in one bucket
    assert all(len({src[i] for i in b}) == len(b) == 64 for b in batches)
    uses = [sum(i in b for b in batches) for i in range(300)]
    assert max(uses) <= 3 and sum(uses) == 64 * len(batches)


def test_shuffle_each_pass_breaks_the_recurring_batches():
    """The replay of the plugin's option: the same single-pass bucket, now cut into other batches."""
    src = [" ".join(["x"] * (1 + i % 2)) + f" w{i}" for i in range(640)]  # two lengths: 5 batches each
    tgt = [f"t{i}" for i in range(640)]
    first, second = bo.buckets(src, tgt, 2, bucket_size=640, batch_size=64, seed="1")
    assert sorted(map(sorted, first)) != sorted(map(sorted, second))
    assert statistics.median(bo.largest_overlaps(first, second)) < 0.5  # 1.0 without: every batch again
    assert sorted(i for b in second for i in b) == list(range(640))  # still every line once a pass
