"""a residual stack of three layers in decode_fwd's style: the orchestration loops over layers
(pl.range) and makes each layer's views of layer-stacked weights there (annotated `pl.slice` of a 1-D
norm-weight stack and of a 2-D projection stack at run-time offsets, `w3[li]` of a 3-D stack, `bias[li]`),
hands them to an inline layer inside `pl.scope()`, which calls two further inline helpers (an rmsnorm that
sizes its pl.spmd by `pl.tensor.dim` and returns its TaskId, a projection task with deps= on it) with a
`pl.Scalar[pl.INT32]` layer scale cast in the orchestration; BF16 operands with FP32 accumulation."""
import ml_dtypes
import numpy as np
import pypto.language as pl

LAY = 3
T = 16
TT = 8
D = 32
EPS = 1e-6


@pl.jit.inline
def rms(x: pl.Tensor[[T, D], pl.FP32], g: pl.Tensor[[D], pl.BF16], xn: pl.Tensor[[T, D], pl.BF16]):
    rows = pl.tensor.dim(x, 0)
    with pl.spmd(rows // TT, name_hint="rms", allow_early_resolve=True) as rms_tid:
        b = pl.tile.get_block_idx()
        r0 = b * TT
        xt = x[r0:r0 + TT, :]
        ss = pl.row_sum(pl.mul(xt, xt))
        inv = pl.rsqrt(pl.add(pl.mul(ss, 1.0 / D), EPS), high_precision=True)
        gw = pl.cast(pl.reshape(g, [1, D]), target_type=pl.FP32)
        xn[r0:r0 + TT, :] = pl.cast(pl.col_expand_mul(pl.row_expand_mul(xt, inv), gw), target_type=pl.BF16,
                                    mode="rint")
    return rms_tid


@pl.jit.inline
def proj(xn: pl.Tensor[[T, D], pl.BF16], w: pl.Tensor[[D, D], pl.BF16], w2: pl.Tensor[[D, D], pl.BF16],
         bias: pl.Tensor[[1, D], pl.FP32], h: pl.Tensor[[T, D], pl.FP32], scale: pl.Scalar[pl.INT32], dep):
    with pl.spmd(T // TT, name_hint="proj", deps=[dep]) as _ptid:
        b = pl.tile.get_block_idx()
        r0 = b * TT
        a = pl.matmul(xn[r0:r0 + TT, :], w, out_dtype=pl.FP32)
        a = pl.matmul_acc(a, xn[r0:r0 + TT, :], w2, b_trans=True)
        s = pl.cast(scale, pl.FP32)
        upd = pl.mul(pl.col_expand_add(a, bias), s)
        h[r0:r0 + TT, :] = pl.add(h[r0:r0 + TT, :], upd)
    return h


@pl.jit.inline
def layer(h: pl.Tensor[[T, D], pl.FP32], g: pl.Tensor[[D], pl.BF16], w: pl.Tensor[[D, D], pl.BF16],
          w2: pl.Tensor[[D, D], pl.BF16], bias: pl.Tensor[[1, D], pl.FP32], scale: pl.Scalar[pl.INT32]):
    xn = pl.create_tensor([T, D], dtype=pl.BF16)
    tid = rms(h, g, xn)
    h = proj(xn, w, w2, bias, h, scale, tid)
    return h


@pl.jit
def stack(x: pl.Tensor[[T, D], pl.FP32], norm_w: pl.Tensor[[LAY * D], pl.BF16],
          w: pl.Tensor[[LAY * D, D], pl.BF16], w3: pl.Tensor[[LAY, D, D], pl.BF16],
          bias: pl.Tensor[[LAY, 1, D], pl.FP32], out: pl.Out[pl.Tensor[[T, D], pl.FP32]]):
    h = pl.create_tensor([T, D], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
        h[:, :] = x[:, :]
    for li in pl.range(LAY):
        sc: pl.Scalar[pl.INT32] = pl.cast(li * 2 + 1, pl.INT32)
        g: pl.Tensor[[D], pl.BF16] = pl.slice(norm_w, [D], [li * D])
        wl: pl.Tensor[[D, D], pl.BF16] = pl.slice(w, [D, D], [li * D, 0])
        w2 = w3[li]
        bl = bias[li]
        with pl.scope():
            h = layer(h, g, wl, w2, bl, sc)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="out"):
        out[:, :] = pl.mul(h[:, :], 0.5)
    return out


def golden(x, norm_w, w, w3, bias):
    bf = ml_dtypes.bfloat16
    h = x.astype(np.float32)
    for li in range(LAY):
        g = norm_w[li * D:(li + 1) * D].astype(np.float32)
        ss = (h.astype(np.float64) ** 2).sum(-1, keepdims=True)
        inv = 1.0 / np.sqrt(ss / D + EPS)
        xn = (h * inv * g).astype(bf).astype(np.float64)
        a = xn @ w[li * D:(li + 1) * D].astype(np.float64) + xn @ w3[li].astype(np.float64).T
        h = (h + (a + bias[li]) * (li * 2 + 1)).astype(np.float32)
    return h * 0.5


def test_layer_stack_views():
    rng = np.random.default_rng(21)
    bf = np.dtype(ml_dtypes.bfloat16)
    x = rng.standard_normal((T, D)).astype(np.float32)
    norm_w = (1.0 + 0.1 * rng.standard_normal(LAY * D)).astype(bf)
    w = (rng.standard_normal((LAY * D, D)) * 0.1).astype(bf)
    w3 = (rng.standard_normal((LAY, D, D)) * 0.1).astype(bf)
    bias = (rng.standard_normal((LAY, 1, D)) * 0.1).astype(np.float32)
    out = np.zeros((T, D), np.float32)
    stack(x, norm_w, w, w3, bias, out)
    np.testing.assert_allclose(out, golden(x, norm_w, w, w3, bias), rtol=2e-3, atol=2e-3)
