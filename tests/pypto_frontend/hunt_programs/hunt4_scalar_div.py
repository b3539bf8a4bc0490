"""A float scalar's true division (pypto's FloatDiv: ``arith.divf``), as pypto-lib's qwen3_14b a8w8 decode layer
quantises rows: ``127.0 / amax`` read from a tensor, in an orchestration loop, each step rounded to FP32, a
zero amax giving inf (IEEE, as the device); and pypto's unified ``pl.add`` / ``pl.sub`` / ``pl.mul`` /
``pl.div`` of two scalars, which are the scalar operators (unified_ops.py: ``Scalar(lhs op rhs)``)."""
import numpy as np
import pypto.language as pl
import torch

R, C = 4, 16


@pl.jit
def scale_rows(x: pl.Tensor[[R, C], pl.FP32], amax: pl.Tensor[[1, R], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               s: pl.Out[pl.Tensor[[1, R], pl.FP32]]):
    for r in pl.unroll(R):
        a = pl.tensor.read(amax, [0, r])
        q = 127.0 / a
        pl.tensor.write(s, [0, r], pl.div(pl.sub(pl.add(pl.mul(a, 1.0), 1.0), 1.0), 127.0))  # unified ops
        with pl.at(level=pl.Level.CORE_GROUP):
            y[r:r + 1, :] = pl.mul(x[r:r + 1, :], q)
    return y


def test_float_scalar_division():
    x = torch.arange(R * C, dtype=torch.float32).reshape(R, C) / 7
    amax = torch.tensor([[3.0, 0.7, 11.0, 0.0]], dtype=torch.float32)
    y, s = torch.zeros(R, C), torch.zeros(1, R)
    scale_rows(x, amax, y, s)
    a = amax.numpy()[0]
    with np.errstate(divide="ignore"):
        q = (np.float32(127.0) / a).astype(np.float32)
    one = np.float32(1.0)
    np.testing.assert_array_equal(s.numpy()[0], ((a * one + one) - one) / np.float32(127.0))
    np.testing.assert_array_equal(y.numpy(), x.numpy() * q[:, None])
