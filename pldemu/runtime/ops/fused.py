"""Handlers of pypto's fused and generator tile ops: tile.addc, tile.addsc, tile.tri, tile.fillpad_expand, and the
cube's tile.matmul_bias, tile.gemv, tile.gemv_acc, tile.gemv_bias.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). Numerics:

- ``addc`` / ``addsc`` (pto-isa's TADDC / TADDSC): ``(lhs + rhs) + rhs2`` and ``(lhs + scalar) + rhs2``, **two
  additions, each rounded** to the tile's dtype (A5's kernel: TADD then TADD, TADDS then TADD; pto-isa has no
  A2/A3 kernel), integers wrapping; the scalar is converted to the tile's dtype first (TADDSC takes it so).
  Over the whole physical tile; the result keeps lhs's valid box, as for ``tile.add``.
- ``tri`` (TTRI): 1 where ``j <= i + diagonal`` (lower) or ``j >= i + diagonal`` (upper), else 0, over the valid
  box; the rest of the tile is not written (poison), as pypto's docstring says.
- ``fillpad_expand`` (TFILLPAD_EXPAND): the source's valid box copied to the top left of the larger tile, every
  other cell the pad (``tile.fillpad``'s values: 0, or the dtype's extreme: +-inf for floats).
- ``matmul_bias`` / ``gemv_bias``: the bias row plus the exact product, rounded (or wrapped) once to the
  accumulator, as ``tile.matmul_acc`` adds to an accumulator the bias started (the cube loads the bias into its
  accumulator before multiplying); ``gemv`` / ``gemv_acc`` are ``matmul`` / ``matmul_acc`` of the one lhs row,
  written into row 0 of the ``[16, N]`` result (rows 1 .. 15 are not written).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.ir.fused_signatures import GEMV_ROWS
from pldemu.npdtypes import is_float_dtype, scalar_as
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.ops.matmul import exact_product, to_accumulator
from pldemu.runtime.ops.tile import pad_value
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile, prefix


def _addc(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    with np.errstate(all="ignore"):
        return Tile(np.add(np.add(lhs.data, args[1].data), args[2].data), lhs.valid)


def _addsc(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    with np.errstate(all="ignore"):
        return Tile(np.add(np.add(lhs.data, scalar_as(lhs.data.dtype, args[1])), args[2].data), lhs.valid)


def triangle(rows: int, cols: int, diagonal: int, upper: bool) -> np.ndarray:
    """TTRI's 0 / 1 mask of ``rows`` x ``cols`` (bool): ``j <= i + diagonal`` below, ``j >= i + diagonal`` above."""
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    return j >= i + diagonal if upper else j <= i + diagonal


def _tri(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    shape: tuple[int, ...] = tuple(args[1])
    valid: tuple[int, ...] = tuple(args[2]) if len(args) > 2 else shape
    dtype = site.attrs["dtype"]
    out = m.poison.array(shape, dtype)
    out[prefix(valid)] = triangle(valid[0], valid[1], int(args[0]), bool(site.attrs["upper"])).astype(dtype)
    return Tile(out, valid)


def _fillpad_expand(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    shape: tuple[int, ...] = tuple(args[1])
    out = np.full(shape, pad_value(site.attrs["pad"], src.data.dtype), src.data.dtype)
    box = prefix(src.valid)
    out[box] = src.data[box]
    return Tile(out, shape)


def _accumulator(lhs: Tile) -> np.dtype[Any]:
    return np.dtype(np.float32) if is_float_dtype(lhs.data.dtype) else np.dtype(np.int32)


def _product(lhs: Tile, rhs: Tile, bias: Tile | None) -> np.ndarray:
    """The exact product over the computed box, plus the bias row when given (exact in float64 / int64)."""
    product = exact_product(lhs, rhs)
    if bias is not None:
        product = product + bias.data[0:1, :product.shape[-1]].astype(product.dtype)
    return product


def _with_bias(rows: int | None) -> Handler:
    """matmul_bias (``rows`` None: the product's physical rows) and gemv / gemv_bias (``rows``: GEMV_ROWS)."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        lhs: Tile = args[0]
        rhs: Tile = args[1]
        dtype = _accumulator(lhs)
        product = _product(lhs, rhs, args[2] if len(args) > 2 else None)
        out = m.poison.array((lhs.data.shape[0] if rows is None else rows, rhs.data.shape[1]), dtype)
        out[:product.shape[0], :product.shape[1]] = to_accumulator(product, dtype)
        return Tile(out, (lhs.valid[0], rhs.valid[1]))

    return handler


def _gemv_acc(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    acc: Tile = args[0]
    product = exact_product(args[1], args[2])
    box = prefix(product.shape)
    out = acc.data.copy()
    out[box] = to_accumulator(acc.data[box].astype(product.dtype) + product, out.dtype)
    return Tile(out, acc.valid)


FUSED_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_ADDC: _addc,
    Op.TILE_ADDSC: _addsc,
    Op.TILE_TRI: _tri,
    Op.TILE_FILLPAD_EXPAND: _fillpad_expand,
    Op.TILE_MATMUL_BIAS: _with_bias(None),
    Op.TILE_GEMV: _with_bias(GEMV_ROWS),
    Op.TILE_GEMV_BIAS: _with_bias(GEMV_ROWS),
    Op.TILE_GEMV_ACC: _gemv_acc,
})
"""Entries of the one handler table (merged there)."""

__all__ = ["FUSED_HANDLERS", "triangle"]
