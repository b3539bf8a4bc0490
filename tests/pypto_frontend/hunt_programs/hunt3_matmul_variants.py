"""matmul variants at the tensor level in pl.at tasks: FP16 operands with a_trans and b_trans together, a
split-K chain whose matmul_acc steps take b_trans (K chunks of 16 from tensor slices), pl.matmul(...,
out_dtype=pl.BF16) assembled into a BF16 tensor (pypto's conversion drops out_dtype: the FP32 accumulator is
rounded once on the way out, rint), INT8 x INT8 with out_dtype=INT32 and a_trans, a 3-D x 3-D batched product
with b_trans, and a [1, K] row times a [K, N] matrix (gemv shape); all checked against exact float64 /
int64 products rounded once."""
import ml_dtypes
import numpy as np
import pypto.language as pl

M, K, N = 16, 48, 32


@pl.jit
def mm(a16: pl.Tensor[[K, M], pl.FP16], b16: pl.Tensor[[N, K], pl.FP16], x: pl.Tensor[[M, K], pl.BF16],
       w: pl.Tensor[[N, K], pl.BF16], i8a: pl.Tensor[[K, 2 * M], pl.INT8], i8b: pl.Tensor[[K, N], pl.INT8],
       q3: pl.Tensor[[2, M, 16], pl.FP32], k3: pl.Tensor[[2, N, 16], pl.FP32], row: pl.Tensor[[1, K], pl.FP32],
       wm: pl.Tensor[[K, N], pl.FP32],
       o1: pl.Out[pl.Tensor[[M, N], pl.FP32]], o2: pl.Out[pl.Tensor[[M, N], pl.FP32]],
       o3: pl.Out[pl.Tensor[[M, N], pl.BF16]], o4: pl.Out[pl.Tensor[[2 * M, N], pl.INT32]],
       o5: pl.Out[pl.Tensor[[2, M, N], pl.FP32]], o6: pl.Out[pl.Tensor[[1, N], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="mm"):
        o1[:, :] = pl.matmul(a16, b16, a_trans=True, b_trans=True, out_dtype=pl.FP32)
        acc = pl.matmul(x[:, 0:16], w[:, 0:16], b_trans=True, out_dtype=pl.FP32)
        for kb in pl.range(1, K // 16):
            acc = pl.matmul_acc(acc, x[:, kb * 16:kb * 16 + 16], w[:, kb * 16:kb * 16 + 16], b_trans=True)
        o2[:, :] = acc
        o3[:, :] = pl.matmul(x, w, b_trans=True, out_dtype=pl.BF16)
        o4[:, :] = pl.matmul(i8a, i8b, a_trans=True, out_dtype=pl.INT32)
        o5[:, :, :] = pl.matmul(q3, k3, b_trans=True, out_dtype=pl.FP32)
        o6[:, :] = pl.matmul(row, wm, out_dtype=pl.FP32)
    return o1


def test_matmul_variants():
    rng = np.random.default_rng(47)
    bf = ml_dtypes.bfloat16
    f64 = np.float64
    a16 = rng.standard_normal((K, M)).astype(np.float16)
    b16 = rng.standard_normal((N, K)).astype(np.float16)
    x = rng.standard_normal((M, K)).astype(bf)
    w = rng.standard_normal((N, K)).astype(bf)
    i8a = rng.integers(-128, 128, (K, 2 * M)).astype(np.int8)
    i8b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    q3 = rng.standard_normal((2, M, 16)).astype(np.float32)
    k3 = rng.standard_normal((2, N, 16)).astype(np.float32)
    row = rng.standard_normal((1, K)).astype(np.float32)
    wm = rng.standard_normal((K, N)).astype(np.float32)
    outs = [np.zeros((M, N), np.float32), np.zeros((M, N), np.float32), np.zeros((M, N), bf),
            np.zeros((2 * M, N), np.int32), np.zeros((2, M, N), np.float32), np.zeros((1, N), np.float32)]
    mm(a16, b16, x, w, i8a, i8b, q3, k3, row, wm, *outs)
    xw = x.astype(f64) @ w.astype(f64).T
    np.testing.assert_allclose(outs[0], a16.astype(f64).T @ b16.astype(f64).T, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(outs[1], xw, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(outs[2].astype(f64), xw.astype(np.float32).astype(bf).astype(f64))
    np.testing.assert_array_equal(outs[3], i8a.astype(np.int64).T @ i8b.astype(np.int64))
    np.testing.assert_allclose(outs[4], q3.astype(f64) @ np.swapaxes(k3, 1, 2).astype(f64), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(outs[5], row.astype(f64) @ wm.astype(f64), rtol=1e-6, atol=1e-5)
