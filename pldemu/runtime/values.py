"""Runtime values: buffers, tensor views onto them, tiles, the comm context; region checks.

A *buffer* is a declared program buffer on this rank: a window segment (data or signal) or a rank-local
array. A *tensor* value is a view of a buffer: the packed buffer reshaped to a concrete view shape (plus
an optional valid shape, metadata only). A *tile* is a value: a numpy array of the physical shape and a
concrete valid shape; tile ops never modify a tile's array in place, so two tiles may share one.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pldemu.ir import BufferKind, DType
from pldemu.ir.signatures import Region
from pldemu.runtime.errors import ProgramError
from pldemu.windows import POISON_BYTE, Window, WindowAccessError, poison_value

Shape = tuple[int, ...]


@dataclass(eq=False, slots=True, weakref_slot=True)
class Buffer:
    """One declared buffer on this rank. ``array`` (declared shape) is this rank's storage: the
    window's local segment or a local numpy array; it is bound once the windows are allocated."""

    index: int
    name: str
    kind: BufferKind
    dtype: DType
    shape: Shape
    valid: Shape | None
    array: np.ndarray
    window: Window | None = None
    group: tuple[int, ...] | None = None
    """The global ranks of the window's comm sub-domain (``BufferDecl.group``); None: every rank."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"{self.kind.value} {self.name}: {self.dtype.value}[{dims}]"


_NO_STORAGE = np.empty(0, np.uint8)
"""The storage of a released buffer's tombstone (``BufferTable``)."""


class _Created(weakref.ref[Buffer]):
    """A ``tensor.create`` buffer, held weakly, and what its tombstone says once it is gone."""

    __slots__ = ("dtype", "name", "nbytes", "shape")
    name: str
    dtype: DType
    shape: Shape
    nbytes: int

    def __new__(cls, buf: Buffer, callback: Callable[[weakref.ref[Buffer]], Any]) -> _Created:
        self = super().__new__(cls, buf, callback)
        self.name, self.dtype, self.shape, self.nbytes = buf.name, buf.dtype, buf.shape, buf.array.nbytes
        return self


class BufferTable(Sequence[Buffer]):
    """One rank's buffers by ``Buffer.index``: the declared ones, then those its ``tensor.create`` statements
    allocated while the run goes on (:meth:`create`), which are held weakly. A created buffer's storage goes
    when the last value that can reach it does (a variable or temporary, a view, a task submitted and not yet
    complete, a carried or returned tensor: they hold the ``Buffer``), as simpler's runtime frees a ring-heap
    buffer once nothing can use it, so a loop that creates a tensor per iteration holds the live ones, not one
    per iteration. Its index then reads as a tombstone (its name, dtype and shape, no storage), so what keeps
    indices (the task graph, the task race check's accesses, reports) still names it; indices are never reused
    within a run."""

    def __init__(self, declared: Sequence[Buffer]) -> None:
        self._declared = list(declared)
        self._created: list[_Created] = []
        self.live_bytes = 0
        """The storage of the created buffers alive now."""
        self.peak_bytes = 0
        """The most ``live_bytes`` has been since this table was made."""

    def create(self, name: str, dtype: DType, shape: Shape, array: np.ndarray) -> Buffer:
        """A new rank-local buffer of ``array``'s storage at the next index."""
        buf = Buffer(len(self), name, BufferKind.LOCAL, dtype, shape, None, array)
        self._created.append(_Created(buf, self._released))
        self.live_bytes += array.nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return buf

    def drop_created(self) -> None:
        """Forget the created buffers' indices (a new run numbers its own from the declared count)."""
        self._created.clear()

    def _released(self, ref: weakref.ref[Buffer]) -> None:
        if isinstance(ref, _Created):
            self.live_bytes -= ref.nbytes

    def __len__(self) -> int:
        return len(self._declared) + len(self._created)

    def __getitem__(self, index: int) -> Buffer:  # type: ignore[override]
        if index < 0:
            index += len(self)
        if index < len(self._declared):
            return self._declared[index]
        ref = self._created[index - len(self._declared)]
        buf = ref()
        if buf is not None:
            return buf
        return Buffer(index, ref.name, BufferKind.LOCAL, ref.dtype, ref.shape, None, _NO_STORAGE)

    def __iter__(self) -> Iterator[Buffer]:
        return (self[i] for i in range(len(self)))


