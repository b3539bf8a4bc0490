"""reductions over ragged boxes in a kernel: a [16, 64] tile loaded with valid_shape [11, 45] (run-time
extents read from a tensor), fillpad with PadValue.min / max / zero before row_max / row_min / row_sum and
col_max / col_sum (tmp tiles by keyword), row_argmax and col_argmin of the padded tile (INT32 indices, ties to
the lowest), INT32 and FP16 row reductions, a row_prod, and col_expand_max / row_expand_min of the results;
the padded cells' values are part of the outputs, so the pad values themselves are checked."""
import numpy as np
import pypto.language as pl

R, C = 16, 64


@pl.jit.incore
def red(x: pl.Tensor[[R, C], pl.FP32], xi: pl.Tensor[[R, C], pl.INT32], xh: pl.Tensor[[R, C], pl.FP16],
        ext: pl.Tensor[[1, 8], pl.INT32], rows: pl.Out[pl.Tensor[[R, 8], pl.FP32]],
        cols: pl.Out[pl.Tensor[[4, C], pl.FP32]], idx: pl.Out[pl.Tensor[[2, C], pl.INT32]],
        ex: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    vr = pl.cast(pl.read(ext, [0, 0]), pl.INDEX)
    vc = pl.cast(pl.read(ext, [0, 1]), pl.INDEX)
    t = pl.load(x, [0, 0], [R, C], valid_shapes=[vr, vc])
    tmp = pl.create_tile([R, C], pl.FP32)
    lo = pl.fillpad(t, pad_value=pl.PadValue.min)
    hi = pl.fillpad(t, pad_value=pl.PadValue.max)
    zr = pl.fillpad(t, pad_value=pl.PadValue.zero)
    r = pl.create_tile([R, 8], pl.FP32)
    r = pl.assemble(r, pl.row_max(lo, tmp_tile=tmp), [0, 0])
    r = pl.assemble(r, pl.row_min(hi, tmp_tile=tmp), [0, 1])
    r = pl.assemble(r, pl.row_sum(zr, tmp_tile=tmp), [0, 2])
    r = pl.assemble(r, pl.cast(pl.row_max(pl.load(xi, [0, 0], [R, C]), pl.create_tile([R, C], pl.INT32)),
                               pl.FP32), [0, 3])
    r = pl.assemble(r, pl.cast(pl.row_sum(pl.load(xh, [0, 0], [R, C]), pl.create_tile([R, C], pl.FP16)),
                               pl.FP32), [0, 4])
    small = pl.add(pl.mul(zr, 0.01), 1.0)
    r = pl.assemble(r, pl.row_prod(small, tmp), [0, 5])
    r = pl.assemble(r, pl.cast(pl.row_argmax(lo, tmp), pl.FP32, mode="none"), [0, 6])
    r = pl.assemble(r, pl.tile.full([R, 1], pl.FP32, 0.0), [0, 7])
    rows = pl.store(r, [0, 0], rows)
    c = pl.create_tile([4, C], pl.FP32)
    c = pl.assemble(c, pl.col_max(lo), [0, 0])
    c = pl.assemble(c, pl.col_sum(zr), [1, 0])
    c = pl.assemble(c, pl.col_sum(zr, tmp_tile=tmp), [2, 0])
    c = pl.assemble(c, pl.col_min(hi), [3, 0])
    cols = pl.store(c, [0, 0], cols)
    i = pl.create_tile([2, C], pl.INT32)
    i = pl.assemble(i, pl.col_argmin(hi, tmp), [0, 0])
    i = pl.assemble(i, pl.col_argmax(zr, tmp), [1, 0])
    idx = pl.store(i, [0, 0], idx)
    e = pl.col_expand_max(pl.row_expand_min(zr, pl.row_max(lo, tmp)), pl.col_min(hi))
    ex = pl.store(e, [0, 0], ex)
    return ex


@pl.jit
def orch(x: pl.Tensor[[R, C], pl.FP32], xi: pl.Tensor[[R, C], pl.INT32], xh: pl.Tensor[[R, C], pl.FP16],
         ext: pl.Tensor[[1, 8], pl.INT32], rows: pl.Out[pl.Tensor[[R, 8], pl.FP32]],
         cols: pl.Out[pl.Tensor[[4, C], pl.FP32]], idx: pl.Out[pl.Tensor[[2, C], pl.INT32]],
         ex: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    return red(x, xi, xh, ext, rows, cols, idx, ex)


def test_reductions_over_padded_boxes():
    rng = np.random.default_rng(59)
    f = np.float32
    vr, vc = 11, 45
    x = rng.integers(-50, 50, (R, C)).astype(f) / 4
    xi = rng.integers(-2 ** 20, 2 ** 20, (R, C)).astype(np.int32)
    xh = (rng.integers(-64, 64, (R, C)) / 8).astype(np.float16)
    ext = np.array([[vr, vc, 0, 0, 0, 0, 0, 0]], np.int32)
    rows, cols = np.zeros((R, 8), f), np.zeros((4, C), f)
    idx, ex = np.zeros((2, C), np.int32), np.zeros((R, C), f)
    orch(x, xi, xh, ext, rows, cols, idx, ex)
    big = np.inf  # the device pads FP32 with +-inf
    lo, hi, zr = (np.full((R, C), v, f) for v in (-big, big, 0.0))
    for a in (lo, hi, zr):
        a[:vr, :vc] = x[:vr, :vc]
    np.testing.assert_array_equal(rows[:, 0], lo.max(1))
    np.testing.assert_array_equal(rows[:, 1], hi.min(1))
    np.testing.assert_array_equal(rows[:, 2], zr.sum(1))
    np.testing.assert_array_equal(rows[:, 3], xi.max(1).astype(f))
    np.testing.assert_array_equal(rows[:, 4], xh.astype(f).sum(1))
    np.testing.assert_allclose(rows[:, 5], (zr.astype(np.float64) * 0.01 + 1).prod(1), rtol=1e-5)
    np.testing.assert_array_equal(rows[:, 6], lo.argmax(1).astype(f))
    np.testing.assert_array_equal(cols, np.stack([lo.max(0), zr.sum(0), zr.sum(0), hi.min(0)]))
    np.testing.assert_array_equal(idx, np.stack([hi.argmin(0), zr.argmax(0)]).astype(np.int32))
    np.testing.assert_array_equal(ex, np.maximum(np.minimum(zr, lo.max(1, keepdims=True)), hi.min(0, keepdims=True)))
