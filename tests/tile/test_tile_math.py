"""tile.exp / log / sqrt / rsqrt / recip / neg / abs / div / divs against numpy references computed in float64
(or exact integer arithmetic) and rounded once per device step: every dtype each op accepts, special values,
the valid box, and the refusals."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local, unary_program

from pldemu.ir import FunctionBuilder, Op, ProgramBuilder, Var
from pldemu.ir.vocabulary import IRTypeError

BF16 = np.dtype(ml_dtypes.bfloat16)
SHAPE = (4, 32)
NP = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": BF16, "int8": np.dtype(np.int8),
      "int16": np.dtype(np.int16), "int32": np.dtype(np.int32)}
_BITS = {1: np.int8, 2: np.int16, 4: np.int32}


def _run_unary(op: Op, dtype: str, x: np.ndarray) -> np.ndarray:
    program = unary_program(op.text, dtype, x.shape, lambda fb, t: fb.pld.tile.unary(op, t, hint="r"))
    return run_local(program, {"x": x})[0]["out"]


def _round(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 values rounded once to ``dtype`` (nearest, ties to even)."""
    with np.errstate(all="ignore"):
        return values.astype(dtype)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (same-sign finite values), 0 where both are the same NaN/Inf."""
    g = got.view(_BITS[got.dtype.itemsize]).astype(np.int64)
    w = want.view(_BITS[want.dtype.itemsize]).astype(np.int64)
    same_special = (np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))) | (g == w)
    return np.where(same_special, 0, np.abs(g - w))


def _positive(dtype: np.dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.01, 20.0, SHAPE)
    x[0, :6] = [1.0, 4.0, 0.25, 1e-3, 100.0, 2.0]
    return _round(x, dtype)


REFS: dict[Op, Callable[[np.ndarray], np.ndarray]] = {
    Op.TILE_EXP: np.exp, Op.TILE_LOG: np.log, Op.TILE_SQRT: np.sqrt, Op.TILE_RECIP: lambda v: 1.0 / v,
}
"""float64 references of the one-step ops (rounded once to the tile's dtype by the test)."""


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", [Op.TILE_EXP, Op.TILE_LOG, Op.TILE_SQRT, Op.TILE_RECIP])
def test_one_step_float_op_matches_the_once_rounded_float64_value(op: Op, dtype: str) -> None:
    if op is Op.TILE_LOG and dtype == "bf16":
        pytest.skip("tile.log takes FP16 / FP32 only (refusal tested below)")
    dt = NP[dtype]
    x = _positive(dt, 1)
    if op is Op.TILE_EXP:
        x = _round(x.astype(np.float64) - 10.0, dt)
    got = _run_unary(op, dtype, x)
    assert got.dtype == dt
    want = _round(REFS[op](x.astype(np.float64)), dt)
    # sqrt and 1/x are correctly rounded (IEEE); exp and log may be off by one unit in the last place.
    bound = 0 if op in (Op.TILE_SQRT, Op.TILE_RECIP) else 1
    assert _ulps(got, want).max() <= bound


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_rsqrt_is_two_rounded_steps(dtype: str) -> None:
    dt = NP[dtype]
    x = _positive(dt, 2)
    root = _round(np.sqrt(x.astype(np.float64)), dt)
    want = _round(1.0 / root.astype(np.float64), dt)
    got = _run_unary(Op.TILE_RSQRT, dtype, x)
    assert got.dtype == dt and _ulps(got, want).max() == 0


def test_fp32_specials() -> None:
    x = np.zeros(SHAPE, np.float32)
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0]
    with np.errstate(all="ignore"):
        for op, ref in [*REFS.items(), (Op.TILE_RSQRT, lambda v: 1.0 / np.sqrt(v))]:
            got = _run_unary(op, "fp32", x)[0, :6]
            want = _round(ref(x[0, :6].astype(np.float64)), np.dtype(np.float32))
            assert _ulps(got, want).max() <= (1 if op in (Op.TILE_EXP, Op.TILE_LOG) else 0), op.text
            assert np.array_equal(np.isnan(got), np.isnan(want)), op.text
            assert np.array_equal(np.signbit(got)[:4], np.signbit(want)[:4]), op.text  # 1/-0 is -inf


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8", "int16", "int32"])
def test_neg_and_abs_exact_integers_wrap(dtype: str) -> None:
    dt = NP[dtype]
    rng = np.random.default_rng(4)
    x = rng.integers(-100, 100, SHAPE).astype(dt)
    if dt.kind == "i":
        x[0, 0] = np.iinfo(dt).min
    for op, ref in ((Op.TILE_NEG, lambda v: -v), (Op.TILE_ABS, abs)):
        got = _run_unary(op, dtype, x)
        want = [ref(int(v)) if dt.kind == "i" else ref(float(v)) for v in x.ravel()]
        if dt.kind == "i":  # two's complement wrap: -(-128) and |-128| are -128 in int8
            bits = 8 * dt.itemsize
            want = [(w + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1) for w in want]
        assert got.dtype == dt
        np.testing.assert_array_equal(got.ravel(), np.array(want, dtype=np.float64).astype(dt), err_msg=op.text)


