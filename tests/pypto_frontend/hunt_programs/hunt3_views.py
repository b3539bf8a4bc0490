"""views inside a loop: a pl.range over 4 column blocks at run-time offsets takes each [16, 8] slice of a
tensor, transposes it (pl.transpose of a tensor slice) and assembles it as rows of the output; a reshape of a
[16, 32] slice to [32, 16] then to [8, 64]; pl.concat of two tensor slices and of a tile with a transposed
tile; and a row block picked by a run-time index read from a tensor, scaled and written back with
subscript assignment at that index."""
import numpy as np
import pypto.language as pl

R, C = 16, 32


@pl.jit
def views(x: pl.Tensor[[R, C], pl.FP32], sel: pl.Tensor[[1, 8], pl.INT32],
          tr: pl.Out[pl.Tensor[[C, R], pl.FP32]], rs: pl.Out[pl.Tensor[[8, 64], pl.FP32]],
          cc: pl.Out[pl.Tensor[[R, 2 * C], pl.FP32]], sq: pl.Out[pl.Tensor[[R, 2 * R], pl.FP32]],
          pick: pl.InOut[pl.Tensor[[R, C], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="views"):
        for cb in pl.range(4):
            blk = x[:, cb * 8:cb * 8 + 8]
            tr[cb * 8:cb * 8 + 8, :] = pl.transpose(blk, 0, 1)
        rs[:, :] = pl.reshape(pl.reshape(x[:, :], [2 * R, R]), [8, 64])
        cc[:, :] = pl.concat(pl.mul(x[:, 0:C], 2.0), x[:, :])
        left = pl.load(x, [0, 0], [R, R])
        sq[:, :] = pl.concat(left, pl.transpose(pl.load(x, [0, R], [R, R]), 0, 1))
        r = pl.cast(pl.read(sel, [0, 0]), pl.INDEX)
        pick[r:r + 2, :] = pl.mul(x[r:r + 2, :], -1.0)
    return tr


def test_views_in_loops():
    rng = np.random.default_rng(71)
    x = rng.standard_normal((R, C)).astype(np.float32)
    sel = np.array([[5, 0, 0, 0, 0, 0, 0, 0]], np.int32)
    tr, rs = np.zeros((C, R), np.float32), np.zeros((8, 64), np.float32)
    cc, sq, pick = np.zeros((R, 2 * C), np.float32), np.zeros((R, 2 * R), np.float32), np.full((R, C), 3.0, np.float32)
    views(x, sel, tr, rs, cc, sq, pick)
    np.testing.assert_array_equal(tr, x.T)
    np.testing.assert_array_equal(rs, x.reshape(8, 64))
    np.testing.assert_array_equal(cc, np.concatenate([x * 2, x], 1))
    np.testing.assert_array_equal(sq, np.concatenate([x[:, :R], x[:, R:].T], 1))
    want = np.full((R, C), 3.0, np.float32)
    want[5:7] = -x[5:7]
    np.testing.assert_array_equal(pick, want)
