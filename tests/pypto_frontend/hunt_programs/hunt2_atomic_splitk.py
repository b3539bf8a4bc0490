"""split-K fanned over pl.spmd blocks, as hc_head's linear is: each of 4 blocks multiplies its K slice of INT8
activations and INT8 weights (b_trans, out_dtype=INT32) and adds its [T, N] partial into one INT32 tensor
created with init_value=0 by pl.assemble(..., atomic=pl.AtomicType.Add) (integer atomics: exact in any order);
a pl.at task with deps= on the fan dequantises by per-row and per-column scales (row_expand_mul / col_expand_mul,
the scales sliced out of one [2, 64] tensor, the per-row column transposed out of a row) into FP32, and in a
second pl.at task a pl.range accumulates three FP32 bias rows with atomic assembles (one task: a fixed order);
a third task sums column slabs of the INT32 accumulator with atomic adds into a [T, 16] slab (INT32 wrap)."""
import numpy as np
import pypto.language as pl

T = 16
K = 128
KS = 4
KC = K // KS
N = 64


@pl.jit
def splitk(x: pl.Tensor[[T, K], pl.INT8], w: pl.Tensor[[N, K], pl.INT8], sc: pl.Tensor[[2, 64], pl.FP32],
           bias: pl.Tensor[[3, N], pl.FP32], y: pl.Out[pl.Tensor[[T, N], pl.FP32]],
           slab: pl.Out[pl.Tensor[[T, 16], pl.INT32]]):
    acc = pl.create_tensor([T, N], dtype=pl.INT32, init_value=0)
    with pl.spmd(KS, name_hint="splitk") as mm_tid:
        kb = pl.tile.get_block_idx()
        k0 = kb * KC
        part = pl.matmul(x[:, k0:k0 + KC], w[:, k0:k0 + KC], b_trans=True, out_dtype=pl.INT32)
        acc = pl.assemble(acc, part, [0, 0], atomic=pl.AtomicType.Add)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dequant", deps=[mm_tid]) as dq_tid:
        f = pl.cast(acc[:, :], target_type=pl.FP32, mode="none")
        rs = pl.transpose(sc[0:1, 0:T], 0, 1)
        cs = sc[1:2, 0:N]
        y[:, :] = pl.col_expand_mul(pl.row_expand_mul(f, rs), cs)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="bias", deps=[dq_tid]):
        for bi in pl.range(3):
            brow = pl.col_expand(pl.full([T, N], dtype=pl.FP32, value=0.0), bias[bi:bi + 1, :])
            y = pl.assemble(y, brow, [0, 0], atomic=pl.AtomicType.Add)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="slab"):
        for sb in pl.range(N // 16):
            slab = pl.assemble(slab, pl.mul(acc[:, sb * 16:sb * 16 + 16], 70000), [0, 0], atomic=pl.AtomicType.Add)
    return y


def test_atomic_split_k_int8():
    rng = np.random.default_rng(28)
    x = rng.integers(-128, 128, (T, K)).astype(np.int8)
    w = rng.integers(-128, 128, (N, K)).astype(np.int8)
    sc = (rng.random((2, 64)) * 0.01 + 0.001).astype(np.float32)
    bias = rng.standard_normal((3, N)).astype(np.float32)
    y = np.zeros((T, N), np.float32)
    slab = np.full((T, 16), 5, np.int32)
    splitk(x, w, sc, bias, y, slab)
    acc = x.astype(np.int64) @ w.astype(np.int64).T
    f = (acc.astype(np.float32) * sc[0, :T].reshape(T, 1)).astype(np.float32) * sc[1, :N]
    want = f.astype(np.float32)
    for bi in range(3):
        want = (want + bias[bi]).astype(np.float32)
    np.testing.assert_array_equal(y, want)
    s = 5 + sum((acc[:, i * 16:(i + 1) * 16] * 70000).astype(np.int64) for i in range(N // 16))
    np.testing.assert_array_equal(slab, ((s + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32))