def _div_program(dtype: str, scalar: float | None) -> object:
    pb = ProgramBuilder("div")
    a, b = pb.local("a", dtype, list(SHAPE)), pb.local("b", dtype, list(SHAPE))
    out = pb.local("out", dtype, list(SHAPE))
    fb = pb.function()
    ta = fb.pld.tile.load(a, [0, 0], list(SHAPE), hint="ta")
    if scalar is None:
        r = fb.pld.tile.div(ta, fb.pld.tile.load(b, [0, 0], list(SHAPE), hint="tb"), hint="q")
    else:
        r = fb.pld.tile.divs(ta, scalar, hint="q")
    fb.pld.tile.store(r, [0, 0], out)
    return pb.build()


def _int_div_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([0 if int(d) == 0 else abs(int(n)) // abs(int(d)) * (1 if (n < 0) == (d < 0) else -1)
                     for n, d in zip(a.ravel(), b.ravel(), strict=True)]).reshape(a.shape).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["int16", "int32", "fp16", "fp32"])
def test_div_tiles(dtype: str) -> None:
    dt = NP[dtype]
    rng = np.random.default_rng(6)
    a = rng.integers(-1000, 1000, SHAPE).astype(dt)
    b = rng.integers(-9, 10, SHAPE).astype(dt)
    b[0, :4] = [0, 3, -3, 7]
    a[0, :4] = [5, -7, 7, -7]
    got = run_local(_div_program(dtype, None), {"a": a, "b": b})[0]["out"]
    if dt.kind == "i":
        want = _int_div_ref(a, b)  # truncation toward zero, 0 for a zero divisor
        assert list(got[0, :4]) == [0, -2, -2, -1]
    else:
        with np.errstate(all="ignore"):
            want = _round(a.astype(np.float64) / b.astype(np.float64), dt)
    assert got.dtype == dt
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("dtype", "scalar"), [("fp32", 3.0), ("fp16", -0.1), ("bf16", 7.0), ("int32", -3),
                                               ("int16", 4)])
def test_divs_narrows_the_scalar_to_the_tile_dtype(dtype: str, scalar: float) -> None:
    dt = NP[dtype]
    a = np.random.default_rng(7).integers(-500, 500, SHAPE).astype(dt)
    got = run_local(_div_program(dtype, scalar), {"a": a, "b": a})[0]["out"]
    if dt.kind == "i":
        want = _int_div_ref(a, np.full(SHAPE, scalar, dt))
    else:
        want = _round(a.astype(np.float64) / float(dt.type(scalar)), dt)
    np.testing.assert_array_equal(got, want)


def test_the_valid_box_is_kept_and_only_it_is_stored() -> None:
    pb = ProgramBuilder("box")
    x = pb.local("x", "fp32", list(SHAPE))
    out = pb.local("out", "fp32", list(SHAPE))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(SHAPE), valid_shape=[3, 5], hint="t")
    e = fb.pld.tile.unary(Op.TILE_EXP, t, hint="e")
    assert e.type.valid_shape is not None  # type: ignore[union-attr]
    fb.pld.tile.store(fb.pld.tile.divs(e, 2.0, hint="h"), [0, 0], out)
    program = pb.build()
    xs = np.full(SHAPE, 0.5, np.float32)
    lowered_out = run_local(program, {"x": xs, "out": np.full(SHAPE, -1.0, np.float32)})[0]["out"]
    want = np.full(SHAPE, -1.0, np.float32)
    want[:3, :5] = _round(np.exp(np.float64(0.5)) / 1, np.dtype(np.float32)) / np.float32(2)
    assert _ulps(lowered_out, want).max() <= 1
    assert (lowered_out[3:] == -1).all() and (lowered_out[:, 5:] == -1).all()


def _refusal(dtype: str, body: Callable[[FunctionBuilder, Var], Var]) -> None:
    with pytest.raises(IRTypeError):
        unary_program("bad", dtype, SHAPE, body)


def test_refusals() -> None:
    _refusal("int32", lambda fb, t: fb.pld.tile.unary(Op.TILE_EXP, t))
    _refusal("bf16", lambda fb, t: fb.pld.tile.unary(Op.TILE_LOG, t))
    _refusal("bool", lambda fb, t: fb.pld.tile.unary(Op.TILE_NEG, t))
    _refusal("int8", lambda fb, t: fb.pld.tile.div(t, t))
    _refusal("fp32", lambda fb, t: fb.pld.tile.unary(Op.TILE_RSQRT, t, fb.pld.tile.create([4, 32], "fp16")))
    _refusal("fp32", lambda fb, t: fb.pld.tile.div(t, fb.pld.tile.set_validshape(t, [2, 32])))


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int32", "int8"])
def test_maximums_and_minimums_narrow_the_scalar(dtype: str) -> None:
    dt = NP[dtype]
    x = np.random.default_rng(8).integers(-100, 100, SHAPE).astype(dt)
    if dt.kind != "i":
        x[0, 0] = np.nan
    for op, scalar, ref in ((Op.TILE_MAXIMUMS, -7.3 if dt.kind != "i" else -7, np.fmax),
                            (Op.TILE_MINIMUMS, 20.1 if dt.kind != "i" else 20, np.fmin)):
        program = unary_program(op.text, dtype, SHAPE, lambda fb, t, op=op, scalar=scalar: fb.op(op, [t, scalar]))
        got = run_local(program, {"x": x})[0]["out"]
        s = float(np.array([scalar], np.float64).astype(dt)[0])  # the scalar rounded to the tile's dtype
        want = ref(x.astype(np.float64), s)
        if dt.kind != "i":
            want[0, 0] = np.nan  # a NaN propagates
        np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=op.text)
