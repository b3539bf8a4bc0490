"""Every cast pair pypto accepts, in every round mode, against an independent reference; the pairs pypto
refuses; and the integer types' wrap-around through the scalar-operand tile ops and scalar stores.

The reference rounds each element exactly (``fractions.Fraction``) to the neighbours found in the full
sorted list of a 16-bit float type's values (every bit pattern) or by ``nextafter`` for FP32, by each
mode's rule, and applies pypto's chain hop by hop (the chains' lengths are those of pypto's
docs/en/dev/passes/14-legalize_tile_cast.md tables, transcribed below)."""

from __future__ import annotations

import bisect
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local, unary_program

from pldemu.ir import DType
from pldemu.ir.cast_paths import cast_chain

D = DType
TYPES = (D.BF16, D.FP16, D.FP32, D.INT8, D.UINT8, D.INT16, D.UINT16, D.INT32, D.UINT32, D.INT64)
MODES = ("None", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD")

# pypto's docs tables: the legalized chains' lengths (a pair in neither column is refused; native = 1).
_DOC_A2A3 = {
    D.BF16: {D.FP32: 1, D.INT32: 1, D.FP16: 2, D.INT16: 2, D.INT8: 3, D.UINT8: 3},
    D.FP16: {D.FP32: 1, D.INT16: 1, D.INT32: 1, D.INT8: 1, D.UINT8: 1, D.BF16: 2},
    D.FP32: {D.BF16: 1, D.FP16: 1, D.INT16: 1, D.INT32: 1, D.INT64: 1, D.INT8: 2, D.UINT8: 2},
    D.INT16: {D.FP16: 1, D.FP32: 1, D.BF16: 2, D.INT8: 2, D.UINT8: 2},
    D.INT32: {D.FP16: 1, D.FP32: 1, D.INT16: 1, D.INT64: 1, D.BF16: 2, D.INT8: 2, D.UINT8: 2},
    D.INT64: {D.FP32: 1, D.INT32: 1, D.BF16: 2, D.FP16: 2, D.INT16: 2, D.INT8: 3, D.UINT8: 3},
    D.INT8: {D.FP16: 1, D.UINT8: 2},
    D.UINT8: {D.FP16: 1, D.INT8: 2},
}
_DOC_A5 = {
    D.BF16: {D.FP16: 1, D.FP32: 1, D.INT32: 1, D.INT16: 2, D.INT8: 2, D.UINT16: 2, D.UINT8: 2},
    D.FP16: {D.FP32: 1, D.INT16: 1, D.INT32: 1, D.INT8: 1, D.UINT8: 1, D.BF16: 2, D.UINT16: 2},
    D.FP32: {D.BF16: 1, D.FP16: 1, D.INT16: 1, D.INT32: 1, D.INT64: 1, D.INT8: 2, D.UINT16: 2, D.UINT8: 2},
    D.INT16: {D.FP16: 1, D.FP32: 1, D.INT32: 1, D.UINT32: 1, D.UINT8: 1, D.BF16: 2, D.INT8: 2, D.UINT16: 2},
    D.INT32: {D.FP32: 1, D.INT16: 1, D.INT64: 1, D.UINT16: 1, D.UINT8: 1, D.BF16: 2, D.FP16: 2, D.INT8: 3},
    D.INT64: {D.FP32: 1, D.INT32: 1, D.BF16: 2, D.FP16: 2, D.INT16: 2, D.UINT16: 2, D.UINT8: 2, D.INT8: 3},
    D.INT8: {D.FP16: 1, D.INT16: 1, D.INT32: 1, D.UINT16: 2, D.UINT8: 2},
    D.UINT32: {D.INT16: 1, D.UINT16: 1, D.UINT8: 1, D.INT8: 3},
    D.UINT8: {D.FP16: 1, D.UINT16: 1, D.INT8: 2},
}


@pytest.mark.parametrize(("arch", "doc"), [("a2a3", _DOC_A2A3), ("a5", _DOC_A5)])
def test_chain_lengths_and_refusals_are_pyptos_tables(arch: str, doc: dict[DType, dict[DType, int]]) -> None:
    for src in TYPES:
        for dst in TYPES:
            if src is dst:
                continue
            chain = cast_chain(src, dst, arch)
            want = doc.get(src, {}).get(dst)
            assert (None if chain is None else len(chain)) == want, (arch, src, dst, chain)


def test_chains_take_pyptos_preferred_route() -> None:
    assert cast_chain(D.BF16, D.INT8) == (D.FP32, D.FP16, D.INT8)  # float widths first, then the int hop
    assert cast_chain(D.INT64, D.INT16) == (D.FP32, D.INT16)  # the first found of two equal-cost routes
    assert cast_chain(D.UINT32, D.FP32, "a5") is None  # the INT16 bridge would narrow: refused
    assert cast_chain(D.BF16, D.INT64) is None  # every bridge narrows INT64's 63 bits


# ---------------------------------------------------------------------------------------------
# The independent reference
# ---------------------------------------------------------------------------------------------

def _all_values(np_dtype: np.dtype) -> list[float]:  # type: ignore[type-arg]
    with np.errstate(invalid="ignore"):
        v = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np_dtype).astype(np.float64)
    return sorted(set(v[np.isfinite(v)].tolist()))