@dataclass(frozen=True, eq=False, slots=True)
class TensorRef:
    """A tensor value: ``buffer`` viewed with ``shape`` (``array`` is that view of this rank's storage)."""

    buffer: Buffer
    shape: Shape
    valid: Shape | None
    array: np.ndarray


@dataclass(frozen=True, eq=False, slots=True)
class Tile:
    """A tile value: ``data`` has the physical shape; ``valid`` is the valid region (a prefix box)."""

    data: np.ndarray
    valid: Shape


@dataclass(frozen=True, slots=True)
class CommCtx:
    """The value of ``pld.system.get_comm_ctx``: who I am on the window's communicator."""

    rank: int
    size: int


def buffer_tensor(buf: Buffer) -> TensorRef:
    """The tensor value a buffer's name evaluates to: the whole buffer, declared shape."""
    return TensorRef(buf, buf.shape, buf.valid, buf.array)


class Poison:
    """Fill values for fresh tiles and buffers (poison or zero), cached per numpy dtype."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._fills: dict[np.dtype[Any], Any] = {}

    def fill(self, dtype: np.dtype[Any]) -> Any:
        """The scalar a fresh array of ``dtype`` is filled with (``None``: the 0xA5 byte pattern)."""
        try:
            return self._fills[dtype]
        except KeyError:
            value = poison_value(dtype) if self.enabled else 0
            self._fills[dtype] = value
            return value

    def array(self, shape: Shape, dtype: np.dtype[Any]) -> np.ndarray:
        """A fresh array of ``shape`` filled with poison (or zeros)."""
        value = self.fill(dtype)
        if value is None:
            out = np.empty(shape, dtype)
            out.view(np.uint8)[...] = POISON_BYTE
            return out
        return np.full(shape, value, dtype)


def check_valid(what: str, valid: Shape, shape: Shape) -> Shape:
    """A valid shape must have one entry per dim, each within ``[0, shape[d]]``."""
    if valid == shape:
        return valid  # fully valid: the common case, without the per-dim generator
    if len(valid) != len(shape) or any(not 0 <= v <= s for v, s in zip(valid, shape, strict=True)):
        raise ProgramError(f"{what}: valid shape {list(valid)} does not fit the physical shape {list(shape)}")
    return valid


def region(op: str, rank: int, peer: int, what: str | Buffer, view: Shape, offsets: Shape, extent: Shape
           ) -> tuple[slice, ...]:
    """numpy slices of a checked region ``offsets``/``extent`` of a rank-local ``view``.

    Refusals are ``WindowAccessError``s worded like the windows layer's, naming op, rank, peer, the
    buffer or tile (``what``: its description, or the Buffer itself, described only on a refusal),
    the region and the violated bound.
    """
    if len(offsets) == len(extent) == len(view):
        # Hot path (every tile load/store and put/get): no message is built unless something fails.
        if len(view) == 2:  # the recipes' [rows, cols] views, unrolled: a third of the loop's cost
            (o0, o1), (n0, n1), (v0, v1) = offsets, extent, view
            if o0 >= 0 and n0 >= 0 and o0 + n0 <= v0 and o1 >= 0 and n1 >= 0 and o1 + n1 <= v1:
                return (slice(o0, o0 + n0), slice(o1, o1 + n1))
        out = []
        for o, n, v in zip(offsets, extent, view, strict=True):
            if o < 0 or n < 0 or o + n > v:
                break
            out.append(slice(o, o + n))
        else:
            return tuple(out)
    if isinstance(what, Buffer):
        what = f"{what.kind.value} '{what.name}'"
    where = f"region offsets {list(offsets)} shape {list(extent)} in view {list(view)}"
    if not len(offsets) == len(extent) == len(view):
        raise WindowAccessError(
            f"{op}: rank {rank} -> peer {peer} on {what}: {where}: rank mismatch "
            f"(offsets {len(offsets)}-D, shape {len(extent)}-D, view {len(view)}-D)"
        )
    out = []
    for d, (o, n, v) in enumerate(zip(offsets, extent, view, strict=True)):
        if o < 0 or n < 0 or o + n > v:
            raise WindowAccessError(
                f"{op}: rank {rank} -> peer {peer} on {what}: {where}: dim {d} covers [{o}, {o + n}) "
                f"outside [0, {v})"
            )
        out.append(slice(o, o + n))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def prefix(valid: Shape) -> tuple[slice, ...]:
    """Slices of the valid box ``[0, valid)`` of a tile (cached: a recipe uses a handful of shapes)."""
    return tuple(slice(0, v) for v in valid)


def fit_rank(extent: Shape, rank: int, what: str) -> Shape:
    """``extent`` expressed with ``rank`` dims (``Region.fit``: leading unit dims dropped or added; a put
    may give its shape in the source's rank or the destination's)."""
    if len(extent) == rank:
        return extent
    fitted = Region.fit(extent, rank)
    if fitted is None:
        raise ProgramError(f"{what}: shape {list(extent)} cannot address a {rank}-D region")
    return fitted


def flat_cell(op: str, rank: int, peer: int, t: TensorRef, index: Shape) -> int:
    """Flat element index of ``index`` in tensor ``t``'s view, every dim checked."""
    shape = t.shape
    # Fast paths for the signal layouts recipes use ([NR, 1], [rows, NR], [N]); anything else, and
    # every refusal, goes through the general loop below.
    n = len(shape)
    if len(index) == n:
        if n == 2:
            i, j = index
            rows, cols = shape
            if 0 <= i < rows and 0 <= j < cols:
                return i * cols + j
        elif n == 1:
            (i,) = index
            if 0 <= i < shape[0]:
                return i
    if len(index) != len(shape):
        raise WindowAccessError(
            f"{op}: rank {rank} -> peer {peer} on {t.buffer.kind.value} '{t.buffer.name}': "
            f"index {list(index)} has {len(index)} entries, the view {list(shape)} has {len(shape)} dims"
        )
    flat = 0
    for d, (i, n) in enumerate(zip(index, shape, strict=True)):
        if not 0 <= i < n:
            raise WindowAccessError(
                f"{op}: rank {rank} -> peer {peer} on {t.buffer.kind.value} '{t.buffer.name}': "
                f"index {list(index)} dim {d} is {i}, outside [0, {n})"
            )
        flat = flat * n + i
    return flat


