"""Handlers of the layout ops that are not the MX family's: tile.reshape, tile.slice, tile.concat, and a
tile's element access (tile.read, tile.write in place: the tile is the core's buffer) and tile.assemble
(a box written into a tile in place: pypto's gather_row DMA).

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). A reshape is a view: the same
row-major elements in the new shape, the valid box as the signature maps it (fully valid, or a box that
only gains or loses unit axes). tile.transpose, tile.fillpad and tile.set_validshape are handled in ``mx``
and ``tile``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.npdtypes import scalar_as
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile


def _reshape(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    shape: tuple[int, ...] = args[1]
    if tile.valid == tile.data.shape:
        return Tile(tile.data.reshape(shape), shape)
    kept = iter(v for v, d in zip(tile.valid, tile.data.shape, strict=True) if d != 1)
    return Tile(tile.data.reshape(shape), tuple(next(kept) if d != 1 else 1 for d in shape))


def _slice(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    """A copy of the window; valid where the source was (the source's box shifted and cut to it)."""
    tile: Tile = args[0]
    shape: tuple[int, ...] = args[1]
    offset = tuple(int(o) for o in args[2])
    if any(not 0 <= o <= d - e for o, e, d in zip(offset, shape, tile.data.shape, strict=True)):
        raise ProgramError(f"tile.slice: window {list(shape)} at offset {list(offset)} runs off the tile "
                           f"{list(tile.data.shape)}")
    window = tuple(slice(o, o + e) for o, e in zip(offset, shape, strict=True))
    valid = tuple(min(max(v - o, 0), e) for v, o, e in zip(tile.valid, offset, shape, strict=True))
    return Tile(tile.data[window].copy(), valid)


def _concat(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    """Both tiles' valid columns side by side, typed fully valid as pypto types it: pto.tconcat packs each
    row's valid columns of src0 then src1 (its row stride is validCol0 + validCol1), so a partly valid
    source leaves the row's tail unwritten (zeros here; on the device whatever the buffer held)."""
    a: Tile = args[0]
    b: Tile = args[1]
    if a.valid == a.data.shape and b.valid == b.data.shape:
        data = np.concatenate([a.data, b.data], axis=1)
        return Tile(data, data.shape)
    data = np.zeros((a.data.shape[0], a.data.shape[1] + b.data.shape[1]), a.data.dtype)
    ca, cb = a.valid[1], b.valid[1]
    data[:a.valid[0], :ca] = a.data[:a.valid[0], :ca]
    data[:b.valid[0], ca:ca + cb] = b.data[:b.valid[0], :cb]
    return Tile(data, data.shape)


def _element(name: str, tile: Tile, index: tuple[int, ...]) -> tuple[int, ...]:
    at = tuple(int(i) for i in index)
    if any(not 0 <= i < d for i, d in zip(at, tile.data.shape, strict=True)):
        raise ProgramError(f"{name}: index {list(at)} is outside the tile {list(tile.data.shape)}")
    return at


def _read(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    return args[0].data[_element("tile.read", args[0], args[1])].item()


def _scalar_cast(m: Machine, site: CallSite, args: tuple[Any, ...]) -> int | float:
    """pypto's scalar Cast (arith.fptosi / sitofp / extf / truncf): a float to an integer truncates toward
    zero and saturates (NaN is 0), as pldemu's tile casts do; an integer wraps; a float type rounds to
    nearest, ties to even."""
    dtype: np.dtype[Any] = site.attrs["dtype"]  # the site holds the numpy dtype
    value = args[0]
    if dtype.kind not in "iu":
        return float(scalar_as(dtype, value))
    if isinstance(value, (float, np.floating)):
        info = np.iinfo(dtype)
        return 0 if value != value else int(info.max) if value >= info.max else int(info.min) \
            if value <= info.min else int(value)
    return int(scalar_as(dtype, value))


def _write(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    tile: Tile = args[0]
    tile.data[_element("tile.write", tile, args[1])] = scalar_as(tile.data.dtype, args[2])  # wraps as the core


def _assemble(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    """The source's valid box into the target at ``offset``, in place (the rest of the target unchanged)."""
    target: Tile = args[0]
    source: Tile = args[1]
    offset = tuple(int(o) for o in args[2])
    box = source.valid
    if any(not 0 <= o <= d - e for o, e, d in zip(offset, box, target.data.shape, strict=True)):
        raise ProgramError(f"tile.assemble: source box {list(box)} at offset {list(offset)} runs off the tile "
                           f"{list(target.data.shape)}")
    window = tuple(slice(o, o + e) for o, e in zip(offset, box, strict=True))
    target.data[window] = source.data[tuple(slice(0, e) for e in box)]


LAYOUT_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_ASSEMBLE: _assemble,
    Op.TILE_RESHAPE: _reshape, Op.TILE_SLICE: _slice, Op.TILE_CONCAT: _concat, Op.TILE_READ: _read, Op.SCALAR_CAST: _scalar_cast,
    Op.TILE_WRITE: _write})
"""Entries of the one handler table (merged there)."""

__all__ = ["LAYOUT_HANDLERS"]
