"""a kernel hands each row it slices from a tensor to an inline helper whose parameter is a pl.Tensor (pypto
inlines the call before it makes tensor slices tiles): per lane, rows of router scores are sorted by the helper
(sort32, a merge, the leading ids) and scaled, one row at a time, into a per-lane tile stored whole."""
import numpy as np
import pypto.language as pl

T = 4
W = 64
K = 8
TILE = 2


@pl.jit.inline
def top_ids(row: pl.Tensor[[1, W], pl.FP32]) -> pl.Tensor[[1, K], pl.INT32]:
    idx = pl.arange(0, [1, W], dtype=pl.UINT32)
    pairs = pl.sort32(row, idx)
    pairs = pl.mrgsort(pairs, block_len=64)
    ids = pl.gather(pairs, mask_pattern=pl.tile.MaskPattern.P1010, output_dtype=pl.INT32)
    return ids[:, 0:K]


@pl.jit.inline
def doubled(row: pl.Tensor[[1, W], pl.FP32]) -> pl.Tensor[[1, W], pl.FP32]:
    return pl.mul(row, 2.0)


@pl.jit
def route(scores: pl.Tensor[[T, W], pl.FP32], ids: pl.Out[pl.Tensor[[T, K], pl.INT32]],
          twice: pl.Out[pl.Tensor[[T, W], pl.FP32]]):
    for lane in pl.spmd(T // TILE, name_hint="rows"):
        t0 = lane * TILE
        got = pl.create_tensor([TILE, K], dtype=pl.INT32)
        for r in pl.range(TILE):
            row = pl.slice(scores, [1, W], [t0 + r, 0])
            got[r:r + 1, :] = top_ids(row)
            twice[t0 + r:t0 + r + 1, :] = doubled(row)
        ids[t0:t0 + TILE, :] = got
    return ids, twice


def test_rows_sliced_in_a_kernel_go_to_an_inline_tensor_parameter():
    rng = np.random.default_rng(3)
    scores = rng.permutation(T * W).reshape(T, W).astype(np.float32) / 7.0  # distinct: one order
    ids = np.zeros((T, K), np.int32)
    twice = np.zeros((T, W), np.float32)
    route(scores, ids, twice)
    np.testing.assert_array_equal(ids, np.argsort(-scores, axis=1, kind="stable")[:, :K].astype(np.int32))
    np.testing.assert_array_equal(twice, scores * 2)
