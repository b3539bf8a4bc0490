"""P17: jit scalar arguments in compute: a float eps and scale, an int trip count and an int offset
specialised into the program; passed down to an incore kernel; used in tile-scalar ops, pl.range bounds and
slice offsets; a bool flag choosing a branch at translation."""
import numpy as np
import pypto.language as pl

R = 16
C = 32


@pl.jit.incore
def kern(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]], eps: pl.Scalar[pl.FP32],
         scale: pl.Scalar[pl.FP32], n: pl.Scalar[pl.INT32], off: pl.Scalar[pl.INDEX], flag: pl.Scalar[pl.BOOL]):
    t = pl.load(x, [0, 0], [R, C])
    for _i, (acc,) in pl.range(n, init_values=(t,)):
        nxt = pl.yield_(pl.add(pl.mul(acc, scale), eps))
    if flag:
        nxt = pl.neg(nxt)
    pl.store(nxt, [0, 0], y)
    row = pl.load(x, [off, 0], [1, C])
    pl.store(pl.mul(row, 0.0), [off, 0], y)
    return y


@pl.jit
def entry(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]], eps: pl.Scalar[pl.FP32],
          scale: pl.Scalar[pl.FP32], n: pl.Scalar[pl.INT32], off: pl.Scalar[pl.INDEX], flag: pl.Scalar[pl.BOOL]):
    return kern(x, y, eps, scale, n, off, flag)


def test_specialised_scalars():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((R, C)).astype(np.float32)
    for eps, scale, n, off, flag in [(0.5, 0.9, 3, 5, True), (1e-3, 1.5, 0, 15, False), (0.25, -1.0, 4, 0, False)]:
        y = np.zeros((R, C), np.float32)
        entry(x, y, eps, scale, n, off, flag)
        want = x.copy()
        for _ in range(n):
            want = want * np.float32(scale) + np.float32(eps)
        if flag:
            want = -want
        want[off] = 0.0
        np.testing.assert_allclose(y, want, atol=1e-6)
