"""tile.part_add / part_mul / part_max / part_min, tile.rem / rems, tile.prelu / lrelu, and tile.sels of an
unsigned source, run on one rank against references written here cell by cell: exact float64 or Python-int
arithmetic rounded once (wrapped for integers), Python's floored ``%`` for the remainder where the device's
steps are exact, and pto-isa's A2/A3 TREM / TREMS steps spelled out in numpy scalars where they are not;
every dtype each op accepts, the valid-box edges, and the refusals."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local

from pldemu.ir import Const, DType, Op, ProgramBuilder, Var
from pldemu.ir.vocabulary import IRTypeError
from pldemu.runtime.errors import ProgramError

SHAPE = (4, 32)
NP = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
      "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8), "int16": np.dtype(np.int16),
      "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
      "int64": np.dtype(np.int64)}
SENTINEL = 77  # what the output holds where the result is not stored (outside its valid box)

Extra = Callable[[Any], list[Any]]


def _run(op: Op, dtype: str, lhs: np.ndarray, rhs: Any, lhs_valid: Sequence[int] | None = None,
         rhs_valid: Sequence[int] | None = None, extra: Extra = lambda fb: []) -> np.ndarray:
    """``op(lhs_tile, rhs_tile or scalar, *extra)`` stored into a sentinel-filled output (only its valid box)."""
    pb = ProgramBuilder(op.text.replace(".", "_"))
    a = pb.local("a", dtype, list(SHAPE))
    out = pb.local("out", dtype, list(SHAPE))
    inputs = {"a": lhs, "out": np.full(SHAPE, SENTINEL, NP[dtype])}
    fb = pb.function()
    ta = fb.pld.tile.load(a, [0, 0], list(SHAPE), valid_shape=lhs_valid, hint="ta")
    if isinstance(rhs, np.ndarray):
        b = pb.local("b", dtype, list(rhs.shape))
        inputs["b"] = rhs
        rhs = fb.pld.tile.load(b, [0, 0], list(rhs.shape), valid_shape=rhs_valid, hint="tb")
    r = fb.op(op, [ta, rhs, *extra(fb)], hint="r")
    assert isinstance(r, Var)
    fb.pld.tile.store(r, [0, 0], out)
    return run_local(pb.build(), inputs)[0]["out"]


def _wrap(v: int, dt: np.dtype) -> int:
    bits = 8 * dt.itemsize
    low = -(1 << (bits - 1)) if dt.kind == "i" else 0
    return (v - low) % (1 << bits) + low


def _exact(op: str, x: Any, y: Any, dt: np.dtype) -> Any:
    """``x op y`` exactly (Python ints, float64: exact for these operands), rounded once / wrapped to ``dt``."""
    if dt.kind in "iu":
        a, b = int(x), int(y)
        return _wrap({"add": a + b, "mul": a * b, "max": max(a, b), "min": min(a, b)}[op], dt)
    a, b = float(x), float(y)
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return np.array({"add": a + b, "mul": a * b, "max": max(a, b), "min": min(a, b)}[op]).astype(dt)


def _operands(dtype: str, seed: int, rhs_shape: tuple[int, int] = SHAPE) -> tuple[np.ndarray, np.ndarray]:
    dt = NP[dtype]
    rng = np.random.default_rng(seed)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, SHAPE, endpoint=True, dtype=dt)
        return a, rng.integers(info.min, info.max, rhs_shape, endpoint=True, dtype=dt)
    # sixteenths in [-8, 8]: every sum and product is exact in FP32, so ml_dtypes' BF16 rounds once too
    a = (rng.integers(-128, 129, SHAPE) / 16).astype(dt)
    b = (rng.integers(-128, 129, rhs_shape) / 16).astype(dt)
    a[0, 0], b[0, 1] = np.nan, np.nan
    return a, b


PART_CASES = {
    # name: lhs valid box, rhs valid box, rhs physical shape
    "same-box": ([3, 20], [3, 20], SHAPE),
    "rhs-fewer-rows": (None, [2, 32], SHAPE),
    "rhs-fewer-cols": (None, [4, 12], SHAPE),
    "rhs-inside-both": ([3, 20], [2, 9], SHAPE),
    "rhs-one-row-tile": (None, None, (1, 32)),
}


@pytest.mark.parametrize("case", sorted(PART_CASES))
@pytest.mark.parametrize("dtype", sorted(NP))
@pytest.mark.parametrize("kind", ["add", "mul", "max", "min"])
def test_partial_combines_the_boxes_as_tpartadd(kind: str, dtype: str, case: str) -> None:
    """On the lhs's valid box (the result's): ``lhs op rhs`` where rhs is valid too, the lhs's value elsewhere."""
    lhs_valid, rhs_valid, rhs_shape = PART_CASES[case]
    lhs, rhs = _operands(dtype, sorted(PART_CASES).index(case) * 4 + len(kind) + ord(kind[1]), rhs_shape)
    got = _run(Op(f"tile.part_{kind}"), dtype, lhs, rhs, lhs_valid, rhs_valid)
    lv = lhs_valid or SHAPE
    rv = rhs_valid or rhs_shape
    dt = NP[dtype]
    want = np.full(SHAPE, SENTINEL, dt)
    for i in range(lv[0]):
        for j in range(lv[1]):
            want[i, j] = _exact(kind, lhs[i, j], rhs[i, j], dt) if i < rv[0] and j < rv[1] else lhs[i, j]
    assert got.dtype == dt
    if dt.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_partial_of_an_empty_rhs_box_is_the_lhs() -> None:
    lhs, rhs = _operands("fp32", 1)
    got = _run(Op.TILE_PART_ADD, "fp32", lhs, rhs, [3, 20], [0, 20])
    np.testing.assert_array_equal(got[:3, :20], lhs[:3, :20])


