"""Fixed-width integer scalar arithmetic wraps as the device's registers do: pypto types ``INT32 + INT32`` INT32
(PromoteSameCategoryDtype) and emits ``arith.addi`` on i32 (C's ``int32_t`` in an Orchestration), so a sum that
leaves the range is negative on the device and a run-time ``if`` on it goes the other way than on exact
integers. The same for INT8 and INT64, ``-`` and ``*``, folded constants, in a kernel and in an Orchestration;
INDEX arithmetic stays exact. A float scalar rounds to its dtype at every step (``arith.subf`` on f32, C's
``float``), not once when it is stored. Run on one rank against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.surface import language as pl


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


@pl.jit.incore
def wraps(i32: pl.Tensor[[1, 8], pl.INT32], i8: pl.Tensor[[1, 32], pl.INT8], i64: pl.Tensor[[1, 4], pl.INT64],
          out: pl.Out[pl.Tensor[[1, 8], pl.INT64]]):
    a = pl.read(i32, [0, 0])
    b = pl.read(i32, [0, 1])
    s = a + b
    if s < 0:  # the device's i32 sum of 2e9 + 1.5e9 is negative
        pl.write(out, [0, 0], 1)
    pl.write(out, [0, 1], pl.cast(s, pl.INT64))
    pl.write(out, [0, 2], pl.cast(a * b - b, pl.INT64))
    c = pl.read(i8, [0, 0]) + pl.read(i8, [0, 1])  # INT8 + INT8 is INT8 (arith.addi i8)
    pl.write(out, [0, 3], pl.cast(c, pl.INT64))
    v = pl.read(i64, [0, 0])
    pl.write(out, [0, 4], v * v)
    k = pl.const(2_000_000_000, pl.INT32) + pl.const(2_000_000_000, pl.INT32)  # folded, still an i32 sum
    pl.write(out, [0, 5], pl.cast(k, pl.INT64))
    pl.write(out, [0, 6], pl.cast(a, pl.INDEX) * 4 + 1)  # INDEX: 64 bits, exact here
    return out


@pl.jit
def wraps_orch(i32: pl.Tensor[[1, 8], pl.INT32], i8: pl.Tensor[[1, 32], pl.INT8], i64: pl.Tensor[[1, 4], pl.INT64],
               out: pl.Out[pl.Tensor[[1, 8], pl.INT64]], orch_out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    out = wraps(i32, i8, i64, out)
    s = pl.read(i32, [0, 0]) + pl.read(i32, [0, 1])  # the Orchestration's int32_t sum wraps too
    if s < 0:
        pl.write(orch_out, [0, 0], 1)
    return out


def _wrap(v: int, bits: int) -> int:
    v %= 1 << bits
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


@pytest.mark.launcher
def test_fixed_width_scalar_arithmetic_wraps_as_the_device_does() -> None:
    i32 = np.zeros((1, 8), np.int32)
    i32[0, :2] = [2_000_000_000, 1_500_000_000]
    i8 = np.zeros((1, 32), np.int8)
    i8[0, :2] = [100, 100]
    i64 = np.zeros((1, 4), np.int64)
    i64[0, 0] = 3_037_000_500  # its square passes 2^63
    out = np.zeros((1, 8), np.int64)
    orch_out = np.zeros((1, 8), np.int32)
    wraps_orch(i32, i8, i64, out, orch_out)
    a, b = 2_000_000_000, 1_500_000_000
    want = [1, _wrap(a + b, 32), _wrap(_wrap(a * b, 32) - b, 32), _wrap(200, 8), _wrap(3_037_000_500 ** 2, 64),
            _wrap(4_000_000_000, 32), a * 4 + 1, 0]
    np.testing.assert_array_equal(out[0], want)
    assert orch_out[0, 0] == 1


@pl.jit.incore
def narrowed(out: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    big = pl.const(300, pl.INT32)
    pl.write(out, [0, 0], pl.cast(pl.cast(big, pl.INT8), pl.INT32))  # a constant cast to INT8 wraps: 44
    return out


@pytest.mark.launcher
def test_a_constant_cast_to_a_narrower_integer_wraps() -> None:
    out = np.zeros((1, 8), np.int32)
    narrowed(out)
    assert out[0, 0] == 44


@pl.jit.incore
def rounds(t: pl.Tensor[[1, 8], pl.FP32], z: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    a = pl.read(t, [0, 0])
    m = pl.read(t, [0, 1])
    b = a - m  # 2^24 + 1 is no FP32: arith.subf on f32 gives 2^24
    pl.write(z, [0, 0], b - m)
    if b > a:
        pl.write(z, [0, 1], 1.0)
    p = pl.read(t, [0, 2]) * pl.read(t, [0, 3])
    pl.write(z, [0, 2], p - pl.read(t, [0, 4]))
    return z


@pl.jit
def rounds_orch(t: pl.Tensor[[1, 8], pl.FP32], z: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    z = rounds(t, z)
    s = pl.read(t, [0, 0]) + 1.0  # the Orchestration's C++ float: rounded at every step
    pl.write(z, [0, 3], s + 1.0)
    return z


@pytest.mark.launcher
def test_float_scalar_arithmetic_rounds_to_its_dtype_at_every_step() -> None:
    f = np.float32
    t = np.array([[2.0 ** 24, -1.0, 1.0000001, 1.0000001, 1.0000002, 0, 0, 0]], f)
    z = np.zeros((1, 8), f)
    rounds_orch(t, z)
    want = [f(f(t[0, 0] - t[0, 1]) - t[0, 1]), 0.0, f(f(t[0, 2] * t[0, 3]) - t[0, 4]), f(f(t[0, 0] + 1) + 1)]
    np.testing.assert_array_equal(z[0, :4], want)
