"""A scalar operator on two dtypes is typed as pypto types it (PromoteSameCategoryDtype, scalar_expr.h): the wider
of the two, the left one when they are as wide, each operand cast to it first (PromoteBinaryOperands); a bool
operand, or a float with an integer, is refused, in a comparison too. So ``INT8 + INT16`` wraps at 16 bits,
``UINT32 + INT32`` is UINT32 and ``INT32 + UINT32`` INT32, and ``u > i`` compares ``i`` as a UINT32. Run on one
rank against the values the device's registers hold."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


@pl.jit.incore
def mixed(i8: pl.Tensor[[1, 32], pl.INT8], i16: pl.Tensor[[1, 16], pl.INT16], i32: pl.Tensor[[1, 8], pl.INT32],
          u32: pl.Tensor[[1, 8], pl.UINT32], out: pl.Out[pl.Tensor[[1, 8], pl.INT64]]):
    a = pl.read(i8, [0, 0])
    h = pl.read(i16, [0, 0])
    i = pl.read(i32, [0, 0])
    u = pl.read(u32, [0, 0])
    pl.write(out, [0, 0], pl.cast(a + h, pl.INT64))  # INT16: 100 + 32700 wraps
    pl.write(out, [0, 1], pl.cast(u - i, pl.INT64))  # UINT32 (the left one): 1 - (-1) is 2
    pl.write(out, [0, 2], pl.cast(i * u, pl.INT64))  # INT32: -1 * 1
    pl.write(out, [0, 3], pl.cast(u + i + i, pl.INT64))  # UINT32: 1 - 2 wraps to 2^32 - 1
    if u > i:  # i as a UINT32 is 2^32 - 1: false on the device
        pl.write(out, [0, 4], 1)
    if i < u:  # u as an INT32 is 1: true
        pl.write(out, [0, 5], 1)
    pl.write(out, [0, 6], pl.cast(a + 100, pl.INDEX))  # an int literal is an INDEX: 200, no INT8 wrap
    return out


@pl.jit
def mixed_orch(i8: pl.Tensor[[1, 32], pl.INT8], i16: pl.Tensor[[1, 16], pl.INT16], i32: pl.Tensor[[1, 8], pl.INT32],
               u32: pl.Tensor[[1, 8], pl.UINT32], out: pl.Out[pl.Tensor[[1, 8], pl.INT64]],
               orch_out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    out = mixed(i8, i16, i32, u32, out)
    if pl.read(u32, [0, 0]) + pl.read(i32, [0, 0]) + pl.read(i32, [0, 0]) > 5:  # the Orchestration's uint32_t
        pl.write(orch_out, [0, 0], 1)
    return out


@pytest.mark.launcher
def test_mixed_width_scalars_take_the_wider_dtype_and_the_left_one_on_a_tie() -> None:
    i8 = np.zeros((1, 32), np.int8)
    i8[0, 0] = 100
    i16 = np.zeros((1, 16), np.int16)
    i16[0, 0] = 32_700
    i32 = np.full((1, 8), -1, np.int32)
    u32 = np.ones((1, 8), np.uint32)
    out = np.zeros((1, 8), np.int64)
    orch_out = np.zeros((1, 8), np.int32)
    mixed_orch(i8, i16, i32, u32, out, orch_out)
    np.testing.assert_array_equal(out[0], [32_800 - 65_536, 2, -1, 2 ** 32 - 1, 0, 1, 200, 0])
    assert orch_out[0, 0] == 1


@pl.jit.incore
def float_vs_int(f32: pl.Tensor[[1, 8], pl.FP32], out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    if pl.read(f32, [0, 0]) > 0:  # MARK-float-vs-int
        pl.write(out, [0, 0], 1)
    return out


@pl.jit.incore
def bool_operand(i32: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    i = pl.read(i32, [0, 0])
    flag = i > 0
    pl.write(out, [0, 0], flag + i)  # MARK-bool-operand
    return out


@pl.jit.incore
def int_true_div(i32: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    i = pl.read(i32, [0, 0])
    pl.write(out, [0, 0], pl.cast(i / i, pl.INT32))  # MARK-int-true-div
    return out


@pytest.mark.parametrize(("kernel", "dtype", "marker", "message"), [
    (float_vs_int, np.float32, "MARK-float-vs-int",
     "Operator 'gt' requires same numeric dtype category, got fp32 and index"),
    (bool_operand, np.int32, "MARK-bool-operand", "Operator 'add' does not accept bool dtype"),
    (int_true_div, np.int32, "MARK-int-true-div", "`/` of int32 scalars: pldemu runs pypto's FloatDiv on floats"),
])
def test_pypto_refuses_a_float_with_an_integer_and_a_bool_operand(kernel, dtype, marker: str,  # type: ignore[no-untyped-def]
                                                                  message: str) -> None:
    args = [np.zeros((1, 8), dtype), np.zeros((1, 8), np.int32)]
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(kernel.compile(*args).program, 1, args)
    assert (err.value.file, err.value.line) == (__file__, _line_of(marker))