def _build(dtype: str, rhs_dtype: str, rhs_shape: Sequence[int], lhs_valid: Any, rhs_valid: Any):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder("bad")
    a = pb.local("a", dtype, list(SHAPE))
    b = pb.local("b", rhs_dtype, list(rhs_shape))
    fb = pb.function()
    n = fb.pld.tensor.read(pb.local("n", "int32", [1, 8]), [0, 0])
    valid = [n if v == "n" else v for v in rhs_valid] if rhs_valid else None
    ta = fb.pld.tile.load(a, [0, 0], list(SHAPE), valid_shape=lhs_valid, hint="ta")
    tb = fb.pld.tile.load(b, [0] * len(rhs_shape), list(rhs_shape), valid_shape=valid, hint="tb")
    return pb, fb, ta, tb


@pytest.mark.parametrize(("rhs_dtype", "rhs_shape", "lhs_valid", "rhs_valid", "message"), [
    ("fp16", SHAPE, None, None, "tile.part_add: argument 'rhs' must be a tile fp32 of lhs's rank, each extent "
                                "lhs's [4, 32] or 1"),
    ("fp32", (8, 32), None, None, "tile.part_add: argument 'rhs' must be a tile fp32 of lhs's rank"),
    ("fp32", (4, 32, 1), None, None, "tile.part_add: argument 'rhs' must be a tile fp32 of lhs's rank"),
    ("fp32", SHAPE, [3, 20], [4, 20], "tile.part_add requires rhs's valid_shape [4, 20] within lhs's [3, 20], but "
                                      "axis 0 is larger"),
])
def test_partial_refusals(rhs_dtype: str, rhs_shape: tuple[int, ...], lhs_valid: Any, rhs_valid: Any,
                          message: str) -> None:
    _, fb, ta, tb = _build("fp32", rhs_dtype, rhs_shape, lhs_valid, rhs_valid)
    with pytest.raises(IRTypeError) as err:
        fb.op(Op.TILE_PART_ADD, [ta, tb])
    assert message in str(err.value)


def test_partial_refuses_a_bool_tile() -> None:
    _, fb, ta, tb = _build("bool", "bool", SHAPE, None, None)
    with pytest.raises(IRTypeError, match="argument 'lhs' must be a numeric tile"):
        fb.op(Op.TILE_PART_MAX, [ta, tb])


