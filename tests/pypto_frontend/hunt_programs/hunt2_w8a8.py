"""a W8A8 linear in expert_routed's style: per-row dynamic INT8 quantisation of BF16 activations over ragged
row tiles (20 rows in tiles of 16: valid_shape slice, fillpad zero, |x| as maximum(x, neg x), row_max, an eps
floor, 127 / amax by pl.div, FP32 -> rint INT32 -> round FP16 -> trunc INT8) in pl.at tasks an orchestration
pl.range calls through an inline helper with the loop index; then a pl.spmd over column blocks, each looping
over the row tiles with a split-K pl.pipeline (`if kb == 0: matmul(b_trans, out_dtype=INT32) else
matmul_acc`), dequantised by a per-row scale (row_expand_mul of a [16, 1] column) and a per-column one
(col_expand_mul of a 1-D scale slice reshaped to a row), cast to BF16 with rint and stored by its valid rows."""
import ml_dtypes
import numpy as np
import pypto.language as pl

T = 20
TT = 16
NTILE = 2
TP = NTILE * TT
K = 96
KC = 32
N = 64
NT = 32
EPS = 1e-4


@pl.jit.inline
def quant_tile(x: pl.Tensor[[T, K], pl.BF16], xq: pl.Tensor[[TP, K], pl.INT8], xs: pl.Tensor[[TP, 1], pl.FP32],
               ti: pl.Scalar[pl.INDEX]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="quant"):
        t0 = ti * TT
        rows = pl.min(TT, T - t0)
        xt = pl.slice(x, [TT, K], [t0, 0], valid_shape=[rows, K])
        xf = pl.fillpad(pl.cast(xt, target_type=pl.FP32), pad_value=pl.PadValue.zero)
        amax = pl.maximum(pl.row_max(pl.maximum(xf, pl.neg(xf))), EPS)
        sq = pl.div(pl.full([TT, 1], dtype=pl.FP32, value=127.0), amax)
        xs[t0:t0 + TT, :] = pl.recip(sq)
        q32 = pl.cast(pl.row_expand_mul(xf, sq), target_type=pl.INT32, mode="rint")
        q16 = pl.cast(q32, target_type=pl.FP16, mode="round")
        xq[t0:t0 + TT, :] = pl.cast(q16, target_type=pl.INT8, mode="trunc")
    return xq


@pl.jit
def w8a8(x: pl.Tensor[[T, K], pl.BF16], w: pl.Tensor[[N, K], pl.INT8], w_scale: pl.Tensor[[N], pl.FP32],
         y: pl.Out[pl.Tensor[[T, N], pl.BF16]], yq: pl.Out[pl.Tensor[[TP, K], pl.INT8]]):
    xq = pl.create_tensor([TP, K], dtype=pl.INT8)
    xs = pl.create_tensor([TP, 1], dtype=pl.FP32)
    for ti in pl.range(NTILE):
        xq = quant_tile(x, xq, xs, ti)
    with pl.spmd(N // NT, name_hint="mm", allow_early_resolve=True):
        nb = pl.tile.get_block_idx()
        n0 = nb * NT
        wsc = pl.reshape(w_scale[n0:n0 + NT], [1, NT])
        for ti in pl.range(NTILE):
            t0 = ti * TT
            rows = pl.min(TT, T - t0)
            acc = pl.create_tensor([TT, NT], dtype=pl.INT32)
            for kb in pl.pipeline(K // KC, stage=2):
                k0 = kb * KC
                a = pl.slice(xq, [TT, KC], [t0, k0], valid_shape=[rows, KC])
                b = w[n0:n0 + NT, k0:k0 + KC]
                if kb == 0:
                    acc = pl.matmul(a, b, b_trans=True, out_dtype=pl.INT32)
                else:
                    acc = pl.matmul_acc(acc, a, b, b_trans=True)
            f = pl.cast(acc, target_type=pl.FP32, mode="none")
            f = pl.col_expand_mul(pl.row_expand_mul(f, xs[t0:t0 + TT, :]), wsc)
            out = pl.set_validshape(pl.cast(f, target_type=pl.BF16, mode="rint"), rows, NT)
            y[t0:t0 + TT, n0:n0 + NT] = out
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy_q"):
        yq[:, :] = xq[:, :]
    return y


def golden(x, w, w_scale):
    f32 = np.float32
    xf = np.zeros((TP, K), f32)
    xf[:T] = x.astype(f32)
    amax = np.maximum(np.abs(xf).max(-1, keepdims=True), f32(EPS)).astype(f32)
    sq = (f32(127.0) / amax).astype(f32)
    dq = (f32(1.0) / sq).astype(f32)
    q = np.rint((xf * sq).astype(f32)).astype(np.int8)  # |q| <= 127: the FP16 / INT8 hops are exact
    acc = q[:T].astype(np.int64) @ w.astype(np.int64).T
    f = (acc.astype(f32) * dq[:T]).astype(f32) * w_scale.reshape(1, N).astype(f32)
    return f.astype(f32).astype(ml_dtypes.bfloat16), q


def test_w8a8_linear_ragged_rows():
    rng = np.random.default_rng(22)
    bf = np.dtype(ml_dtypes.bfloat16)
    x = (rng.standard_normal((T, K)) * 2.0).astype(bf)
    x[3, :] = 0.0  # an all-zero row: the eps floor
    x[5, 7] = 40.0  # a row whose amax is one outlier
    w = rng.integers(-127, 128, (N, K)).astype(np.int8)
    w_scale = (rng.random(N) * 0.01 + 0.001).astype(np.float32)
    y = np.zeros((T, N), bf)
    yq = np.full((TP, K), 99, np.int8)
    w8a8(x, w, w_scale, y, yq)
    want_y, want_q = golden(x, w, w_scale)
    np.testing.assert_array_equal(yq[:T], want_q[:T])
    np.testing.assert_array_equal(yq[T:], 0)
    np.testing.assert_array_equal(y.astype(np.float32), want_y.astype(np.float32))