_TABLES = {D.FP16: _all_values(np.dtype(np.float16)), D.BF16: _all_values(np.dtype(ml_dtypes.bfloat16))}


def _neighbours(x: Fraction, dst: DType) -> tuple[float, float]:
    """The largest value of ``dst`` at or below ``x`` and the smallest at or above; past the largest finite
    value the next one is infinity (IEEE's overflow rule: it rounds as if at max + 1 ulp)."""
    if dst in _TABLES:
        table = _TABLES[dst]
    else:
        c = np.float32(float(x))
        table = sorted(float(v) for v in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))))
    i = bisect.bisect_right(table, x)  # bisect compares floats and Fractions exactly
    lo = table[i - 1] if i > 0 else -np.inf
    hi = lo if lo == x else (table[i] if i < len(table) else np.inf)
    return lo, hi


def _odd(v: float, dst: DType) -> bool:
    return bool(int(np.array(v, dst.np).view({2: np.uint16, 4: np.uint32}[dst.itemsize])) & 1)


def _beyond(v: float, dst: DType) -> Fraction:
    """Where a neighbour sits for the nearest modes: infinity as max finite + 1 ulp."""
    if np.isfinite(v):
        return Fraction(v)
    big = float(ml_dtypes.finfo(dst.np).max) if dst is D.BF16 else float(np.finfo(dst.np).max)
    ulp = big - float(np.nextafter(np.array(big, dst.np), np.array(0, dst.np)))
    return Fraction(big + ulp) * (1 if v > 0 else -1)


def _round_float(x: Fraction, dst: DType, mode: str) -> float:
    lo, hi = _neighbours(x, dst)
    if lo == hi:
        return lo
    pick = {"FLOOR": lo, "CEIL": hi, "TRUNC": lo if x > 0 else hi, "ODD": lo if _odd(lo, dst) else hi}
    if mode in pick:
        return pick[mode]
    d_lo, d_hi = x - _beyond(lo, dst), _beyond(hi, dst) - x
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    if mode == "ROUND":
        return hi if x > 0 else lo
    return hi if _odd(lo, dst) else lo  # RINT / None: ties to even


def _round_int(x: Fraction, mode: str) -> int:
    fl = x.numerator // x.denominator
    if fl == x:
        return fl
    frac = x - fl
    return {"FLOOR": fl, "CEIL": fl + 1, "TRUNC": fl if x > 0 else fl + 1, "None": fl if x > 0 else fl + 1,
            "ODD": fl if fl % 2 else fl + 1,
            "ROUND": fl + (frac >= Fraction(1, 2) if x > 0 else frac > Fraction(1, 2)),
            "RINT": fl + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1))}[mode]