def test_partial_refuses_a_run_time_rhs_box_past_the_lhs_when_it_runs() -> None:
    pb, fb, ta, tb = _build("fp32", "fp32", SHAPE, [3, 20], ["n", 20])
    fb.pld.tile.store(fb.op(Op.TILE_PART_MIN, [ta, tb]), [0, 0], pb.local("out", "fp32", list(SHAPE)))
    inputs = {"a": np.ones(SHAPE, np.float32), "b": np.ones(SHAPE, np.float32), "n": np.full((1, 8), 3, np.int32)}
    run_local(pb.build(), inputs)  # 3 rows: within the lhs's box
    inputs["n"] = np.full((1, 8), 4, np.int32)
    with pytest.raises(ProgramError, match=r"tile.part_min: rhs valid box \[4, 20\] runs past lhs's \[3, 20\]"):
        run_local(pb.build(), inputs)


# ---------------------------------------------------------------------------------------------
# rem / rems: the floored remainder (the divisor's sign) as A2/A3's kernel computes it
# ---------------------------------------------------------------------------------------------


def _floored(a: float, b: float) -> float:
    """Python's ``a % b`` (the divisor's sign), exact in float64 for these operands."""
    r = math.fmod(a, b)
    return r + b if r != 0 and (r < 0) != (b < 0) else r


_I32 = (-(2**31), 2**31 - 1)


def _sat(v: float) -> int:
    """A float -> INT32 step of the kernel: NaN 0, saturated out of range (pldemu's cast rule)."""
    return 0 if math.isnan(v) else int(min(max(v, _I32[0]), _I32[1]))


def _device_rem_f32(a: float, b: float) -> float:
    """pto-isa include/pto/npu/a2a3/TRem.hpp / TRemS.hpp, FP32: vdiv, floor, vmul, vsub, sign fix; each step
    an FP32 operation on numpy scalars."""
    f = np.float32
    with np.errstate(all="ignore"):
        q = np.floor(f(a) / f(b))
        r = f(a) - q * f(b)
        return float(r + f(b) if r * f(b) < 0 else r)


def _device_rem_i32(a: int, b: int, scalar: bool) -> int:
    """The INT32 path: both through FP32, the quotient floored, ``a - q * b`` in INT32 (TREM multiplies by the
    divisor back from FP32, TREMS by the scalar itself), the sign fix in FP32, truncated."""
    f = np.float32
    with np.errstate(all="ignore"):
        af, bf = f(a), f(b)
        q = _sat(math.floor(float(af / bf)) if np.isfinite(af / bf) else float(af / bf))
        d = _wrap(_sat(float(af)) - q * (b if scalar else _sat(float(bf))), np.dtype(np.int32))
        df = f(d)
        if df * bf < 0:
            df = f(df + bf)
        return _sat(math.trunc(float(df)))


def _rem_run(dtype: str, a: np.ndarray, b: Any, valid: Sequence[int] | None = None) -> np.ndarray:
    scalar = not isinstance(b, np.ndarray)
    tmp: Extra = lambda fb: [fb.pld.tile.create([1, 40], dtype, hint="tmp")]  # noqa: E731
    rhs = Const(b, DType(dtype)) if scalar else b
    return _run(Op.TILE_REMS if scalar else Op.TILE_REM, dtype, a, rhs, valid, valid, tmp)


def test_fp32_rem_is_the_floored_remainder_with_the_divisors_sign() -> None:
    rng = np.random.default_rng(11)
    a = (rng.integers(-256, 257, SHAPE) / 4).astype(np.float32)
    b = (rng.integers(1, 161, SHAPE) / 4 * rng.choice([-1, 1], SHAPE)).astype(np.float32)
    got = _rem_run("fp32", a, b)
    want = np.vectorize(_floored)(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    nonzero = want != 0
    assert (np.signbit(got[nonzero]) == (b[nonzero] < 0)).all()  # the divisor's sign, not fmod's dividend's
    assert not np.signbit(got[~nonzero]).any()  # a - q * b == 0 is +0
    for x in (2.5, -2.5):
        got_s = _rem_run("fp32", a, x)
        np.testing.assert_array_equal(got_s, np.vectorize(lambda v: _floored(v, x))(a.astype(np.float64)))  # noqa: B023


def test_fp32_rem_special_values_and_a_large_quotient() -> None:
    a = np.full(SHAPE, 7.0, np.float32)
    b = np.full(SHAPE, 3.0, np.float32)
    cells = [(5.0, 0.0), (0.0, 0.0), (5.0, math.inf), (-5.0, -math.inf), (math.inf, 3.0), (math.nan, 3.0),
             (5.0, math.nan), (-0.0, 3.0), (1e10, 3.7), (-1e10, 3.7), (123456789.0, -0.3)]
    for j, (x, y) in enumerate(cells):
        a[0, j], b[0, j] = x, y
    got = _rem_run("fp32", a, b)
    want = np.vectorize(_device_rem_f32)(a, b).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[0, :7]).all()  # a zero or infinite divisor, an infinite or NaN operand: NaN
    large = [_floored(float(a[0, j]), float(b[0, j])) for j in (8, 9, 10)]
    assert not np.array_equal(got[0, 8:11], np.array(large, np.float32))  # the kernel divides first


