"""Handlers of the unary tile math, the divisions and the scalar extremes: exp, log, sqrt, rsqrt, recip,
neg, abs, div, divs, maximums, minimums.

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.npdtypes import is_float_dtype, scalar_as
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile


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
})
"""Entries of the one handler table (merged there)."""

__all__ = ["MATH_HANDLERS", "divide"]
