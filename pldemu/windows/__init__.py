"""RMA windows standing in for accelerator (HCCL) memory.

Each rank of a communicator hosts collectively allocated windows: data
windows of any numpy dtype/shape and INT32 signal windows.  Three back ends sit
behind one :class:`Window` interface:

* ``shared`` -- ``MPI_Win_allocate_shared``; peers' memory is a numpy view.
  Chosen automatically when every rank of the communicator is on one node.
* ``rma`` -- ``MPI_Win_allocate`` with passive-target ``Put``/``Get``/
  ``Accumulate``/``Flush``; works across nodes.  Chosen automatically when
  the ranks span several nodes and no node has more than one of them.
* ``hybrid`` -- both, per peer: shared memory for the data of peers on this
  node, MPI RMA for peers on other nodes, MPI for every signal and atomic.
  Chosen automatically when the ranks span several nodes and some node has
  more than one of them.

Signal operations speak the IR's vocabulary: ``NotifyOp`` (``AtomicAdd``,
``Set``) and ``WaitCmp`` (``Eq``, ``Ge``) are ``pldemu.ir``'s enums, re-exported
here; waits back off with ``pldemu.mpi``'s one ``Backoff`` (``PollPolicy``).
:func:`mpi_window` hands out a bare MPI window allocated as a back end does,
for code that measures raw MPI against these windows.

Typical use::

    with WindowSet(comm) as ws:
        data = ws.allocate("x", (4, 8), np.float32)
        sig = ws.allocate("x.sig", 4, np.int32, signal=True)
        data.put(peer, (4, 8), (1, 0), rows)
        sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
        sig.wait(0, 1, WaitCmp.Ge, timeout=10.0)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, SupportsIndex

import numpy as np
from mpi4py import MPI

from . import shared
from .base import (
    POISON_BYTE,
    SIGNAL_DTYPE,
    BackendName,
    BackendRequest,
    FreedOnExit,
    NotifyOp,
    PollPolicy,
    RegionPlan,
    WaitCmp,
    WaitHook,
    WaitTimeout,
    Window,
    WindowAccessError,
    WindowError,
    WindowFreedError,
    WindowStats,
    as_shape,
    poison_value,
    region_layout,
    segment_array,
)
from .futex import WakeBatch
from .hybrid import HostLayout, HybridWindow, host_layout
from .rma import RmaWindow
from .shared import SharedWindow

__all__ = [
    "POISON_BYTE",
    "SIGNAL_DTYPE",
    "BackendName",
    "BackendRequest",
    "FreedOnExit",
    "HostLayout",
    "HybridWindow",
    "NotifyOp",
    "PollPolicy",
    "RegionPlan",
    "RmaWindow",
    "SharedWindow",
    "WaitCmp",
    "WaitHook",
    "WaitTimeout",
    "Window",
    "WindowAccessError",
    "WindowError",
    "WindowFreedError",
    "WindowSet",
    "WindowSpec",
    "WindowStats",
    "allocate_window",
    "choose_backend",
    "host_layout",
    "mpi_window",
    "poison_value",
    "region_layout",
]

_BACKENDS: dict[str, type[Window]] = {"shared": SharedWindow, "rma": RmaWindow, "hybrid": HybridWindow}


def choose_backend(comm: MPI.Intracomm, requested: str = "auto", layout: HostLayout | None = None) -> BackendName:
    """Resolve ``requested`` (``auto``/``shared``/``rma``/``hybrid``) for ``comm``.

    Collective over ``comm``, unless ``layout`` (``comm``'s :func:`host_layout`, which the caller
    already has) answers it with no MPI call.  ``auto`` gives ``shared`` when all ranks share
    a node; across nodes, ``hybrid`` when some node has more than one rank,
    else ``rma``.  Asking for ``shared`` when the ranks span nodes raises
    ``ValueError`` (on every rank: they all see the same split sizes);
    ``rma`` and ``hybrid`` work anywhere.
    """
    if requested not in ("auto", "shared", "rma", "hybrid"):
        raise ValueError(f"backend must be 'auto', 'shared', 'rma' or 'hybrid', got {requested!r}")
    if requested in ("rma", "hybrid"):
        return "rma" if requested == "rma" else "hybrid"
    if layout is not None:
        node_size = next(len(g) for g in layout.groups if comm.Get_rank() in g)
        largest = max(len(g) for g in layout.groups)
    else:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            node_size = int(node.Get_size())
        finally:
            node.Free()
    # If one rank's node holds the whole communicator, every rank's does, so
    # all ranks reach the same answer without further communication.
    if node_size == comm.Get_size():
        return "shared"
    if requested == "shared":
        raise ValueError(
            f"backend 'shared' needs all {comm.Get_size()} ranks on one node; "
            f"rank {comm.Get_rank()}'s node has {node_size} of them"
        )
    if layout is None:  # every rank got here (no node holds the whole communicator): collective
        largest = comm.allreduce(node_size, op=MPI.MAX)
    return "hybrid" if largest > 1 else "rma"


def mpi_window(comm: MPI.Intracomm, backend: str, numel: int, dtype: Any) -> tuple[MPI.Win, np.ndarray]:
    """Collectively allocate a bare MPI window of ``numel`` elements of ``dtype`` per rank, the way
    back end ``backend`` allocates its own, and return it with this rank's segment as a zero-copy
    1-D numpy view.  For code that measures raw MPI against these windows (``pldemu bench``); the
    caller locks, uses and frees the window itself.  ``backend`` is ``shared``, ``rma`` or ``hybrid``
    (whose raw counterpart is the ``rma`` allocation: native MPI across nodes)."""
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be 'shared' or 'rma' (or 'hybrid', which allocates as 'rma'), got {backend!r}")
    dt = np.dtype(dtype)
    win = _BACKENDS[backend].allocate_mpi(comm, max(numel, 1) * dt.itemsize, dt.itemsize)
    return win, segment_array(win.tomemory(), dt, numel)


def allocate_window(
    comm: MPI.Intracomm,
    name: str,
    shape: int | Sequence[SupportsIndex],
    dtype: Any,
    *,
    backend: str = "auto",
    fill: Any = None,
    signal: bool = False,
    layout: HostLayout | None = None,
) -> Window:
    """Collectively allocate a window of ``shape``/``dtype`` on every rank.

    All ranks of ``comm`` must call this with the same arguments (checked:
    a mismatch raises ``ValueError`` on every rank).  ``backend`` is
    ``auto``, ``shared``, ``rma`` or ``hybrid`` (see :func:`choose_backend`).

    ``fill`` is the initial value of every element.  ``None`` means: ``0``
    for signal windows (``signal=True``, dtype must be INT32 -- the notify
    protocol needs zeroed signals), otherwise the poison of
    :func:`poison_value` (NaN for floats, dtype min/max for integers, bytes
    ``0xA5`` for the rest) so that reads of never-written data stand out.
    ``layout``: ``comm``'s :func:`host_layout`, if the caller has it (saves the back end's collective).
    """
    _check_same_everywhere(comm, _signature(name, shape, dtype, backend, fill, signal))
    return _allocate(comm, name, shape, dtype, choose_backend(comm, backend, layout), fill, signal)


def _allocate(
    comm: MPI.Intracomm,
    name: str,
    shape: int | Sequence[SupportsIndex],
    dtype: Any,
    backend: BackendName,
    fill: Any,
    signal: bool,
    wakes: WakeBatch | None = None,
) -> Window:
    """Validate locally (identical on all ranks) and build the window (``wakes``: see ``Window``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"window name must be a non-empty str, got {name!r}")
    shp = as_shape(shape, "shape")
    if any(d < 0 for d in shp):
        raise ValueError(f"window '{name}': negative extent in shape {shp}")
    dt = np.dtype(dtype)
    if dt.hasobject or dt.itemsize == 0:
        raise ValueError(f"window '{name}': dtype {dt} cannot live in an RMA window")
    if signal and dt != SIGNAL_DTYPE:
        raise ValueError(f"window '{name}': signal windows are INT32, got {dt}")
    if fill is None:
        fill = 0 if signal else poison_value(dt)
    elif isinstance(fill, str):
        raise ValueError(f"window '{name}': fill must be a scalar, got {fill!r}")
    if fill is not None:
        # Fail before any collective MPI call if the fill does not fit.
        try:
            np.full(1, fill, dtype=dt)
        except (OverflowError, TypeError, ValueError) as exc:
            raise ValueError(f"window '{name}': fill {fill!r} does not fit dtype {dt}: {exc}") from exc
    return _BACKENDS[backend](comm, name, shp, dt, fill=fill, signal=signal, wakes=wakes)