def test_int32_rem_is_floored_and_exact_within_two_to_the_24() -> None:
    rng = np.random.default_rng(12)
    a = rng.integers(-(2**24), 2**24, SHAPE).astype(np.int32)
    b = rng.integers(1, 2000, SHAPE).astype(np.int32) * rng.choice([-1, 1], SHAPE).astype(np.int32)
    b[1, :8] = rng.integers(2**20, 2**24, 8) * np.array([1, -1] * 4)
    b[2, :4] = 0  # a zero divisor gives the dividend (q * 0 == 0 in INT32)
    got = _rem_run("int32", a, b)
    want = np.array([[int(x) % int(y) if y else int(x) for x, y in zip(ra, rb, strict=True)]
                     for ra, rb in zip(a, b, strict=True)], np.int32)
    np.testing.assert_array_equal(got, want)
    for x in (7, -7):
        np.testing.assert_array_equal(_rem_run("int32", a, x), (a.astype(np.int64) % x).astype(np.int32))


def test_int32_rem_beyond_two_to_the_24_follows_the_fp32_steps() -> None:
    a = np.full(SHAPE, 10, np.int32)
    b = np.full(SHAPE, 3, np.int32)
    cells = [(2**30 + 1, 3), (-(2**31), -1), (2**31 - 1, 2), (-(2**31), 7), (123456789, -(2**25 + 1)),
             (2**24 + 1, 2**24 + 3)]
    for j, (x, y) in enumerate(cells):
        a[0, j], b[0, j] = x, y
    got = _rem_run("int32", a, b)
    want = np.vectorize(lambda x, y: _device_rem_i32(int(x), int(y), False))(a, b)
    np.testing.assert_array_equal(got, want.astype(np.int32))
    assert any(int(got[0, j]) != x % y for j, (x, y) in enumerate(cells))  # not the exact remainder there
    x = 2**25 + 1  # TREMS multiplies by the scalar itself, TREM by the divisor back from FP32
    want_s = np.vectorize(lambda v: _device_rem_i32(int(v), x, True))(a)
    np.testing.assert_array_equal(_rem_run("int32", a, x), want_s.astype(np.int32))


def test_rem_of_narrowed_tiles_writes_the_valid_box() -> None:
    a = np.arange(-64, 64, dtype=np.float32).reshape(SHAPE)
    b = np.full(SHAPE, -5.0, np.float32)
    got = _rem_run("fp32", a, b, [3, 20])
    np.testing.assert_array_equal(got[:3, :20], np.vectorize(_floored)(a[:3, :20], -5.0))
    assert (got[3:] == SENTINEL).all() and (got[:, 20:] == SENTINEL).all()


def _rem_program(dtype: str, rhs: Any, tmp_dtype: str | None = None, lhs_valid: Any = None, rhs_valid: Any = None):  # type: ignore[no-untyped-def]
    pb, fb, ta, tb = _build(dtype, dtype, SHAPE, lhs_valid, rhs_valid)
    tmp = fb.pld.tile.create([1, 40], tmp_dtype or dtype, hint="tmp")
    return pb, fb, [ta, tb if rhs is None else rhs, tmp]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "int16", "int8", "uint32", "int64"])
