"""Host-side values of the per-rank projection: allocations, window views, host slices."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pldemu.pypto.types import Direction, PyDType


@dataclasses.dataclass(eq=False)
class Alloc:
    """``pld.alloc_window_buffer(nbytes)``, named after its left-hand side."""

    name: str
    nbytes: int
    line: int


@dataclasses.dataclass(frozen=True)
class HostView:
    """``pld.window(buf, shape, dtype=)``: a typed view of an allocation."""

    alloc: Alloc
    shape: tuple[int, ...]
    dtype: PyDType
    line: int


@dataclasses.dataclass(frozen=True)
class HostTensor:
    """A host parameter (``key == ()``) or a slice of one (``inputs[r]``, ``x[0, r]``)."""

    param: str
    key: tuple[int, ...]
    array: np.ndarray
    dtype: PyDType
    direction: Direction
    dims: tuple[int, ...]
    """The annotated dims evaluated (``NR``-aware :class:`~pldemu.pypto.types.SymInt` where symbolic)."""

    def __getitem__(self, index: Any) -> HostTensor:
        idx = index if isinstance(index, tuple) else (index,)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in idx):
            raise TypeError("host tensors are sliced by integers only (x[r], x[0, r])")
        return HostTensor(self.param, self.key + idx, self.array[idx], self.dtype, self.direction,
                          self.dims[len(idx):])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """One ``self.orch(...)`` the rank runs: the callee, its host-evaluated arguments, the line."""

    func: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    line: int
    devices: frozenset[int] | None = None
    """pypto's device descriptor of the dispatch (``translate.groups``): the devices its ``device=`` covers,
    None for every device."""


@dataclasses.dataclass(frozen=True)
class HostCollective:
    """A host-level ``pld.tensor.<op>(...)``: run on every rank in program order."""

    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    line: int


@dataclasses.dataclass(frozen=True)
class HostTask:
    """A call of a SubWorker (``self.sub(...)`` at HOST level): a Python task the process that called the
    program runs, after what every rank did before it and before what every rank does after it."""

    func: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    line: int
    index: int
    """Its number in the host program's order (the same on every rank)."""


@dataclasses.dataclass(frozen=True)
class Unresolved:
    """What a dispatch returns when it is not one of its tensor arguments: the host may name it, not
    pass it on (see ``pldemu.pypto.translate.returns``)."""

    func: str
    line: int


Event = Dispatch | HostCollective | HostTask

__all__ = ["Alloc", "Dispatch", "Event", "HostCollective", "HostTask", "HostTensor", "HostView", "Unresolved"]