def _signature(name: str, shape: Any, dtype: Any, *rest: Any) -> tuple[Any, ...]:
    """Normalised arguments for the cross-rank consistency check.

    Normalising means ``(4,)`` and ``4``, or ``np.float32`` and ``"f4"``,
    compare equal; arguments that do not normalise are compared by ``repr``
    (they will then fail validation identically on every rank).
    """
    try:
        shp: Any = as_shape(shape, "shape")
    except TypeError:
        shp = repr(shape)
    try:
        dt: Any = str(np.dtype(dtype))
    except TypeError:
        dt = repr(dtype)
    return (name, shp, dt, *(repr(r) for r in rest))


def _check_same_everywhere(comm: MPI.Intracomm, signature: tuple[Any, ...],
                           fields: str = "(name, shape, dtype, backend, fill, signal)") -> None:
    """Raise ``ValueError`` on every rank unless all passed the same arguments.

    One small allgather per call (one per window, or one for a whole :meth:`WindowSet.allocate_many`);
    it turns a mismatched collective call (which would otherwise hang or corrupt memory) into a clear error.
    """
    sigs = comm.allgather(signature)
    if any(s != sigs[0] for s in sigs):
        diff = [r for r, s in enumerate(sigs) if s != sigs[0]]
        raise ValueError(
            f"allocate_window: ranks disagree on {fields}: "
            f"rank 0 passed {sigs[0]}, ranks {diff} passed {[sigs[r] for r in diff]}"
        )


