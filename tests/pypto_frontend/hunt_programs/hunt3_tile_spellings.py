"""pypto's tile-module spellings and keyword arguments in one kernel: pl.tile.subs (was refused as an unknown
name), pl.tile.adds / muls / divs, pl.tile.batch_matmul then pl.tile.batch_matmul_acc on Left / Right tiles moved
from 3-D Mat loads (was refused too), pl.tile.row_sum / row_max with tmp_tile= by keyword, pl.row_expand_sub
by position, pl.cast(input=..., target_type=..., mode=...) and pl.slice(input=..., shape=..., offset=...) by
keyword, pl.tile.exp / log / rsqrt(tmp=) on tiles."""
import numpy as np
import pypto.language as pl

M, N, B = 16, 32, 2


@pl.jit.incore
def kern(x: pl.Tensor[[M, N], pl.FP32], a3: pl.Tensor[[B, 16, 16], pl.FP32], b3: pl.Tensor[[B, 16, 16], pl.FP32],
         o1: pl.Out[pl.Tensor[[M, N], pl.FP32]], o2: pl.Out[pl.Tensor[[B, 16, 16], pl.FP32]],
         o3: pl.Out[pl.Tensor[[M, N], pl.INT32]], o4: pl.Out[pl.Tensor[[M, N], pl.FP32]]):
    t = pl.tile.load(x, [0, 0], [M, N])
    s = pl.tile.divs(pl.tile.muls(pl.tile.adds(pl.tile.subs(t, 1.5), 0.25), 3.0), 2.0)
    tmp = pl.tile.create([M, N], pl.FP32)
    rs = pl.tile.row_sum(s, tmp_tile=tmp)
    rm = pl.tile.row_max(tile=s, tmp_tile=tmp)
    o1 = pl.store(pl.row_expand_sub(pl.row_expand_add(s, rs), rm), [0, 0], o1)
    a = pl.load(a3, [0, 0, 0], [B, 16, 16], target_memory=pl.MemorySpace.Mat)
    b = pl.load(b3, [0, 0, 0], [B, 16, 16], target_memory=pl.MemorySpace.Mat)
    al = pl.move(a, target_memory=pl.MemorySpace.Left)
    br = pl.move(b, target_memory=pl.MemorySpace.Right)
    c = pl.tile.batch_matmul(al, br)
    c = pl.tile.batch_matmul_acc(c, al, br)
    o2 = pl.store(c, [0, 0, 0], o2)
    o3 = pl.store(pl.cast(input=pl.mul(t, 7.0), target_type=pl.INT32, mode="floor"), [0, 0], o3)
    pos = pl.tile.adds(pl.tile.abs(t), 0.5)
    half = pl.slice(input=pos, shape=[M, N // 2], offset=[0, 0])
    other = pl.slice(pos, [M, N // 2], [0, N // 2])
    o4 = pl.store(pl.tile.log(pl.tile.exp(half)), [0, 0], o4)
    o4 = pl.store(pl.tile.rsqrt(other, tmp=pl.tile.create([M, N // 2], pl.FP32)), [0, N // 2], o4)
    return o4


@pl.jit
def orch(x: pl.Tensor[[M, N], pl.FP32], a3: pl.Tensor[[B, 16, 16], pl.FP32], b3: pl.Tensor[[B, 16, 16], pl.FP32],
         o1: pl.Out[pl.Tensor[[M, N], pl.FP32]], o2: pl.Out[pl.Tensor[[B, 16, 16], pl.FP32]],
         o3: pl.Out[pl.Tensor[[M, N], pl.INT32]], o4: pl.Out[pl.Tensor[[M, N], pl.FP32]]):
    return kern(x, a3, b3, o1, o2, o3, o4)


def test_tile_spellings():
    rng = np.random.default_rng(31)
    f = np.float32
    x = rng.standard_normal((M, N)).astype(f)
    a3 = rng.integers(-4, 5, (B, 16, 16)).astype(f)
    b3 = rng.integers(-4, 5, (B, 16, 16)).astype(f)
    outs = [np.zeros((M, N), f), np.zeros((B, 16, 16), f), np.zeros((M, N), np.int32), np.zeros((M, N), f)]
    orch(x, a3, b3, *outs)
    s = (((x - f(1.5)) + f(0.25)) * f(3.0)) / f(2.0)
    np.testing.assert_allclose(outs[0], s + s.sum(1, keepdims=True) - s.max(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[1], 2 * (a3 @ b3))
    np.testing.assert_array_equal(outs[2], np.floor(x * f(7.0)).astype(np.int32))
    pos = np.abs(x) + f(0.5)
    np.testing.assert_allclose(outs[3][:, :N // 2], pos[:, :N // 2], rtol=1e-5)
    np.testing.assert_allclose(outs[3][:, N // 2:], 1 / np.sqrt(pos[:, N // 2:]), rtol=1e-6)