def stage_pieces(extent: Shape, stage: Shape) -> list[tuple[Shape, Shape]]:
    """``(offsets, shape)`` of the stage-sized pieces a transfer of ``extent`` slides through, in order.

    The stage tile's last dim tiles the region's last dim, its second-last (rows) the region's
    second-last; any further leading dims go one index at a time.
    """
    n = len(extent)
    steps = [1] * n
    if n:
        steps[-1] = max(stage[-1], 1)
    if n >= 2:
        steps[-2] = max(stage[-2] if len(stage) >= 2 else 1, 1)
    pieces: list[tuple[Shape, Shape]] = [((), ())]
    for e, s in zip(extent, steps, strict=True):
        pieces = [((*o, start), (*sh, min(s, e - start))) for o, sh in pieces for start in range(0, e, s)]
    return pieces


def unravel(flat: int, shape: Shape) -> tuple[int, ...]:
    """Multi-index of flat element ``flat`` of a packed (C-order) buffer of ``shape``. A zero extent
    counts as one (index 0 there), so a report about an empty buffer's cell never divides by zero."""
    out: list[int] = []
    for n in reversed(shape):
        flat, i = divmod(flat, n) if n else (flat, 0)
        out.append(i)
    return tuple(reversed(out))


def wrap_int32(value: int) -> int:
    """``value`` wrapped as an INT32 register wraps it (two's complement).

    The notify operand is an INT32 register on the device: this matters for the all_to_all_v reset
    ``-read(cell)`` of a cell holding INT32_MIN (a poisoned data window): on hardware -INT32_MIN ==
    INT32_MIN and the add wraps the cell to 0. The invariant checker's shadow cells wrap the same way.
    """
    return ((value + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


__all__ = [
    "Buffer",
    "BufferTable",
    "CommCtx",
    "Poison",
    "Shape",
    "TensorRef",
    "Tile",
    "buffer_tensor",
    "check_valid",
    "fit_rank",
    "flat_cell",
    "prefix",
    "region",
    "stage_pieces",
    "unravel",
    "wrap_int32",
]
