"""The one transfer planner: what a ``pld.tile.put`` / ``pld.tile.get`` / ``pld.tile.remote_load``
moves, decoded once for everyone who needs to know.

Three parts of the runtime look at a transfer: the handlers (which move the data), the
deferred-visibility wrappers of ``schedule.py`` (which move it later) and the race detector of
``races.py`` (which records what was touched). Each is a thin wrapper around a plan from here:

* **regions or whole buffer.** With ``dst_offsets, src_offsets, shape`` the transfer moves that
  region (``shape`` fitted to each side's rank, leading unit dims dropped or added); without them it
  copies the whole source onto the whole destination, which must have as many elements;
* **bounds.** The source region of a put and the destination region of a get are checked here (a
  refusal names op, rank, peer, buffer and region); the window checks its own side when the data
  moves (``Window.check_put`` checks it up front for a put that moves later);
* **no-ops and the self-copy shortcut.** A transfer of zero elements moves nothing (None); so does
  a get of a region of this rank's own window onto itself. A put within one window onto this rank
  reads its source completely before writing (:meth:`PutPlan.source`).

The argument layout is the op's signature: ``(dst, peer, src, stage[, dst_offsets, src_offsets,
shape])`` for put and get, ``(tensor, peer, offsets, shape[, valid_shape])`` for remote_load.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pldemu.ir import Var, format_expr
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Buffer, Shape, TensorRef, Tile, check_valid, fit_rank, region, stage_pieces
from pldemu.windows import Window

Piece = tuple[Shape, tuple[slice, ...]]
"""A stage-sized piece of a transfer: its offsets within the region and its slices of the data."""


class Region(NamedTuple):
    """One end of a transfer: region ``offsets``/``extent`` of ``tensor``'s view (in its own rank)."""

    tensor: TensorRef
    offsets: Shape
    extent: Shape


@dataclass(slots=True)
class PutPlan:
    """A put that moves something: ``data`` (the source region, shaped ``dst.extent``) goes to
    region ``dst`` of ``peer``, through ``window``; ``src`` is the source region (None: a tile)."""

    rank: int
    peer: int
    window: Window
    dst: Region
    src: Region | None
    data: np.ndarray

    def source(self) -> np.ndarray:
        """The data to write: a copy when source and destination are one window of this rank (a
        self-copy must read everything before it writes)."""
        if self.src is not None and self.src.tensor.buffer is self.dst.tensor.buffer and self.peer == self.rank:
            return self.data.copy()
        return self.data

    def pieces(self, stage: Tile | None) -> Iterator[Piece]:
        """Where each piece of the data goes: one piece, or stage-sized ones (``stage``)."""
        return _pieces(self.dst.offsets, self.dst.extent, stage)

    def write(self, atomic: bool, stage: Tile | None) -> None:
        """Move the data now, in one operation or (``stage``) one stage-sized piece at a time."""
        data, w, peer, dst = self.source(), self.window, self.peer, self.dst
        if stage is None:
            w.put(peer, dst.tensor.shape, dst.offsets, data, atomic)
            return
        # Check the whole region first so that a refused transfer moves nothing.
        region("put", self.rank, peer, describe(dst.tensor), dst.tensor.shape, dst.offsets, dst.extent)
        for at, piece in self.pieces(stage):
            w.put(peer, dst.tensor.shape, at, data[piece], atomic)


@dataclass(slots=True)
class GetPlan:
    """A get that moves something: region ``src`` of ``peer`` (through ``window``) lands in region
    ``dst`` of this rank; ``target`` is that destination region as a view shaped ``src.extent``."""

    rank: int
    peer: int
    window: Window
    dst: Region
    src: Region
    target: np.ndarray

    def read(self) -> np.ndarray:
        """The source region now, as a fresh array (shaped ``src.extent``)."""
        src = self.src
        return self.window.get(self.peer, src.tensor.shape, src.offsets, src.extent)

    def read_into_target(self, stage: Tile | None) -> None:
        """Move the data now: one copy straight into the destination, or (``stage``) one
        stage-sized piece at a time."""
        w, peer, src = self.window, self.peer, self.src
        shape = src.tensor.shape
        if stage is None:
            w.get(peer, shape, src.offsets, src.extent, out=self.target)
            return
        # Check the whole source region first so that a refused transfer writes nothing.
        region("get", self.rank, peer, describe(src.tensor), shape, src.offsets, src.extent)
        for at, piece in _pieces(src.offsets, src.extent, stage):
            self.target[piece] = w.get(peer, shape, at, tuple(s.stop - s.start for s in piece))


