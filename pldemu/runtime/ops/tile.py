"""Exact handlers of the tile-math and select primitives: cast (every round mode), cmp/cmps, sel/sels.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). Every result is computed
in, and rounded once to, the destination dtype: no silent float64 results.

Cast semantics (PTO-ISA RoundMode numbering):

- float -> float: ``None``/``RINT`` round to nearest, ties to even; ``ROUND`` nearest, ties away from
  zero; ``FLOOR``/``CEIL``/``TRUNC`` directed; ``ODD`` round-to-odd. NaN stays NaN, Inf stays Inf.
- float -> integer: ``RINT`` ties to even, ``ROUND`` ties away from zero, ``FLOOR``, ``CEIL``,
  ``TRUNC``; ``None`` truncates like the C++ cast; ``ODD`` takes the odd neighbour of an inexact value.
  The reference leaves overflow and NaN open; pldemu follows the device's default (SaturationMode ON):
  out-of-range values saturate to the integer type's min/max, and **NaN becomes 0**.
- integer -> float: exact when representable, else rounded by the mode as for float -> float.
- integer -> integer: two's-complement wrap (mode ignored).

Masks are the packed predicate: bit b of byte (r, w) is the predicate of element (r, 8w + b); bytes
and bits outside the valid region are 0. sel/sels write only the result's valid region; the rest of
the fresh tile is poison, like any fresh tile.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import (
    CastMode,
    CmpType,
    Op,
    PadValue,
    TileType,
)
from pldemu.npdtypes import is_float_dtype, scalar_as
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import (
    Shape,
    TensorRef,
    Tile,
    check_valid,
    prefix,
    region,
)

_COMPARE: Mapping[CmpType, Callable[[Any, Any], np.ndarray]] = MappingProxyType({
    CmpType.EQ: operator.eq, CmpType.NE: operator.ne, CmpType.LT: operator.lt,
    CmpType.LE: operator.le, CmpType.GT: operator.gt, CmpType.GE: operator.ge,
})
"""IEEE comparisons: an unordered (NaN) pair is false for all but NE."""


# ---------------------------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------------------------


def _round_to_int(x: np.ndarray, mode: CastMode) -> np.ndarray:
    """Round a float64 array to integral float64 values by ``mode`` (exact: no FP32 value is lost)."""
    if mode is CastMode.RINT:
        return np.rint(x)
    if mode is CastMode.ROUND:
        return np.sign(x) * np.floor(np.abs(x) + 0.5)
    if mode is CastMode.FLOOR:
        return np.floor(x)
    if mode is CastMode.CEIL:
        return np.ceil(x)
    if mode is CastMode.ODD:
        lo = np.floor(x)
        return np.where((lo == x) | (np.fmod(lo, 2) != 0), lo, lo + 1)
    return np.trunc(x)  # TRUNC and None


def _float_to_int(x: np.ndarray, dst: np.dtype[Any], mode: CastMode) -> np.ndarray:
    r = _round_to_int(x.astype(np.float64), mode)
    info = np.iinfo(dst)
    r = np.where(np.isnan(r), 0.0, np.clip(r, float(info.min), float(info.max)))
    # float(INT64 max) is 2**63, one past the range: the conversion would wrap it to INT64 min.
    with np.errstate(invalid="ignore"):
        return np.where(r >= float(info.max), info.max, r.astype(dst)).astype(dst)


def _bits_odd(v: np.ndarray) -> np.ndarray:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[v.dtype.itemsize]
    return (v.view(width) & 1) == 1


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` exactly as the float64 sum ``hi + lo``: an INT64 beyond 2**53 loses bits in one float64, so
    its low 11 bits go to ``lo`` (``hi`` then has at most 53 significant bits); any other source is exact."""
    if x.dtype != np.int64:
        return x.astype(np.float64), np.zeros(x.shape)
    low = x & 2047
    return (x - low).astype(np.float64), low.astype(np.float64)


