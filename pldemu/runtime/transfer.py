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
  moves, and :meth:`PutPlan.check_destination` checks it up front for a put that moves later;
* **no-ops and the self-copy shortcut.** A transfer of zero elements moves nothing (None); so does
  a get of a region of this rank's own window onto itself. A put within one window onto this rank
  reads its source completely before writing (:meth:`PutPlan.source`).

The argument layout is the op's signature: ``(dst, peer, src, stage[, dst_offsets, src_offsets,
shape])`` for put and get, ``(tensor, peer, offsets, shape[, valid_shape])`` for remote_load.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pldemu.ir import Var, format_expr
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Buffer, Shape, TensorRef, Tile, check_valid, fit_rank, region, stage_pieces
from pldemu.windows import Window

Piece = tuple[Shape, tuple[slice, ...]]
"""A stage-sized piece of a transfer: its offsets within the region and its slices of the data."""


@dataclass(slots=True)
class PutPlan:
    """A put that moves something: ``data`` (the source region, shaped ``extent``) goes to region
    ``dst_offsets``/``extent`` of ``peer``'s ``dst``, through ``window``."""

    rank: int
    peer: int
    dst: TensorRef
    window: Window
    dst_offsets: Shape
    extent: Shape
    data: np.ndarray
    src: TensorRef | None
    """The source tensor (None: a tile)."""
    src_offsets: Shape
    src_extent: Shape
    """The source region in the source's own rank."""

    def source(self) -> np.ndarray:
        """The data to write: a copy when source and destination are one window of this rank (a
        self-copy must read everything before it writes)."""
        if self.src is not None and self.src.buffer is self.dst.buffer and self.peer == self.rank:
            return self.data.copy()
        return self.data

    def check_destination(self) -> None:
        """Refuse now, as the window would when the data moves, a destination region out of bounds."""
        region("put", self.rank, self.peer, describe(self.dst), self.dst.shape, self.dst_offsets, self.extent)

    def pieces(self, stage: Tile | None) -> Iterator[Piece]:
        """Where each piece of the data goes: one piece, or stage-sized ones (``stage``)."""
        return _pieces(self.dst_offsets, self.extent, stage)

    def write(self, atomic: bool, stage: Tile | None) -> None:
        """Move the data now, in one operation or (``stage``) one stage-sized piece at a time."""
        data = self.source()
        if stage is None:
            self.window.put(self.peer, self.dst.shape, self.dst_offsets, data, atomic)
            return
        self.check_destination()  # a refused transfer moves nothing
        for at, piece in self.pieces(stage):
            self.window.put(self.peer, self.dst.shape, at, data[piece], atomic)


@dataclass(slots=True)
class GetPlan:
    """A get that moves something: region ``src_offsets``/``src_extent`` of ``peer``'s ``src``
    (through ``window``) lands in ``target``, a view of this rank's destination region shaped
    ``src_extent`` (``dst_offsets``/``dst_extent`` in the destination's rank)."""

    rank: int
    peer: int
    dst: TensorRef
    dst_offsets: Shape
    dst_extent: Shape
    src: TensorRef
    window: Window
    src_offsets: Shape
    src_extent: Shape
    target: np.ndarray

    def read(self) -> np.ndarray:
        """The source region now, as a fresh array (shaped ``src_extent``)."""
        return self.window.get(self.peer, self.src.shape, self.src_offsets, self.src_extent)

    def read_into_target(self, stage: Tile | None) -> None:
        """Move the data now: one copy straight into the destination, or (``stage``) one
        stage-sized piece at a time."""
        w, peer, shape = self.window, self.peer, self.src.shape
        if stage is None:
            w.get(peer, shape, self.src_offsets, self.src_extent, out=self.target)
            return
        # Check the whole source region first so that a refused transfer writes nothing.
        region("get", self.rank, peer, describe(self.src), shape, self.src_offsets, self.src_extent)
        for at, piece in _pieces(self.src_offsets, self.src_extent, stage):
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
    return PutPlan(rank, peer, dst, window_of(site, dst), dst_off, ext, data, tensor, src_off, src_ext)


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
    return GetPlan(rank, peer, dst, dst_off, dst_ext, src, window_of(site, src), src_off, src_ext, target)


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


__all__ = ["GetPlan", "Piece", "PutPlan", "describe", "plan_get", "plan_put", "remote_load_extent", "window_of"]
