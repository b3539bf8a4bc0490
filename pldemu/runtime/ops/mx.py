"""Bit-exact handlers of MX quantisation: tile.tquant_mx_raw, tile.tmov_x2zz, the views, transpose, tuples.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``).

MXFP8 E4M3 (OCP; the PTO ISA's TQUANT and pypto's goldens), per group of 32 elements along the group
axis (axis 1: along a row, axis 0: down a column of the transposed source):

- ``amax`` = max |x| of the group, NaN-propagating (the golden's ``np.max``: one NaN makes the group NaN).
- ``E`` = the FP32 exponent field of amax. B16 sources go through BF16 (FP16 converted with ROUND_Z),
  which never changes the exponent of an FP16 value, so E is the same field for all three sources.
- ``e8m0`` = 0xFF for a NaN group, else ``max(E - 8, 0)`` (emax of E4M3 is 8; Inf gives 247).
- ``scaling`` = 2^(127 - e8m0) (FP32 bits ``(254 - e8m0) << 23``; NaN: 0x7FC00000).
- ``q`` = E4M3(clip(x * scaling, -448, 448)): the product is taken in FP32 (exact: a power of two), the
  conversion rounds to nearest, ties to even, as the golden's ml_dtypes cast does.

Documented choices where the reference is UNCONFIRMED (the golden's behaviour, tested): rounding is
RNE, not the stochastic rounding TQUANT.md mentions; -0 and negative underflow keep their sign (0x80);
a NaN anywhere in a group makes its e8m0 0xFF and every element of the group NaN (0x7F / 0xFF by sign).

Workspaces after the op hold what the hardware leaves: ``max`` the per-group |x| max (B16 sources: the
BF16 bits of it, FP16 converted toward zero), ``scaling`` the per-group 2^(127 - e8m0) (B16 sources: its
BF16 bits, NaN 0x7F81; FP32 "unroll" geometry: each value twice, interleaved). They are written in place:
the raw op is the one tile op with write effects. The x2zz ``tmp`` is left untouched.

A non-ND tile's data holds its bytes in memory order, reshaped to the physical shape, so a store of it
writes the on-chip byte image: ``tmov_x2zz`` puts exponent (m, g) at byte
``((m//16)*(C/2) + g//2)*32 + (m%16)*2 + g%2`` (ND->ZZ; rows m >= R up to align16(R) are zero) and the
DN->ZZ form applies the same map to the transposed [N, M^] exponents; ``transpose_view`` keeps the bytes
and swaps the shape, ``reinterpret_view`` keeps the bytes and changes the dtype.

``tile.dequant_mx`` (a pldemu extension, outside the spec's pass) decodes the public pair back to FP32 by
reading the scale through the same ZZ map (:func:`zz_values`, the inverse of :func:`zz_bytes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu import npdtypes
from pldemu.ir import DType, Op, TileType
from pldemu.ir.mx_signatures import MX_GROUP, ZZ_COLS, ZZ_ROWS, MxGeometry, align
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile

E4M3_MAX = 448.0
_SCALING_NAN_F32 = 0x7FC00000
_SCALING_NAN_B16 = 0x7F81


def _grouped(x: np.ndarray, axis: int) -> np.ndarray:
    """[groups..., 32] view of a [rows, cols] array: axis 1 (m, g, 32), axis 0 (rows/32, cols, 32)."""
    rows, cols = x.shape
    if axis == 1:
        return x.reshape(rows, cols // MX_GROUP, MX_GROUP)
    return x.reshape(rows // MX_GROUP, MX_GROUP, cols).transpose(0, 2, 1)


def _ungrouped(q: np.ndarray, axis: int, shape: tuple[int, int]) -> np.ndarray:
    return q.reshape(shape) if axis == 1 else q.transpose(0, 2, 1).reshape(shape)


def mx_quantise(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(int8 data [rows, cols], uint8 e8m0 per group, amax FP32 per group, scaling FP32 per group)."""
    x32 = x.astype(np.float32)
    grouped = _grouped(x32, axis)
    with np.errstate(invalid="ignore", over="ignore"):
        amax = np.max(np.abs(grouped), axis=-1)
        field = (amax.view(np.uint32) >> 23) & 0xFF
        nan = np.isnan(amax)
        e8m0 = np.where(nan, 0xFF, np.where(field <= 8, 0, field - 8)).astype(np.uint8)
        bits = np.where(nan, _SCALING_NAN_F32, (254 - e8m0.astype(np.uint32)) << 23).astype(np.uint32)
        scaling = bits.view(np.float32)
        y = np.clip(grouped * scaling[..., None], -E4M3_MAX, E4M3_MAX)
    q = y.astype(npdtypes.FLOAT8_E4M3FN).view(np.int8)
    return _ungrouped(q, axis, x.shape), e8m0, amax, scaling


def _b16_bits(values: np.ndarray, nan_bits: int | None) -> np.ndarray:
    """FP32 values as BF16 bit patterns, rounded toward zero (the hardware's FP16 -> BF16 ROUND_Z);
    a NaN becomes ``nan_bits`` when given."""
    bits = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits if nan_bits is None else np.where(np.isnan(values), np.uint16(nan_bits), bits)


def _workspace_values(values: np.ndarray, dtype: np.dtype[Any], nan_bits: int | None) -> np.ndarray:
    """Per-group FP32 values as the workspace dtype holds them (B16: the BF16 bits)."""
    if dtype == np.float32:
        return values.astype(np.float32)
    return _b16_bits(values, nan_bits).view(dtype)