def _to_float(x: np.ndarray, dst: np.dtype[Any], mode: CastMode) -> np.ndarray:
    """Round ``x`` to the float type ``dst`` by ``mode``; every distance is exact in float64 (Sterbenz: the
    bracket lies within a factor of two of ``x``)."""
    if mode in (CastMode.None_, CastMode.RINT) and is_float_dtype(x.dtype):
        return x.astype(dst)  # float -> float nearest-even is numpy's / ml_dtypes' own (single) rounding
    hi_x, lo_x = _split(x)
    y = x.astype(dst)
    y64 = y.astype(np.float64)
    with np.errstate(invalid="ignore"):
        lo = np.where((y64 - hi_x) - lo_x > 0, np.nextafter(y, np.array(-np.inf, dst)), y)
        lo64 = lo.astype(np.float64)
        below = (hi_x - lo64) + lo_x
        exact = below == 0
        hi = np.where(exact, lo, np.nextafter(lo, np.array(np.inf, dst)))
        hi64 = hi.astype(np.float64)
        above = (hi64 - hi_x) - lo_x
    if mode is CastMode.FLOOR:
        out = lo
    elif mode is CastMode.CEIL:
        out = hi
    elif mode is CastMode.TRUNC:
        out = np.where(hi_x >= 0, lo, hi)
    elif mode is CastMode.ODD:
        out = np.where(_bits_odd(lo), lo, hi)
    else:
        tie_pick = np.where(np.abs(hi64) > np.abs(lo64), hi, lo) if mode is CastMode.ROUND else (
            np.where(_bits_odd(lo), hi, lo))
        out = np.where(below < above, lo, np.where(above < below, hi, tie_pick))
    # Exact, NaN and Inf keep the cast; so does a nearest-mode overflow (the bracket's hi is Inf there).
    overflow = np.isinf(y64) & ~np.isinf(hi_x) & (mode in (CastMode.None_, CastMode.RINT, CastMode.ROUND))
    out = np.where(exact | np.isnan(hi_x) | np.isinf(hi_x) | overflow, y, out)
    return np.asarray(out, dtype=dst)


def cast_array(x: np.ndarray, dst: np.dtype[Any], mode: CastMode) -> np.ndarray:
    """``x`` converted to ``dst`` with round mode ``mode`` (see the module docstring)."""
    if is_float_dtype(dst):
        if is_float_dtype(x.dtype) and x.dtype.itemsize < dst.itemsize:
            return x.astype(dst)  # widening is exact
        return _to_float(x, dst, mode)
    if is_float_dtype(x.dtype):
        return _float_to_int(x, dst, mode)
    return x.astype(dst)


