"""The interpreter: RNE on write, fp32 compute, PSUM accumulation, byte-exact DMA, integer saturation."""

from __future__ import annotations

import numpy as np
from neuron_helpers import FULL, kernel

from pldemu.neuron.interpreter import HANDLERS, Numerics, run
from pldemu.neuron.ir import Kind
from pldemu.neuron.text import parse_function
from pldemu.neuron.verifier import verify

ROW = "[[4,1],[1,4]]+0"


def _one_row(body: str, tensors: str) -> object:
    return verify(parse_function("kernel k\n" + tensors + body, "<test>"))


def test_every_kind_has_a_handler() -> None:
    assert set(HANDLERS) == set(Kind)


def test_bf16_write_rounds_to_nearest_even() -> None:
    f = _one_row(f"%l = DMACopy(x{ROW}:fp32) dst=xs{ROW}:fp32 dtype=fp32\n"
                 f"%r = ActivationOp(xs{ROW}:fp32) dst=rs{ROW}:bf16 func=copy dtype=bf16\n"
                 f"%s = DMACopy(rs{ROW}:bf16) dst=out{ROW}:bf16 dtype=bf16\n",
                 "hbm x[1, 4] fp32 input\nhbm out[1, 4] bf16 output\nsbuf xs[1, 4] fp32\nsbuf rs[1, 4] bf16\n")
    ties = np.array([[1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -(1 + 2**-8)]])
    out = run(f, {"x": ties})["out"]  # type: ignore[arg-type]
    assert out.tolist() == [[1.0, 1 + 2**-6, 1 + 2**-7, -1.0]]


def test_matmul_accumulates_in_psum() -> None:
    f = kernel(f"%m1 = MatMultOp(xfs{FULL}:fp32, xfs{FULL}:fp32) dst=acc[[4,4],[1,4]]+0:fp32 dtype=fp32\n"
               f"%m2 = MatMultOp(xfs{FULL}:fp32, xfs{FULL}:fp32) dst=acc[[4,4],[1,4]]+0:fp32 dtype=fp32 acc\n"
               "%e = TensorCopyOp(acc[[4,4],[1,4]]+0:fp32) dtype=fp32\n"
               "%s = DMACopy(%e) dst=o[[4,4],[1,4]]+0:fp32 dtype=fp32\n",
               tensors="psum acc[4, 4] fp32\nhbm o[4, 4] fp32 output\n")
    xf = np.arange(32, dtype=np.float64).reshape(8, 4) / 8
    out = run(f, {"x": np.zeros((8, 4)), "xf": xf, "xi": np.zeros((8, 4))})["o"]
    assert np.array_equal(out, 2 * (xf.astype(np.float32).T @ xf.astype(np.float32)))


def test_int_write_saturates_and_float64_reference_keeps_integers() -> None:
    f = kernel(f"%q = TensorScalarPtrOp(xfs{FULL}:fp32) func=multiply scalar=100.0 dtype=int8\n"
               f"%s = DMACopy(%q) dst=o{FULL}:int8 dtype=int8\n", tensors="hbm o[8, 4] int8 output\n")
    xf = np.full((8, 4), 1.5)
    inputs = {"x": np.zeros((8, 4)), "xf": xf, "xi": np.zeros((8, 4))}
    assert (run(f, inputs)["o"] == 127).all()
    assert (run(f, inputs, Numerics.FLOAT64)["o"] == 127).all()