def test_rem_refuses_what_a2a3_has_no_form_for(dtype: str) -> None:
    _, fb, args = _rem_program(dtype, None)
    with pytest.raises(IRTypeError, match=rf"tile.rem requires an FP32 or INT32 tile \(pto-isa's REM on A2/A3 "
                       rf"supports only float and int32\), but got {dtype.upper()}"):
        fb.op(Op.TILE_REM, args)
    with pytest.raises(IRTypeError, match=rf"tile.rems requires an FP32 or INT32 tile .* but got {dtype.upper()}"):
        fb.op(Op.TILE_REMS, [args[0], Const(3, DType(dtype)), args[2]])


def test_rem_refusals() -> None:
    _, fb, args = _rem_program("fp32", None, lhs_valid=[3, 20], rhs_valid=[3, 21])
    with pytest.raises(IRTypeError, match=r"tile.rem: argument 'rhs' must be a tile fp32\[4, 32\] valid \[3, 20\]"):
        fb.op(Op.TILE_REM, args)
    _, fb, args = _rem_program("int32", Const(2.5, DType.FP32))
    with pytest.raises(IRTypeError, match=r"tile.rems of an INT32 tile requires an integer scalar, but got FP32"):
        fb.op(Op.TILE_REMS, args)
    _, fb, args = _rem_program("fp32", Const(2.5, DType.FP32), tmp_dtype="uint8")
    with pytest.raises(IRTypeError, match=r"tile.rems: argument 'tmp' must be a fp32 tile"):
        fb.op(Op.TILE_REMS, args)


def test_rem_refuses_run_time_boxes_that_differ_when_it_runs() -> None:
    pb, fb, args = _rem_program("int32", None, lhs_valid=[3, 20], rhs_valid=["n", 20])
    fb.pld.tile.store(fb.op(Op.TILE_REM, args), [0, 0], pb.local("out", "int32", list(SHAPE)))
    inputs = {"a": np.ones(SHAPE, np.int32), "b": np.ones(SHAPE, np.int32), "n": np.full((1, 8), 2, np.int32)}
    with pytest.raises(ProgramError, match=r"tile.rem: lhs valid box \[3, 20\] and rhs's \[2, 20\] differ"):
        run_local(pb.build(), inputs)


# ---------------------------------------------------------------------------------------------
# prelu / lrelu
# ---------------------------------------------------------------------------------------------

SPECIALS = [math.nan, -math.nan, 0.0, -0.0, math.inf, -math.inf, -3.0, 2.0, -1e-3, 65000.0, -65000.0]


def _relu_inputs(dtype: str) -> np.ndarray:
    x = np.random.default_rng(13).uniform(-9, 9, SHAPE).astype(NP[dtype])
    x[0, :len(SPECIALS)] = SPECIALS
    return x


