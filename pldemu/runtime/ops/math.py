"""Handlers of the unary tile math, the divisions and the scalar extremes: exp, log, sqrt, rsqrt, recip,
neg, abs, relu, prelu, lrelu, div, divs, fmod, fmods, rem, rems, maximums, minimums, expands, the bitwise ops
and shifts (and, or, xor, not, shl, shr and the scalar ands, ors, xors, shls, shrs) and the partial combines
(part_add, part_mul, part_max, part_min).

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). Like the other tile math,
each op runs over the whole physical tile in the tile's own dtype and the result keeps the input's
(the lhs's) valid box. Numerics (pypto leaves the precision of these ops open):

- FP32: numpy's float32 ufuncs, so every step is rounded to FP32 (never a float64 intermediate).
  ``rsqrt`` is two FP32 steps, ``1 / sqrt(x)``; ``recip`` is one FP32 division ``1 / x``.
- FP16 / BF16: the ufunc of the narrow type (numpy's float16, ml_dtypes' bfloat16), which computes in
  FP32 and rounds the result once to the tile's dtype; ``rsqrt`` rounds after each of its two steps.
- Integers: ``neg`` / ``abs`` wrap in two's complement (``abs(INT32_MIN)`` is ``INT32_MIN``); ``div`` /
  ``divs`` truncate toward zero (C's integer division) and a division by zero gives 0.
- A ``divs`` / ``maximums`` / ``minimums`` scalar is converted to the tile's dtype first, as for ``adds`` /
  ``muls``; ``maximums`` / ``minimums`` propagate a NaN (pypto leaves it open).
- ``relu`` is ``max(x, 0)``, exact (a NaN stays NaN). ``expands`` fills the target's shape with the scalar
  converted to its dtype; the target's values are not read.
- ``fmod`` / ``fmods``: C's ``fmod`` (the remainder takes the dividend's sign, as pypto's docstring and its
  torch reference ``torch.fmod`` say), exact for floats; integers truncate (C's ``%``) and a zero divisor gives
  0 (a float one NaN). pypto's comment on the kernel (tile.fmod in src/ir/op/tile_ops/elementwise.cpp) says it
  divides first, so the device may differ from the exact remainder when the quotient is large.
- Bitwise ops act on the two's complement bits of the tile's dtype; ``shl`` wraps; ``shr`` of a signed type is
  arithmetic (as C's and torch's ``>>``). A shift count outside ``[0, bits)`` is left open by pypto; here it
  gives 0 (-1 for a negative value shifted right), numpy's rule. A tile count of another integer type is
  converted to the lhs's first (wrapping). ``xor`` / ``xors`` ignore pypto's scratch ``tmp``.
- ``rem`` / ``rems`` (pto-isa's TREM / TREMS): the *floored* remainder, with the divisor's sign (pto-isa's TREM
  page: ``src0 - floor(src0 / src1) * src1``, sign corrected to the divider's; pypto's torch reference is
  ``%``), unlike ``fmod``. Computed as A2/A3's kernel computes it (include/pto/npu/a2a3/TRem.hpp, TRemS.hpp),
  each step rounded: FP32 ``r = a - floor(a / b) * b``, then ``r + b`` where ``r * b < 0``; so a zero or
  infinite divisor and an infinite dividend give NaN, and a large quotient loses the exact remainder. INT32
  goes through FP32 (the quotient ``floor(float(a) / float(b))`` to INT32, ``a - q * b`` in INT32, the sign
  fix in FP32, truncated back), exact for operands within 2^24; a zero divisor gives the dividend. The
  float -> int steps saturate as ``tile.cast`` does. ``tmp`` is not read.
- ``prelu`` / ``lrelu`` (TPRELU / TLRELU): ``x > 0 ? x : x * slope``, the product rounded once to the tile's
  dtype (a NaN stays NaN); lrelu's scalar slope is converted to the tile's dtype first. ``tmp`` is not read.
- ``part_add`` / ``part_mul`` / ``part_max`` / ``part_min`` (TPARTADD ...): on the lhs's valid box (the
  result's), ``lhs op rhs`` where the rhs is valid too and the lhs's value where it is not (pto-isa's
  TPARTADD page); the rest of the result is poison, as the device writes only its valid box. max / min
  propagate a NaN, as ``tile.maximum`` does. An rhs valid beyond the lhs's box (pto-isa: implementation-
  defined) is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import CastMode, Op
from pldemu.npdtypes import is_float_dtype, scalar_as
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.ops.tile import cast_array
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile, prefix


def _rsqrt(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return np.divide(one, np.sqrt(x))


def _recip(x: np.ndarray) -> np.ndarray:
    return np.divide(x.dtype.type(1), x)


def divide(a: np.ndarray, b: Any) -> np.ndarray:
    """``a / b`` in ``a``'s dtype: IEEE division for floats; for integers, truncation toward zero and 0 for
    a zero divisor (numpy's floor division rounds toward minus infinity, so it is corrected)."""
    if is_float_dtype(a.dtype):
        return np.asarray(np.divide(a, b), a.dtype)
    b = np.asarray(b, a.dtype)
    safe = np.where(b == 0, b.dtype.type(1), b)
    q = np.floor_divide(a, safe)
    inexact = (np.remainder(a, safe) != 0) & ((a < 0) != (safe < 0))
    q = np.where(inexact, q + a.dtype.type(1), q)
    return np.asarray(np.where(b == 0, a.dtype.type(0), q), a.dtype)


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Handler:
    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        return Tile(np.asarray(fn(tile.data), tile.data.dtype), tile.valid)

    return handler


def _div(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    return Tile(divide(lhs.data, args[1].data), lhs.valid)


def _with_scalar(fn: Callable[[np.ndarray, Any], np.ndarray]) -> Handler:
    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        return Tile(np.asarray(fn(tile.data, scalar_as(tile.data.dtype, args[1])), tile.data.dtype), tile.valid)

    return handler


def fmod(a: np.ndarray, b: Any) -> np.ndarray:
    """C's ``fmod`` in ``a``'s dtype: the remainder with the dividend's sign; an integer zero divisor gives 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.fmod(a, np.asarray(b, a.dtype)), a.dtype)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _with_tile(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Handler:
    """A tile-tile op whose rhs is taken in the lhs's dtype (a shift's count tile may be any integer type);
    a third argument (xor's scratch) is not read."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        lhs: Tile = args[0]
        rhs = args[1].data.astype(lhs.data.dtype, copy=False)
        return Tile(np.asarray(fn(lhs.data, rhs), lhs.data.dtype), lhs.valid)

    return handler


def _expands(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    target: Tile = args[0]
    dtype = target.data.dtype
    return Tile(np.full(target.data.shape, scalar_as(dtype, args[1]), dtype), target.valid)


_F32, _I32 = np.dtype(np.float32), np.dtype(np.int32)


def _rem_f32(a: np.ndarray, b: Any) -> np.ndarray:
    """A2/A3's FP32 TREM / TREMS: vdiv, floor, vmul, vsub, then the sign fix ``r + b`` where ``r * b < 0``."""
    with np.errstate(all="ignore"):
        r = np.subtract(a, np.multiply(np.floor(np.divide(a, b)), b))
        return np.where(np.multiply(r, b) < 0, np.add(r, b), r)


def _rem_i32(a: np.ndarray, b: Any, by: Any) -> np.ndarray:
    """A2/A3's INT32 TREM / TREMS: the quotient floored in FP32, ``a - q * by`` in INT32 (``by``: TREM's divisor
    back from FP32, TREMS's scalar itself), the sign fix in FP32, truncated back to INT32."""
    bf = np.asarray(b).astype(_F32)
    with np.errstate(all="ignore"):
        af = a.astype(_F32)
        q = cast_array(np.asarray(np.divide(af, bf)), _I32, CastMode.FLOOR)
        r = (cast_array(af, _I32, CastMode.RINT) - q * by).astype(_F32)
        return cast_array(np.where(np.multiply(r, bf) < 0, np.add(r, bf), r), _I32, CastMode.TRUNC)


def rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """pto-isa's TREM of FP32 or INT32 arrays (see the module docstring)."""
    if a.dtype == _F32:
        return _rem_f32(a, b)
    return _rem_i32(a, b, cast_array(b.astype(_F32), _I32, CastMode.RINT))


def rems(a: np.ndarray, x: Any) -> np.ndarray:
    """pto-isa's TREMS of an FP32 or INT32 array and a scalar of its dtype."""
    return _rem_f32(a, x) if a.dtype == _F32 else _rem_i32(a, x, x)


def _rem(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    rhs: Tile = args[1]
    if lhs.valid != rhs.valid:  # static boxes are checked by the deducer; a run-time one here
        raise ProgramError(f"tile.rem: lhs valid box {list(lhs.valid)} and rhs's {list(rhs.valid)} differ "
                           "(pto-isa's TREM needs src0, src1 and dst of one valid shape)")
    return Tile(rem(lhs.data, rhs.data), lhs.valid)


def _prelu(x: np.ndarray, slope: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, np.multiply(x, slope))


def _partial(fn: np.ufunc) -> Handler:
    """TPARTADD ...: the lhs's valid box, ``fn`` where the rhs is valid too, the lhs's value elsewhere."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        lhs: Tile = args[0]
        rhs: Tile = args[1]
        if any(r > v for r, v in zip(rhs.valid, lhs.valid, strict=True)):
            raise ProgramError(f"{site.op.text}: rhs valid box {list(rhs.valid)} runs past lhs's {list(lhs.valid)}, "
                               "the result's (pto-isa leaves a source valid beyond dst implementation-defined)")
        out = m.poison.array(lhs.data.shape, lhs.data.dtype)
        box, both = prefix(lhs.valid), prefix(rhs.valid)
        out[box] = lhs.data[box]
        with np.errstate(all="ignore"):
            out[both] = fn(lhs.data[both], rhs.data[both])
        return Tile(out, lhs.valid)

    return handler


_BITWISE: Mapping[str, Callable[[np.ndarray, Any], np.ndarray]] = MappingProxyType({
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "shl": np.left_shift,
    "shr": np.right_shift,
})
"""The bitwise ops and shifts by pypto's name; ``<name>s`` is the scalar form."""

MATH_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_EXP: _unary(np.exp),
    Op.TILE_LOG: _unary(np.log),
    Op.TILE_SQRT: _unary(np.sqrt),
    Op.TILE_RSQRT: _unary(_rsqrt),
    Op.TILE_RECIP: _unary(_recip),
    Op.TILE_NEG: _unary(np.negative),
    Op.TILE_ABS: _unary(np.abs),
    Op.TILE_DIV: _div,
    Op.TILE_DIVS: _with_scalar(divide),
    Op.TILE_MAXIMUMS: _with_scalar(np.maximum),
    Op.TILE_MINIMUMS: _with_scalar(np.minimum),
    Op.TILE_RELU: _unary(_relu),
    Op.TILE_FMOD: _with_tile(fmod),
    Op.TILE_FMODS: _with_scalar(fmod),
    Op.TILE_EXPANDS: _expands,
    Op.TILE_NOT: _unary(np.invert),
    Op.TILE_REM: _rem,
    Op.TILE_REMS: _with_scalar(rems),
    Op.TILE_PRELU: _with_tile(_prelu),
    Op.TILE_LRELU: _with_scalar(_prelu),
    Op.TILE_PART_ADD: _partial(np.add),
    Op.TILE_PART_MUL: _partial(np.multiply),
    Op.TILE_PART_MAX: _partial(np.maximum),
    Op.TILE_PART_MIN: _partial(np.minimum),
    **{Op(f"tile.{name}"): _with_tile(fn) for name, fn in _BITWISE.items()},
    **{Op(f"tile.{name}s"): _with_scalar(fn) for name, fn in _BITWISE.items()},
})
"""Entries of the one handler table (merged there)."""

__all__ = ["MATH_HANDLERS", "divide", "fmod", "rem", "rems"]