def plan_put(rank: int, site: CallSite, args: tuple[Any, ...]) -> PutPlan | None:
    """The put ``args`` asks for on ``rank``, checked on the source side; None if it moves nothing."""
    dst: TensorRef = args[0]
    peer = args[1]
    src = args[2]
    tensor = None if isinstance(src, Tile) else src
    src_arr = src.data if tensor is None else tensor.array
    src_what: str | Buffer = f"tile '{_arg_name(site, 2)}'" if tensor is None else tensor.buffer
    if len(args) > 4:
        dst_off, src_off, shape = args[4], args[5], args[6]
        ext = fit_rank(shape, len(dst.shape), "pld.tile.put")
        if 0 in ext:
            return None  # an empty transfer is a no-op (ragged tails, empty ring segments)
        src_ext = fit_rank(shape, src_arr.ndim, "pld.tile.put")
        data = src_arr[region("put", rank, peer, src_what, src_arr.shape, src_off, src_ext)]
        if src_ext != ext:
            data = data.reshape(ext)
    else:
        if src_arr.size != dst.buffer.numel:
            raise ProgramError(f"pld.tile.put without regions copies the whole source: {_describe(src_what)} has "
                               f"{src_arr.size} elements, {describe(dst)} has {dst.buffer.numel}")
        if src_arr.size == 0:
            return None
        ext, dst_off = dst.shape, (0,) * len(dst.shape)
        src_ext, src_off = src_arr.shape, (0,) * src_arr.ndim
        data = src_arr.reshape(ext)
    src_region = None if tensor is None else Region(tensor, src_off, src_ext)
    return PutPlan(rank, peer, window_of(site, dst), Region(dst, dst_off, ext), src_region, data)


def plan_get(rank: int, site: CallSite, args: tuple[Any, ...]) -> GetPlan | None:
    """The get ``args`` asks for on ``rank``, checked on the destination side; None if it moves
    nothing (an empty region, or this rank's own region read onto itself)."""
    dst: TensorRef = args[0]
    peer = args[1]
    src: TensorRef = args[2]
    if len(args) > 4:
        dst_off, src_off, shape = args[4], args[5], args[6]
        dst_ext = fit_rank(shape, len(dst.shape), "pld.tile.get")
        src_ext = fit_rank(shape, len(src.shape), "pld.tile.get")
        if 0 in dst_ext:
            return None
        if peer == rank and dst.buffer is src.buffer and dst.shape == src.shape and dst_off == src_off:
            return None  # identity mapping: reading my own region onto itself
    else:
        if src.buffer.numel != dst.buffer.numel:
            raise ProgramError(f"pld.tile.get without regions copies the whole source: {describe(src)} has "
                               f"{src.buffer.numel} elements, {describe(dst)} has {dst.buffer.numel}")
        if peer == rank and dst.buffer is src.buffer:
            return None
        dst_off, src_off = (0,) * len(dst.shape), (0,) * len(src.shape)
        dst_ext, src_ext = dst.shape, src.shape
        if 0 in dst_ext:
            return None
    target = dst.array[region("get", rank, peer, dst.buffer, dst.shape, dst_off, dst_ext)]
    if dst_ext != src_ext:
        target = target.reshape(src_ext)  # only unit dims differ: still a view
    return GetPlan(rank, peer, window_of(site, src), Region(dst, dst_off, dst_ext), Region(src, src_off, src_ext), target)


def remote_load_extent(args: tuple[Any, ...]) -> Shape:
    """The region a remote_load reads: its valid shape if given (checked against the tile shape),
    else the whole tile shape."""
    shape: Shape = args[3]
    return check_valid("pld.tile.remote_load", args[4], shape) if len(args) > 4 else shape


def _pieces(offsets: Shape, extent: Shape, stage: Tile | None) -> Iterator[Piece]:
    if stage is None:
        yield offsets, tuple(slice(0, n) for n in extent)
        return
    for off, shp in stage_pieces(extent, stage.data.shape):
        yield (tuple(a + b for a, b in zip(offsets, off, strict=True)),
               tuple(slice(o, o + n) for o, n in zip(off, shp, strict=True)))


def window_of(site: CallSite, t: TensorRef) -> Window:
    """The window behind ``t``; a ProgramError naming the op if ``t`` is rank-local."""
    w = t.buffer.window
    if w is None:
        raise ProgramError(f"{site.op.text} needs a window, '{t.buffer.name}' is a rank-local tensor")
    return w


def describe(t: TensorRef) -> str:
    """``kind 'name'`` of the buffer behind ``t``, as refusals name it."""
    return f"{t.buffer.kind.value} '{t.buffer.name}'"


def _describe(what: str | Buffer) -> str:
    return what if isinstance(what, str) else f"{what.kind.value} '{what.name}'"


def _arg_name(site: CallSite, i: int) -> str:
    a = site.call.args[i]
    return a.name if isinstance(a, Var) else format_expr(a)


__all__ = ["GetPlan", "Piece", "PutPlan", "Region", "describe", "plan_get", "plan_put", "remote_load_extent", "window_of"]