def _leaky(x: np.ndarray, slope: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``x > 0 ? x : x * slope``, the float64 product (exact) rounded once to ``dt``."""
    with np.errstate(all="ignore"):
        xs = x.astype(np.float64)
        return np.where(xs > 0, xs, xs * slope.astype(np.float64)).astype(dt)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_prelu_scales_the_non_positive_cells_by_the_slope_tile(dtype: str) -> None:
    x = _relu_inputs(dtype)
    slope = np.random.default_rng(14).uniform(-2, 2, SHAPE).astype(NP[dtype])
    slope[0, 2:4] = [-1.0, 2.0]  # 0 * -1 is -0, -0 * 2 is -0
    got = _run(Op.TILE_PRELU, dtype, x, slope, [3, 30], [3, 30],
               lambda fb: [fb.pld.tile.create([4, 32], "uint8", hint="tmp")])
    want = _leaky(x[:3, :30], slope[:3, :30], NP[dtype])
    np.testing.assert_array_equal(got[:3, :30], want)
    real = ~np.isnan(want)
    assert (np.signbit(got[:3, :30][real]) == np.signbit(want[real])).all()  # 0 * -1 is -0
    assert (got[3:] == SENTINEL).all()


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("slope", [0.25, -1.5, 0.0])
def test_lrelu_scales_the_non_positive_cells_by_the_scalar(dtype: str, slope: float) -> None:
    x = _relu_inputs(dtype)
    got = _run(Op.TILE_LRELU, dtype, x, Const(slope, DType.FP32))
    np.testing.assert_array_equal(got, _leaky(x, np.full(SHAPE, slope), NP[dtype]))


PRELU_REFUSALS = {
    # (src dtype, slope dtype, slope valid box, tmp shape): pypto's message
    ("bf16", "bf16", None, (4, 32)): r"tile.prelu requires src dtype in \{FP16, FP32\}, but got BF16",
    ("fp32", "fp16", None, (4, 32)): "tile.prelu requires slope dtype to match src dtype, but got FP16 and FP32",
    ("fp32", "fp32", (3, 32), (4, 32)): "tile.prelu requires slope and src to have the same physical shape and "
                                        "valid_shape",
    ("fp32", "fp32", None, (128,)): "tile.prelu requires a rank-2 tmp tile, but got rank 1",
}


@pytest.mark.parametrize("case", sorted(PRELU_REFUSALS, key=str))
def test_prelu_refuses_what_pyptos_deducer_refuses(case: tuple[Any, ...]) -> None:
    src_dtype, slope_dtype, slope_valid, tmp_shape = case
    pb = ProgramBuilder("bad")
    fb = pb.function()
    t = fb.pld.tile.load(pb.local("x", src_dtype, list(SHAPE)), [0, 0], list(SHAPE))
    s = fb.pld.tile.load(pb.local("s", slope_dtype, list(SHAPE)), [0, 0], list(SHAPE),
                         valid_shape=list(slope_valid) if slope_valid else None)
    with pytest.raises(IRTypeError, match=PRELU_REFUSALS[case]):
        fb.op(Op.TILE_PRELU, [t, s, fb.pld.tile.create(list(tmp_shape), "uint8", hint="tmp")])


def test_prelu_and_lrelu_refuse_integer_tiles_and_a_rank_3_tile() -> None:
    pb = ProgramBuilder("bad")
    fb = pb.function()
    i = fb.pld.tile.load(pb.local("i", "int32", list(SHAPE)), [0, 0], list(SHAPE))
    with pytest.raises(IRTypeError, match=r"tile.lrelu requires an FP16 or FP32 tile \(pto-isa's TLRELU has "
                       r"floating-point forms only\), but got INT32"):
        fb.op(Op.TILE_LRELU, [i, Const(0.1, DType.FP32)])
    t3 = fb.pld.tile.load(pb.local("t3", "fp32", [2, 4, 32]), [0, 0, 0], [2, 4, 32])
    with pytest.raises(IRTypeError, match=r"tile\.prelu requires a rank-2 src tile, but got rank 3"):
        fb.op(Op.TILE_PRELU, [t3, t3, fb.pld.tile.create([4, 32], "uint8")])


# ---------------------------------------------------------------------------------------------
# tile.sels of an unsigned source: its scalar is the same-width signed type, bits kept
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "scalar_dtype", "scalar", "selected"), [
    ("uint16", DType.INT16, -1, 65535), ("uint8", DType.INT8, -128, 128), ("uint32", DType.INT32, -2, 2**32 - 2),
    ("int16", DType.INT16, -7, -7), ("fp16", DType.FP16, -2.5, -2.5),
])
def test_sels_of_an_unsigned_source_keeps_the_scalars_bits(dtype: str, scalar_dtype: DType, scalar: Any,
                                                            selected: Any) -> None:
    pb = ProgramBuilder("sels")
    src = pb.local("src", dtype, list(SHAPE))
    out = pb.local("out", dtype, list(SHAPE))
    fb = pb.function()
    t = fb.pld.tile.load(src, [0, 0], list(SHAPE), valid_shape=[3, 32])
    mask = fb.pld.tile.cmps(t, Const(9, DType(dtype)) if dtype != "fp16" else 9.0, "GT")
    tmp = fb.pld.tile.create([1, 32], dtype, hint="tmp")
    fb.pld.tile.store(fb.pld.tile.sels(mask, t, tmp, Const(scalar, scalar_dtype)), [0, 0], out)
    x = (np.arange(128) % 20).reshape(SHAPE).astype(NP[dtype])
    (got,) = run_local(pb.build(), {"src": x, "out": np.zeros(SHAPE, NP[dtype])})
    want = np.where(x[:3] > 9, x[:3], np.array(selected).astype(NP[dtype]))
    np.testing.assert_array_equal(got["out"][:3], want)