@dataclass(frozen=True)
class WindowSpec:
    """One window of :meth:`WindowSet.allocate_many`: the arguments of :meth:`WindowSet.allocate`."""

    name: str
    shape: int | Sequence[SupportsIndex]
    dtype: Any
    fill: Any = None
    signal: bool = False

    def signature(self) -> tuple[Any, ...]:
        """The normalised arguments every rank must agree on."""
        return _signature(self.name, self.shape, self.dtype, self.fill, self.signal)


class WindowSet(FreedOnExit):
    """Windows allocated together on one communicator and freed together.

    The back end is resolved once (collectively) at construction.  Use as a
    context manager; :meth:`free` frees the windows in reverse allocation
    order, is idempotent and collective.  Any use after free raises
    :class:`WindowFreedError`.
    """

    def __init__(self, comm: MPI.Intracomm, *, backend: str = "auto", layout: HostLayout | None = None,
                 batch_wakes: bool = True) -> None:
        """Resolve the back end for ``comm`` (collective; none with ``layout``, see :func:`choose_backend`).
        ``batch_wakes``: the set's windows defer the kernel wake-ups of this rank's notifies, and RMA
        windows the completion (``Flush``) of its notifies, to the end of its burst of notifies (one
        :class:`~pldemu.windows.futex.WakeBatch` for the set: its next wait, test or read_cell on any
        of them, :meth:`flush_wakes`, :meth:`free`); False wakes and flushes at every notify."""
        self._comm = comm
        self._backend: BackendName = choose_backend(comm, backend, layout)
        self._windows: dict[str, Window] = {}
        self._freed = False
        self._wakes = WakeBatch(shared.FUTEX) if batch_wakes else None

    @property
    def comm(self) -> MPI.Intracomm:
        """The communicator of every window in the set."""
        return self._comm

    @property
    def backend(self) -> BackendName:
        """Back end of every window in the set."""
        return self._backend

    @property
    def freed(self) -> bool:
        """True once :meth:`free` has been called."""
        return self._freed

    def allocate(
        self,
        name: str,
        shape: int | Sequence[SupportsIndex],
        dtype: Any,
        *,
        fill: Any = None,
        signal: bool = False,
    ) -> Window:
        """Collectively allocate a window in this set (see :func:`allocate_window`).

        Names are unique within the set.
        """
        self._check_live("allocate")
        _check_same_everywhere(self._comm, _signature(name, shape, dtype, fill, signal))
        return self._add(WindowSpec(name, shape, dtype, fill, signal))

    def allocate_many(self, specs: Sequence[WindowSpec]) -> list[Window]:
        """Collectively allocate every window of ``specs`` in order (see :meth:`allocate`), with one
        argument check for all of them: ranks that disagree on any window get the error on every rank
        before the first one is allocated, and the check is one allgather, not one per window."""
        self._check_live("allocate")
        names = [spec.name for spec in specs]
        _check_same_everywhere(self._comm, tuple(spec.signature() for spec in specs),
                               "the windows (name, shape, dtype, fill, signal) to allocate")
        repeated = sorted({n for n in names if names.count(n) > 1 or n in self._windows})
        if repeated:  # identical on every rank (checked above), so every rank raises before any allocation
            raise ValueError(f"window set: more than one window named {', '.join(map(repr, repeated))}")
        return [self._add(spec) for spec in specs]

    def _add(self, spec: WindowSpec) -> Window:
        if spec.name in self._windows:
            raise ValueError(f"window set: a window named '{spec.name}' already exists")
        win = _allocate(self._comm, spec.name, spec.shape, spec.dtype, self._backend, spec.fill, spec.signal,
                        self._wakes)
        self._windows[spec.name] = win
        return win

    def __getitem__(self, name: str) -> Window:
        self._check_live("lookup")
        return self._windows[name]

    def __contains__(self, name: object) -> bool:
        return name in self._windows

    def __iter__(self) -> Iterator[Window]:
        return iter(list(self._windows.values()))

    def __len__(self) -> int:
        return len(self._windows)

    def stats(self) -> dict[str, dict[str, int]]:
        """Counters of every window, by name."""
        return {name: w.stats.as_dict() for name, w in self._windows.items()}

    def flush_wakes(self) -> None:
        """Send the wake-ups and complete the notifies this rank's notifies on the set's windows
        deferred (see ``batch_wakes``).
        Call it before blocking outside the windows layer (an MPI collective, a sleep) while peers
        may wait for cells this rank changed."""
        if self._wakes is not None:
            self._wakes.flush()

    def free(self) -> None:
        """Collectively free every window (reverse order); idempotent.

        Keeps going if one free fails so that no window is left behind, then
        re-raises the first error.
        """
        if self._freed:
            return
        self._freed = True
        self.flush_wakes()
        first: BaseException | None = None
        for win in reversed(list(self._windows.values())):
            try:
                win.free()
            except BaseException as exc:  # re-raised below, after the other frees
                if first is None:
                    first = exc
        if first is not None:
            raise first

    def _check_live(self, op: str) -> None:
        if self._freed:
            raise WindowFreedError(f"{op}: rank {self._comm.Get_rank()}: window set has been freed")
