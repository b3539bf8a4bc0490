"""layernorm and activations over a dynamic row count (pl.dynamic T, called at T = 37 and 16; row tiles of 16
with a ragged last tile by valid_shape slices and pl.min of the remainder): per tile a BF16 -> FP32 cast, mean
and variance by row_sum and row_expand_sub, rsqrt(var + eps) with high_precision, gamma / beta rows by
col_expand_mul / col_expand_add (1-D weights reshaped to [1, D]), then GELU by its tanh form written with exp
(tanh(u) = 1 - 2 / (exp(2u) + 1)) and SiLU by recip(1 + exp(-x)); BF16 outputs cast with rint, stored by the
valid rows only."""
import ml_dtypes
import numpy as np
import pypto.language as pl

D = 32
TM = 16
T = pl.dynamic("T")


@pl.jit
def norm_act(x: pl.Tensor[[T, D], pl.BF16], g: pl.Tensor[[D], pl.FP32], bta: pl.Tensor[[D], pl.FP32],
             gelu: pl.Out[pl.Tensor[[T, D], pl.BF16]], silu: pl.Out[pl.Tensor[[T, D], pl.BF16]]):
    t_dim = pl.tensor.dim(x, 0)
    for t0 in pl.range(0, t_dim, TM):
        rows = pl.min(TM, t_dim - t0)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="ln"):
            xt = pl.slice(x, [TM, D], [t0, 0], valid_shape=[rows, D])
            xf = pl.cast(xt, pl.FP32)
            mean = pl.mul(pl.row_sum(xf), 1.0 / D)
            xc = pl.row_expand_sub(xf, mean)
            var = pl.mul(pl.row_sum(pl.mul(xc, xc)), 1.0 / D)
            inv = pl.rsqrt(pl.add(var, 1e-5), high_precision=True)
            y = pl.row_expand_mul(xc, inv)
            y = pl.col_expand_add(pl.col_expand_mul(y, pl.reshape(g, [1, D])), pl.reshape(bta, [1, D]))
            u = pl.mul(pl.add(y, pl.mul(pl.mul(pl.mul(y, y), y), 0.044715)), 0.7978845608)
            th = pl.add(pl.mul(pl.recip(pl.add(pl.exp(pl.mul(u, 2.0)), 1.0)), -2.0), 1.0)
            ge = pl.mul(pl.mul(y, 0.5), pl.add(th, 1.0))
            si = pl.mul(y, pl.recip(pl.add(pl.exp(pl.neg(y)), 1.0)))
            gelu[t0:t0 + TM, :] = pl.cast(ge, pl.BF16, mode="rint")
            silu[t0:t0 + TM, :] = pl.cast(si, pl.BF16, mode="rint")
    return gelu


def _golden(x, g, b):
    xf = x.astype(np.float64)
    xc = xf - xf.mean(1, keepdims=True)
    y = xc / np.sqrt((xc * xc).mean(1, keepdims=True) + 1e-5) * g + b
    ge = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    return ge, y / (1 + np.exp(-y))


def test_layernorm_gelu_silu_dynamic_rows():
    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng(43)
    g = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    b = (0.1 * rng.standard_normal(D)).astype(np.float32)
    for t in (37, 16):
        x = (rng.standard_normal((t, D)) * 3 + 1).astype(bf)
        ge, si = np.full((t, D), 9, bf), np.full((t, D), 9, bf)
        norm_act(x, g, b, ge, si)
        wg, ws = _golden(x, g, b)
        np.testing.assert_allclose(ge.astype(np.float64), wg, rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(si.astype(np.float64), ws, rtol=1e-2, atol=1e-2)
