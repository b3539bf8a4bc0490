"""nested loops and scalars: an orchestration pl.parallel fan over 4 row blocks, each a pl.at task whose
nested pl.range loops carry a tile and two scalars by re-binding (no init_values: an INDEX counter and an FP32
running max read back from the tile with pl.tile.read); a kernel's scalars: `//` and `%` of a
positive INT32 read (a negative operand is reported by pldemu's truncation check: the device's arith.divsi /
remsi truncate where pypto's IR floors), pl.min / pl.max of the results, an FP32 read
cast to INT32 (truncates), used as a run-time slice offset; and pl.sin / pl.cos of a tile scaled by that
scalar's FP32 cast."""
import math

import numpy as np
import pypto.language as pl

R, C = 8, 32


@pl.jit.incore
def scal(x: pl.Tensor[[R, C], pl.FP32], iv: pl.Tensor[[1, 8], pl.INT32], fv: pl.Tensor[[1, 8], pl.FP32],
         out: pl.Out[pl.Tensor[[1, 8], pl.INT32]], trig: pl.Out[pl.Tensor[[2, C], pl.FP32]]):
    a = pl.read(iv, [0, 0])
    b = pl.read(iv, [0, 1])
    q = a // b
    r = a % b
    lo = pl.min(q, r)
    hi = pl.max(q, r)
    fi = pl.cast(pl.read(fv, [0, 0]), pl.INT32)
    t = pl.tile.full([1, 8], pl.INT32, 0)
    pl.tile.write(t, [0, 0], q)
    pl.tile.write(t, [0, 1], r)
    pl.tile.write(t, [0, 2], lo)
    pl.tile.write(t, [0, 3], hi)
    pl.tile.write(t, [0, 4], fi)
    out = pl.store(t, [0, 0], out)
    row = pl.load(x, [pl.cast(fi, pl.INDEX), 0], [1, C])
    sc = pl.mul(row, pl.cast(fi, pl.FP32))
    trig = pl.store(pl.sin(sc), [0, 0], trig)
    trig = pl.store(pl.cos(sc), [1, 0], trig)
    return trig


@pl.jit
def orch(x: pl.Tensor[[4 * R, C], pl.FP32], iv: pl.Tensor[[1, 8], pl.INT32], fv: pl.Tensor[[1, 8], pl.FP32],
         y: pl.Out[pl.Tensor[[4 * R, C], pl.FP32]], st: pl.Out[pl.Tensor[[4, 8], pl.FP32]],
         out: pl.Out[pl.Tensor[[1, 8], pl.INT32]], trig: pl.Out[pl.Tensor[[2, C], pl.FP32]]):
    for blk in pl.parallel(4):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="blk"):
            acc = pl.tile.full([R, C], pl.FP32, 0.0)
            n = 0
            best = pl.const(-1e30, pl.FP32)
            for i in pl.range(3):
                for _j in pl.range(i + 1):
                    acc = pl.add(acc, pl.mul(x[blk * R:blk * R + R, :], 0.5))
                    n = n + 1
                best = pl.max(best, pl.tile.read(acc, [0, 0]))
            y[blk * R:blk * R + R, :] = acc
            s = pl.tile.full([1, 8], pl.FP32, 0.0)
            pl.tile.write(s, [0, 0], best)
            pl.tile.write(s, [0, 1], pl.cast(pl.cast(n, pl.INT32), pl.FP32))
            st[blk:blk + 1, :] = s
    trig = scal(x, iv, fv, out, trig)
    return y


def test_loops_and_scalars():
    rng = np.random.default_rng(67)
    x = rng.standard_normal((4 * R, C)).astype(np.float32)
    iv = np.array([[17, 5, 0, 0, 0, 0, 0, 0]], np.int32)
    fv = np.array([[-3.7 + 6.0, 0, 0, 0, 0, 0, 0, 0]], np.float32)  # 2.3 -> 2
    y, st = np.zeros_like(x), np.zeros((4, 8), np.float32)
    out, trig = np.zeros((1, 8), np.int32), np.zeros((2, C), np.float32)
    orch(x, iv, fv, y, st, out, trig)
    half = x * np.float32(0.5)
    wy = np.zeros_like(x)
    for blk in range(4):
        acc = np.zeros((R, C), np.float32)
        best = np.float32(-1e30)
        for i in range(3):
            for _ in range(i + 1):
                acc = acc + half[blk * R:blk * R + R]
            best = max(best, acc[0, 0])
        wy[blk * R:blk * R + R] = acc
        np.testing.assert_array_equal(st[blk, :2], [best, 6.0])
    np.testing.assert_array_equal(y, wy)
    q, r = 17 // 5, 17 % 5
    np.testing.assert_array_equal(out[0, :5], [q, r, min(q, r), max(q, r), 2])
    sc = x[2].astype(np.float64) * 2
    np.testing.assert_allclose(trig[0], np.sin(sc), atol=2e-5)
    np.testing.assert_allclose(trig[1], np.cos(sc), atol=2e-5)
    assert math.isfinite(float(trig.sum()))