def _hop(v: float | int, src: DType, dst: DType, mode: str) -> float | int:
    """One native conversion of one element: floats round by ``mode``; a float to an integer saturates and
    NaN is 0 (pldemu's device default); an integer to an integer wraps."""
    if dst.is_float:
        if isinstance(v, float) and not np.isfinite(v):
            return v
        return _round_float(Fraction(v), dst, mode)
    lo, hi = dst.int_range()
    if src.is_float:
        if np.isnan(v):
            return 0
        if np.isinf(v):
            return hi if v > 0 else lo
        return min(max(_round_int(Fraction(v), mode), lo), hi)
    return (int(v) - lo) % (hi - lo + 1) + lo


def _reference(x: np.ndarray, src: DType, chain: tuple[DType, ...], mode: str) -> np.ndarray:
    out = []
    for e in x.ravel().tolist():
        v: float | int = float(e) if src.is_float else int(e)
        cur = src
        for hop in chain:
            v, cur = _hop(v, cur, hop, mode), hop
        out.append(v)
    return np.array(out, np.float64 if chain[-1].is_float else np.int64).astype(chain[-1].np).reshape(x.shape)


def _inputs(src: DType) -> np.ndarray:
    rng = np.random.default_rng(7)
    if src.is_int:
        lo, hi = src.int_range()
        edges = [lo, lo + 1, hi - 1, hi, 0, 1, -1, 127, 128, 255, 256, 65504, 65520, 2**24 + 1, -(2**24) - 3,
                 2**31 - 1, 2**53 + 1]
        body = rng.integers(lo, hi, 96, endpoint=True, dtype=np.int64 if src is not D.UINT32 else np.uint64)
        edge = np.array([e for e in edges if lo <= e <= hi], np.int64 if src is not D.UINT32 else np.uint64)
        vals = np.concatenate([edge, body.astype(edge.dtype)])
    else:
        edges = [0.5, 1.5, 2.5, -0.5, -2.5, 127.5, -128.5, 255.5, 256.0, -1e-3, 65504.0, 65520.0, 70000.0, -7e4,
                 3e9, -3e9, 1e20, np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0 + 2.0**-9, 1.0 + 3 * 2.0**-12,
                 2.0**-20, 33.25, -33.75]
        body = np.concatenate([rng.uniform(-300, 300, 64), rng.normal(0, 1, 32) * 10.0 ** rng.integers(-6, 6, 32)])
        vals = np.concatenate([np.array(edges), body])
    vals = vals[:128]
    if vals.size < 128:
        vals = np.concatenate([vals, np.zeros(128 - vals.size, vals.dtype)])
    with np.errstate(all="ignore"):
        return vals.astype(src.np).reshape(4, 32)


_PAIRS = [(s, d) for s in TYPES for d in TYPES if s is not d and cast_chain(s, d) is not None]


@pytest.mark.parametrize(("src", "dst"), _PAIRS, ids=[f"{s.value}-{d.value}" for s, d in _PAIRS])
def test_every_accepted_pair_in_every_mode_matches_the_reference(src: DType, dst: DType) -> None:
    chain = cast_chain(src, dst)
    assert chain is not None
    x = _inputs(src)
    for mode in MODES:
        def body(fb, t, mode=mode):  # type: ignore[no-untyped-def]
            for hop in chain:
                t = fb.pld.tile.cast(t, hop.value, mode=mode)
            return t

        (got,) = run_local(unary_program("cast", src.value, x.shape, body, out_dtype=dst.value), {"x": x})
        want = _reference(x, src, chain, mode)
        same = (got["out"] == want) | (np.isnan(got["out"].astype(np.float64)) & np.isnan(want.astype(np.float64)))
        bad = np.argwhere(~same)
        assert bad.size == 0, (mode, [(x[tuple(i)], got["out"][tuple(i)], want[tuple(i)]) for i in bad[:4]])
