"""A keep mask's tile classes (triton/keep_tiles.py) against their torch reference: the classes, each query
block's range of key tiles and each key tile's range of query blocks, for the masks the toolkits pass.

Runs on CUDA; without CUDA in the Triton interpreter (TRITON_INTERPRET=1, on the CPU) in a subprocess.
"""
import pytest
import torch

triton = pytest.importorskip("triton")
from triton_interpreter import DEV, ON_KERNEL, run_in_interpreter  # noqa: E402

if ON_KERNEL:
    from onmt_entmax.ops.triton import keep_tiles as KT  # noqa: E402

B, TQ, TK = 2, 70, 150


@pytest.mark.skipif(ON_KERNEL, reason="the tests below run on the kernels directly")
def test_keep_tiles_in_the_triton_interpreter():
    run_in_interpreter(__file__, timeout=600)


def _mask(name: str) -> torch.Tensor:
    """pad: key padding (B, 1, 1, Tk), the last entry's keys from 100 masked (two whole tiles of 32 and a part);
    pad-full: that as a (B, 1, Tq, Tk) tensor; causal-full: with the causal mask; dead: causal-full with one row
    (of the last entry) that keeps no key; all-masked: an entry whose every key is masked; random: one mask a
    query; heads: key padding a head (B, 3, 1, Tk); shared: one (Tq, Tk) causal mask for every entry."""
    g = torch.Generator().manual_seed(0)
    pad = torch.ones(B, 1, 1, TK, dtype=torch.bool)
    pad[-1, ..., 100:] = False
    causal = (pad & torch.ones(TQ, TK, dtype=torch.bool).tril()).contiguous()
    if name == "pad":
        return pad
    if name == "pad-full":
        return pad.expand(B, 1, TQ, TK).contiguous()
    if name == "causal-full":
        return causal
    if name == "dead":
        causal[-1, 0, 40] = False
        return causal
    if name == "all-masked":
        pad[0] = False
        return pad
    if name == "random":
        return torch.rand(B, 1, TQ, TK, generator=g) > 0.5
    if name == "heads":
        return torch.rand(B, 3, 1, TK, generator=g) > 0.2
    return torch.ones(TQ, TK, dtype=torch.bool).tril()


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("mask", ["pad", "pad-full", "causal-full", "dead", "all-masked", "random", "heads",
                                  "shared"])
@pytest.mark.parametrize("r,causal", [(1, False), (2, False), (1, True)])
def test_tile_classes_and_ranges_match_the_reference(mask, r, causal):
    """Each (query block, key tile) EMPTY, FULL or MIXED as the mask's entries there (rows < Tq, keys < Tk) say,
    MIXED throughout a block with a row that keeps no key (also by the causal mask, with is_causal), the ranges
    of tiles and blocks that are not EMPTY, on backward tiles of one or two forward tiles."""
    keep = _mask(mask)
    tiles = KT.KeepTiles(keep.to(DEV), TQ, TK, 32, 32, r, causal)
    for got, want, name in zip(tiles.tensors, KT.reference(keep, TQ, TK, 32, 32, r, causal), ("cls", "jr", "qr")):
        assert torch.equal(got.cpu(), want), (name, got, want)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_the_classes_of_a_decoder_mask():
    """The decoder's causal and padding mask: tiles below the diagonal FULL, on it MIXED, after it EMPTY (not
    swept), and the padded entry's tiles past its last key EMPTY; a block with a row that keeps no key MIXED
    throughout, sweeping every tile."""
    keep = _mask("dead")
    cls, jr, qr = (x.cpu() for x in KT.KeepTiles(keep.to(DEV), TQ, TK, 32, 32, 1).tensors)
    first, last = cls.view(B, 3, 5)
    assert first.tolist() == [[2, 0, 0, 0, 0], [1, 2, 0, 0, 0], [1, 1, 2, 0, 0]]
    assert last.tolist() == [[2, 0, 0, 0, 0], [2, 2, 2, 2, 2], [1, 1, 2, 0, 0]]
    # (jlo, f0, f1, jhi): the tiles swept, and the run of FULL ones among them (swept without the mask)
    assert jr.view(B, 3, 4).tolist() == [[[0, 0, 0, 1], [0, 0, 1, 2], [0, 0, 2, 3]],
                                         [[0, 0, 0, 1], [0, 0, 0, 5], [0, 0, 2, 3]]]
    # (qlo, g0, g1, qhi) of each key tile over the query blocks: tile 0 FULL from block 1 on (block 1 too in the
    # first entry), tiles 3 and 4 swept only by the last entry's block with the row that keeps no key
    assert qr[0].tolist() == [[0, 1, 3, 3], [1, 2, 3, 3], [2, 2, 2, 3], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert qr[1].tolist() == [[0, 2, 3, 3], [1, 2, 3, 3], [1, 1, 1, 3], [1, 1, 1, 2], [1, 1, 1, 2]]
