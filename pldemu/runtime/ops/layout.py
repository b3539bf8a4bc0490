"""Handlers of the layout ops that are not the MX family's: tile.reshape.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). A reshape is a view: the same
row-major elements in the new shape, the valid box as the signature maps it (fully valid, or a box that
only gains or loses unit axes). tile.transpose, tile.fillpad and tile.set_validshape are handled in ``mx``
and ``tile``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir import Op
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


LAYOUT_HANDLERS: Mapping[Op, Handler] = MappingProxyType({Op.TILE_RESHAPE: _reshape})
"""Entries of the one handler table (merged there)."""

__all__ = ["LAYOUT_HANDLERS"]
