"""tile.full as pypto's pl.full / pl.tile.full reach it: every dtype pypto-lib fills, its fill values (each
converted once, nearest-even, from the literal), and the .pld round trip of typed fill constants."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local

from pldemu.ir import Const, DType, ProgramBuilder, format_program, parse_program

FP32_NEG_INF = -3.4028234663852886e38  # pypto-lib's "-inf" (mtp/config.py), the most negative finite FP32
CASES = [("fp32", FP32_NEG_INF), ("fp32", 1e-4), ("fp32", -1e20), ("bf16", 1e-4), ("bf16", 0.0),
         ("fp16", 127.0), ("fp16", 1e-4), ("int32", -1), ("int8", 127), ("int64", -(2**40)), ("int16", 0)]


def _program(dtype: str, value: float) -> object:
    pb = ProgramBuilder("fill")
    out = pb.local("out", dtype, [4, 32])
    fb = pb.function()
    fb.pld.tile.store(fb.pld.tile.full([4, 32], Const(value, DType.parse(dtype)), dtype, hint="f"), [0, 0], out)
    return pb.build()


@pytest.mark.parametrize(("dtype", "value"), CASES)
def test_fill_is_the_literal_rounded_once(dtype: str, value: float) -> None:
    (got,) = run_local(_program(dtype, value), {})  # type: ignore[arg-type]
    want_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bf16" else np.dtype(dtype.replace("fp", "float"))
    want = np.array([value], np.float64 if want_dtype.kind == "f" or want_dtype.kind == "V" else np.int64)
    np.testing.assert_array_equal(got["out"], np.broadcast_to(want.astype(want_dtype), (4, 32)))


@pytest.mark.parametrize(("dtype", "value"), CASES)
def test_typed_fill_constants_round_trip(dtype: str, value: float) -> None:
    program = _program(dtype, value)
    assert parse_program(format_program(program)) == program  # type: ignore[arg-type]
