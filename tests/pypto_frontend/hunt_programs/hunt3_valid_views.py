"""orchestration-level slices with valid_shape= handed to inline helpers: a [8, N] window of 5 valid rows is a
view carrying its valid shape, so the helper's pl.load of it reads 5 rows (column sums of the zero-padded tile
count only them; a store of the doubled tile writes only them), a slice of that view (a view of it made outside
the kernel, a subscript loaded in it) keeps the part of the valid box under it (3 rows, 1 row), and a loop's ragged tail, valid_shape=[ROWS - r0, N]
at a run-time r0, reads and writes only the rows the tensor has (through an output view of the same valid
shape)."""
import numpy as np
import pypto.language as pl

R, N, ROWS = 8, 32, 12


@pl.jit.inline
def padded_sums(v: pl.Tensor, sums: pl.Tensor, twice: pl.Tensor):
    inner = pl.slice(v, [4, N], [2, 0])  # a view of the view: its valid rows 2..4, 3 of 4
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="sums"):
        t = pl.load(v, [0, 0], [R, N])
        sums[0:1, :] = pl.col_sum(pl.fillpad(t, pad_value=pl.PadValue.zero))
        sums[1:2, :] = pl.col_sum(pl.fillpad(pl.load(inner, [0, 0], [4, N]), pad_value=pl.PadValue.zero))
        last = v[4:8, :]  # loaded in the kernel: valid row 4 of v only
        sums[2:3, :] = pl.col_sum(pl.fillpad(last, pad_value=pl.PadValue.zero))
        pl.store(pl.mul(t, 2.0), [0, 0], twice)
    return sums


@pl.jit.inline
def scaled_tail(src: pl.Tensor, dst: pl.Tensor):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tail"):
        t = pl.load(src, [0, 0], [R, N])
        pl.store(pl.add(t, 1.0), [0, 0], dst)
    return dst


@pl.jit
def valid_views(x: pl.Tensor[[16, N], pl.FP32], sums: pl.Out[pl.Tensor[[3, N], pl.FP32]],
                twice: pl.Out[pl.Tensor[[R, N], pl.FP32]], y: pl.Tensor[[ROWS, N], pl.FP32],
                z: pl.Out[pl.Tensor[[ROWS, N], pl.FP32]]):
    v = pl.slice(x, [R, N], [4, 0], valid_shape=[5, N])
    sums = padded_sums(v, sums, twice)
    for r0 in pl.range(0, ROWS, R):
        left = ROWS - r0
        src = pl.slice(y, [R, N], [r0, 0], valid_shape=[pl.min(left, R), N])
        dst = pl.slice(z, [R, N], [r0, 0], valid_shape=[pl.min(left, R), N])
        dst = scaled_tail(src, dst)
    return sums


def test_valid_views():
    rng = np.random.default_rng(29)
    x = rng.standard_normal((16, N)).astype(np.float32)
    y = rng.standard_normal((ROWS, N)).astype(np.float32)
    sums, twice = np.zeros((3, N), np.float32), np.full((R, N), -1.0, np.float32)
    z = np.full((ROWS, N), 7.0, np.float32)
    valid_views(x, sums, twice, y, z)
    np.testing.assert_allclose(sums[0], x[4:9].sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sums[1], x[6:9].sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(sums[2], x[8])
    want = np.full((R, N), -1.0, np.float32)
    want[:5] = 2 * x[4:9]
    np.testing.assert_array_equal(twice, want)
    np.testing.assert_array_equal(z, y + 1)