def _cast(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    return Tile(cast_array(tile.data, site.attrs["dtype"], site.attrs["mode"]), tile.valid)


# ---------------------------------------------------------------------------------------------
# Packed predicate masks
# ---------------------------------------------------------------------------------------------


def _mask(m: Machine, site: CallSite, lhs: Tile, pred: np.ndarray) -> Tile:
    """Pack ``pred`` (the valid region's predicate) LSB-first into a zeroed mask of the result type."""
    t = site.call.type
    assert isinstance(t, TileType)
    out = np.zeros(t.shape, np.uint8)
    packed = np.packbits(pred, axis=-1, bitorder="little")
    valid = (*lhs.valid[:-1], packed.shape[-1])
    out[prefix(valid)] = packed
    return Tile(out, valid)


def _cmp(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    box = prefix(lhs.valid)
    with np.errstate(invalid="ignore"):
        pred = _COMPARE[site.attrs["cmp_type"]](lhs.data[box], args[1].data[box])
    return _mask(m, site, lhs, pred)


def _cmps(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    box = prefix(lhs.valid)
    scalar = lhs.data.dtype.type(args[1])  # narrowed to the tile's dtype, like adds/muls
    with np.errstate(invalid="ignore"):
        pred = _COMPARE[site.attrs["cmp_type"]](lhs.data[box], scalar)
    return _mask(m, site, lhs, pred)


def mask_bits(mask: np.ndarray, valid: tuple[int, ...]) -> np.ndarray:
    """The predicate of the ``valid`` element box, unpacked LSB-first from a packed mask."""
    n = valid[-1]
    rows = tuple(slice(0, v) for v in valid[:-1])
    carrier = mask[(*rows, slice(0, -(-n // 8)))]
    return np.unpackbits(carrier, axis=-1, count=n, bitorder="little").astype(bool)


def _select_into(m: Machine, like: Tile, pred: np.ndarray, on_true: np.ndarray, on_false: Any) -> Tile:
    out = m.poison.array(like.data.shape, like.data.dtype)
    box = prefix(like.valid)
    out[box] = np.where(pred, on_true[box], on_false)
    return Tile(out, like.valid)


def _sel(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    mask: Tile = args[0]
    lhs: Tile = args[1]
    rhs: Tile = args[2]
    return _select_into(m, lhs, mask_bits(mask.data, lhs.valid), lhs.data, rhs.data[prefix(lhs.valid)])


def _sels(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    mask: Tile = args[0]
    src: Tile = args[1]
    scalar = scalar_as(src.data.dtype, args[3])  # an unsigned source's signed scalar keeps its bits (pypto's TSELS)
    return _select_into(m, src, mask_bits(mask.data, src.valid), src.data, scalar)


def _full(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    shape = args[0]
    dtype = site.attrs["dtype"]
    value = args[1]
    data = np.full(shape, dtype.type(value) if is_float_dtype(dtype) else value, dtype)
    return Tile(data, tuple(args[2]) if len(args) > 2 else shape)


# ---------------------------------------------------------------------------------------------
# Tiles
# ---------------------------------------------------------------------------------------------


def _create(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    shape: Shape = args[0]
    return Tile(m.poison.array(shape, site.attrs["dtype"]), shape)


def _load(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    t: TensorRef = args[0]
    shape: Shape = args[2]
    valid = check_valid("tile.load", args[3], shape) if len(args) > 3 else shape
    src = t.array[region("tile.load", m.rank, m.rank, t.buffer, t.shape, args[1], valid)]
    if valid == shape:
        return Tile(src.copy(), shape)
    data = m.poison.array(shape, src.dtype)
    data[prefix(valid)] = src
    return Tile(data, valid)


def _store(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    tile: Tile = args[0]
    t: TensorRef = args[2]
    valid = tile.valid
    data = tile.data if valid == tile.data.shape else tile.data[prefix(valid)]
    at = region("tile.store", m.rank, m.rank, t.buffer, t.shape, args[1], valid)
    if not site.attrs.get("atomic", False):
        t.array[at] = data
    elif t.buffer.window is not None:  # a window: atomic with respect to peers' atomic puts into it too
        t.buffer.window.put(m.rank, t.shape, args[1], np.asarray(data), True)
    else:  # pl.assemble(..., atomic=Add): the device's atomic-add store, element-wise in the target's dtype
        t.array[at] += data.astype(t.array.dtype, copy=False)


def _set_validshape(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    return Tile(tile.data, check_valid("tile.set_validshape", args[1], tile.data.shape))


def pad_value(pad: PadValue, dtype: np.dtype[Any]) -> Any:
    """What ``tile.fillpad`` (and ``tile.fillpad_expand``) fill with: 0, or the dtype's extreme as the device
    writes it (pto-isa's pad-value table: +-inf for FP32 / FP16 / BF16, the integer range's ends for integers)."""
    if pad is PadValue.zero:
        return 0
    if is_float_dtype(dtype):
        return np.inf if pad is PadValue.max else -np.inf
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if pad is PadValue.max else info.min
    return pad is PadValue.max


def _fillpad(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    shape = tile.data.shape
    if tile.valid == shape:
        return tile
    out = np.full(shape, pad_value(site.attrs["pad"], tile.data.dtype), tile.data.dtype)
    box = prefix(tile.valid)
    out[box] = tile.data[box]
    return Tile(out, shape)


def _binary(ufunc: np.ufunc) -> Handler:
    """Element-wise over the whole physical tile in the tile's dtype; the result keeps lhs's valid shape."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        lhs: Tile = args[0]
        return Tile(ufunc(lhs.data, args[1].data), lhs.valid)

    return handler


def _scalar(ufunc: np.ufunc) -> Handler:
    """Tile-scalar op; the scalar is converted to the tile's dtype first (FP16 math stays FP16; an integer
    scalar wraps, as pypto narrows it at run time)."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        return Tile(ufunc(tile.data, scalar_as(tile.data.dtype, args[1])), tile.valid)

    return handler


TILE_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_CREATE: _create,
    Op.TILE_LOAD: _load,
    Op.TILE_STORE: _store,
    Op.TILE_SET_VALIDSHAPE: _set_validshape,
    Op.TILE_FILLPAD: _fillpad,
    Op.TILE_ADD: _binary(np.add),
    Op.TILE_SUB: _binary(np.subtract),
    Op.TILE_MUL: _binary(np.multiply),
    Op.TILE_MAXIMUM: _binary(np.maximum),
    Op.TILE_MINIMUM: _binary(np.minimum),
    Op.TILE_ADDS: _scalar(np.add),
    Op.TILE_MULS: _scalar(np.multiply),
    Op.TILE_CAST: _cast,
    Op.TILE_CMP: _cmp,
    Op.TILE_CMPS: _cmps,
    Op.TILE_SEL: _sel,
    Op.TILE_SELS: _sels,
    Op.TILE_FULL: _full,
})
"""Entries of the one handler table (merged there)."""

__all__ = ["TILE_HANDLERS", "cast_array", "mask_bits", "pad_value"]