def _write(ws: Tile, values: np.ndarray, axis: int, twice: bool) -> None:
    if axis == 0:
        ws.data[: values.shape[0], : values.shape[1]] = values
        return
    flat = ws.data.reshape(-1)
    v = np.repeat(values.reshape(-1), 2) if twice else values.reshape(-1)
    flat[: min(v.size, flat.size)] = v[: flat.size]


_SRC_DTYPES = {"float32": DType.FP32, "float16": DType.FP16, "bfloat16": DType.BF16}
"""Source dtypes by numpy name (so that loading the handlers does not import ml_dtypes)."""


def _tquant_mx_raw(m: Machine, site: CallSite, args: tuple[Any, ...]) -> tuple[Tile, Tile]:
    src, ws_max, ws_scaling = args[0], args[1], args[2]
    axis = site.attrs["group_axis"]
    q, e8m0, amax, scaling = mx_quantise(src.data, axis)
    dtype = src.data.dtype
    g = MxGeometry(axis, *src.data.shape)
    _write(ws_max, _workspace_values(amax, dtype, None), axis, False)
    _write(ws_scaling, _workspace_values(scaling, dtype, _SCALING_NAN_B16), axis,
           g.scaling_twice(_SRC_DTYPES[dtype.name]))
    exp = e8m0.reshape(g.exp_shape)
    return Tile(q, q.shape), Tile(exp, exp.shape)


def zz_bytes(e: np.ndarray) -> np.ndarray:
    """[R, C] exponents as ZZ bytes [align16(R), C]: 16x2-byte boxes, boxes and bytes row-major."""
    rows, cols = e.shape
    padded = np.zeros((align(rows, ZZ_ROWS), cols), np.uint8)
    padded[:rows] = e
    boxes = padded.reshape(-1, ZZ_ROWS, cols // ZZ_COLS, ZZ_COLS).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(boxes).reshape(padded.shape)


def zz_values(zz: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The inverse of :func:`zz_bytes`: the [rows, cols] exponents (rows % 16 == 0) of a ZZ byte image."""
    boxes = np.ascontiguousarray(zz).reshape(rows // ZZ_ROWS, cols // ZZ_COLS, ZZ_ROWS, ZZ_COLS)
    return boxes.transpose(0, 2, 1, 3).reshape(rows, cols)


def _dequant_mx(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    """pldemu extension: quant * 2^(e8m0 - 127), e8m0 0xFF NaN, rounded once to FP32 (the product is
    exact in float64). Axis 1 reads the [M, K/32] ZZ image; axis 0 the NN [K/32, N] one, whose bytes are
    the ZZ image of the transposed [N, K/32] exponents."""
    quant, scale = args[0].data, np.ascontiguousarray(args[1].data).view(np.uint8)  # the E8M0 bits
    rows, cols = quant.shape
    if site.attrs["group_axis"] == 1:
        e = np.repeat(zz_values(scale, rows, cols // MX_GROUP), MX_GROUP, axis=1)
    else:
        e = np.repeat(zz_values(scale, cols, rows // MX_GROUP).T, MX_GROUP, axis=0)
    value = np.ldexp(quant.astype(np.float64), e.astype(np.int64) - 127)
    with np.errstate(over="ignore"):
        out = np.where(e == 0xFF, np.nan, value).astype(np.float32)
    return Tile(out, out.shape)


def _tmov_x2zz(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    t = site.call.type
    assert isinstance(t, TileType)
    if site.attrs["group_axis"] == 1:
        r, c = site.attrs["dst_rows"], site.attrs["dst_cols"]
        e = src.data.reshape(-1)[: r * c].reshape(r, c)
        zz = zz_bytes(e)
        return Tile(zz, zz.shape)  # every byte of the image is defined (padding rows zero), so all of it is valid
    vr, vc = src.valid
    return Tile(zz_bytes(np.ascontiguousarray(src.data[:vr, :vc].T)), t.shape)


def _reinterpret_view(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    t = site.call.type
    assert isinstance(t, TileType)
    data = np.ascontiguousarray(tile.data).reshape(-1).view(site.attrs["dtype"]).reshape(t.shape)
    return Tile(data, tile.valid if data.shape == tile.data.shape else t.shape)


def _transpose_view(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    rows, cols = tile.data.shape
    return Tile(np.ascontiguousarray(tile.data).reshape(cols, rows), (tile.valid[1], tile.valid[0]))


def _transpose(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    a, b = (int(x) % tile.data.ndim for x in args[1:3])
    valid = list(tile.valid)
    valid[a], valid[b] = valid[b], valid[a]
    return Tile(np.ascontiguousarray(np.swapaxes(tile.data, a, b)), tuple(valid))


def _make_tuple(m: Machine, site: CallSite, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(args)


def _get_item(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    return args[0][site.attrs["index"]]


MX_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_TQUANT_MX_RAW: _tquant_mx_raw,
    Op.TILE_TMOV_X2ZZ: _tmov_x2zz,
    Op.TILE_REINTERPRET_VIEW: _reinterpret_view,
    Op.TILE_TRANSPOSE_VIEW: _transpose_view,
    Op.TILE_TRANSPOSE: _transpose,
    Op.TILE_DEQUANT_MX: _dequant_mx,
    Op.TUPLE_MAKE: _make_tuple,
    Op.TUPLE_GET_ITEM: _get_item,
})
"""Entries of the one handler table (merged there)."""

__all__ = ["MX_HANDLERS", "mx_quantise", "zz_bytes", "zz_values"]
