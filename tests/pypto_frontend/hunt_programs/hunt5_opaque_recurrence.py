"""An Opaque @pl.program (pypto's default function type) run by ir.compile and by runtime.execute_compiled with a
ctypes scalar: an Opaque entry whose pl.at scopes call two Opaque helpers without scopes (one calling the other),
a state tile made by one pl.at and re-bound by a pl.at in each step of a pl.range (pypto's SSA carries it through
the loop: each step reads the previous one's), then a normalising pl.at reading it after the loop."""
import ctypes
import tempfile

import numpy as np
import pypto.language as pl
from pypto import ir, runtime

R, C, STEPS = 16, 32, 4


@pl.program
class Recurrent:
    @pl.function
    def leak(self, h: pl.Tensor[[R, C], pl.FP32], a: pl.Scalar[pl.FP32]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.mul(h, a)

    @pl.function
    def cell(self, h: pl.Tensor[[R, C], pl.FP32], x: pl.Tensor[[R, C], pl.FP32],
             a: pl.Scalar[pl.FP32]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.add(self.leak(h, a), pl.mul(x, x))

    @pl.function
    def entry(self, xs: pl.Tensor[[STEPS * R, C], pl.FP32], out: pl.Out[pl.Tensor[[R, C], pl.FP32]],
              a: pl.Scalar[pl.FP32]) -> pl.Tensor[[R, C], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="init"):
            h = pl.full([R, C], dtype=pl.FP32, value=0.5)
        for s in pl.range(STEPS):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
                h = self.cell(h, xs[s * R:(s + 1) * R, :], a)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="norm"):
            m = pl.row_max(h)
            out = pl.assemble(out, pl.row_expand_div(h, m), [0, 0])
        return out


def _golden(xs: np.ndarray, a: float) -> np.ndarray:
    h = np.full((R, C), 0.5, np.float32)
    for s in range(STEPS):
        x = xs[s * R:(s + 1) * R]
        h = h * np.float32(a) + x * x
    return h / h.max(1, keepdims=True)


def test_opaque_recurrence() -> None:
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((STEPS * R, C)).astype(np.float32)
    out = np.zeros((R, C), np.float32)
    ir.compile(Recurrent)(xs, out, 0.75)
    np.testing.assert_allclose(out, _golden(xs, 0.75), rtol=1e-5, atol=1e-6)
    out2 = np.zeros((R, C), np.float32)
    with tempfile.TemporaryDirectory() as d:
        compiled = ir.compile(Recurrent, output_dir=d)
        runtime.execute_compiled(compiled.output_dir, [xs, out2, ctypes.c_float(0.25)], platform="a2a3sim",
                                 device_id=0)
    np.testing.assert_allclose(out2, _golden(xs, 0.25), rtol=1e-5, atol=1e-6)
