"""Back-end independent part of the RMA windows: interface, errors, checks.

A :class:`Window` is one collectively allocated buffer per rank of a
communicator, standing in for accelerator memory.  Everything that does not
depend on *how* a peer's memory is reached lives here, so that the two back
ends (``shared.py``: numpy views of an ``MPI_Win_allocate_shared`` segment,
``rma.py``: ``MPI_Put``/``MPI_Get`` on an ``MPI_Win_allocate`` window) only
implement four small primitives:

* ``_store``  - non-atomic write of a checked region into a peer,
* ``_load``   - read of a checked region of a peer into a fresh array,
* ``_poll_cell`` - one atomic read of a local INT32 cell that also drives MPI
  progress,
* ``_create_win`` - the MPI window allocation itself.

Atomic operations (element-wise ``atomic_add`` puts and signal ``notify``)
are MPI accumulate operations, implemented once, here -- except on INT32
windows of the shared back end, where *every* atomic (notify, fetch_notify,
atomic_add puts) is a CPU atomic on the mapped segment instead (see
``shared.py``).  The rule either way: all atomics on one window go through
one mechanism, because MPI only guarantees atomicity among its own
accumulate operations.

Built on these, besides put/get/notify/wait: :meth:`Window.check_put` (refuse
a put now, move it later: deferred visibility) and the word-atomic
:meth:`Window.store_words` / :meth:`Window.load_words` for shadow state many
ranks read while its owner writes (the race detector's clocks).  Signal
operations take the IR's ``NotifyOp`` / ``WaitCmp``; ``wait`` backs off with
``pldemu.mpi.Backoff``, sleeping in the kernel on the cell where the back end can
(``Window._sleeper``: shared windows on Linux; the policy's ``block`` turns it off).

Ordering contract: a data put returns only once it is complete at the target
(it is flushed, or followed by a memory barrier on the shared back end), and
``notify`` starts with a memory barrier.  Hence a ``put`` followed by a
``notify`` -- even on *another* window -- guarantees the data is visible once
the notify is observed by ``wait`` on the target, which ends with a memory
barrier of its own.

Completion of a notify: a window of its own completes every notify before it
returns (an RMA accumulate is flushed).  The RMA windows of a
:class:`~pldemu.windows.WindowSet` leave the flush to the set's batch
(``futex.WakeBatch``), which completes them together where the notifier's burst
ends: its next ``wait``, ``test`` or ``read_cell`` on any window of the set,
``flush_wakes``, ``free``, the end of an interpreter ``run()``, or
``WAKE_BOUND`` after the burst began -- the same points that send a shared
window's deferred wake-ups.  Peers observe the notify no later than that.
"""

from __future__ import annotations

import functools
import math
import operator
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Any, ClassVar, Literal, Self, SupportsIndex

import numpy as np
from mpi4py import MPI

from pldemu.ir.enums import NotifyOp, WaitCmp
from pldemu.mpi import DEFAULT_POLICY, Backoff, PollPolicy
from pldemu.npdtypes import is_float_dtype

from .futex import WakeBatch

BackendName = Literal["shared", "rma", "hybrid"]
"""Name of a concrete back end."""

BackendRequest = Literal["auto", "shared", "rma", "hybrid"]
"""What a caller may ask for; ``auto`` picks ``shared`` when it can (see ``choose_backend``)."""

SIGNAL_DTYPE = np.dtype(np.int32)
"""Signal cells are INT32, like HCCL's notify words."""

INT32_MIN = int(np.iinfo(SIGNAL_DTYPE).min)
INT32_MAX = int(np.iinfo(SIGNAL_DTYPE).max)
# Bounds as plain ints: building np.iinfo per notify cost more than the atomic's bookkeeping.

CellSleeper = Callable[[int, float], bool]
"""``sleeper(observed, timeout)``: sleep in the kernel while a cell still holds ``observed``, at
most ``timeout`` seconds (woken by the notify that changes it); False when the kernel sleep failed
and the wait must fall back to timed sleeps.  See ``Window._sleeper``."""

WaitHook = Callable[[int], None]
"""Called now and then while ``wait`` polls, with the last observed value."""

Shape = tuple[int, ...]


ATOMIC_ADD = NotifyOp.AtomicAdd
CMP_GE = WaitCmp.Ge
"""The defaults of notify and wait, bound once: an attribute of an Enum class costs about 60 ns in
Python 3.11, a module global 10 (a barrier round names them a dozen times)."""

_NOTIFY_MPI_OPS = {NotifyOp.AtomicAdd: MPI.SUM, NotifyOp.Set: MPI.REPLACE}
"""The MPI accumulate op of each notify op (the lookup doubles as the type check)."""


class WindowError(Exception):
    """Base class of every error raised by :mod:`pldemu.windows`."""


class WindowAccessError(WindowError, IndexError):
    """An access was refused before anything was read or written.

    The message names the operation, this rank, the peer, the window and the
    offending region or cell together with the bounds it violated.
    """


class WindowFreedError(WindowError, RuntimeError):
    """A window (or window set) was used after ``free()``."""


class WaitTimeout(WindowError, TimeoutError):
    """``wait`` reached its deadline before the cell satisfied the condition.

    Attributes carry what was being waited for and the last value observed,
    which is usually what a protocol debugger wants to see first.
    """

    def __init__(
        self,
        *,
        window: str,
        rank: int,
        cell: int,
        expected: int,
        cmp: WaitCmp,
        observed: int,
        waited: float,
        polls: int,
    ) -> None:
        self.window = window
        self.rank = rank
        self.cell = cell
        self.expected = expected
        self.cmp = cmp
        self.observed = observed
        self.waited = waited
        self.polls = polls
        self._state: dict[str, Any] = {
            "window": window,
            "rank": rank,
            "cell": cell,
            "expected": expected,
            "cmp": cmp,
            "observed": observed,
            "waited": waited,
            "polls": polls,
        }
        rel = "==" if cmp is WaitCmp.Eq else ">="
        super().__init__(
            f"wait: rank {rank} window '{window}' cell {cell}: timed out after {waited:.3f}s "
            f"({polls} polls) waiting for value {rel} {expected}; last observed value {observed}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only __init__: the default exception pickling (cls(*args))
        # would fail, and the runtime may ship errors between ranks.
        return (functools.partial(WaitTimeout, **self._state), ())


@dataclass(slots=True)
class WindowStats:
    """Per-window operation counters (plain ints: incrementing them is cheap).

    Counts are from this rank's point of view: ``puts`` are puts this rank
    issued on the window, ``bytes_put`` their payload, and so on.
    """

    puts: int = 0
    atomic_puts: int = 0
    gets: int = 0
    notifies: int = 0
    waits: int = 0
    polls: int = 0
    bytes_put: int = 0
    bytes_got: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for status reports / JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


PENDING_NOTIFIES = 64
"""Notifies of one window an RMA rank may leave incomplete before it flushes them itself (each
needs its own origin cell until the Flush)."""


def poison_value(dtype: np.dtype[Any]) -> Any:
    """The default fill of a new data window of ``dtype``.

    * float and complex: NaN (``nan+nanj``),
    * signed integers: the dtype minimum (e.g. ``-2147483648`` for int32),
    * unsigned integers: the dtype maximum (e.g. ``255`` for uint8),
    * anything else (bool, void, ...): ``None``, meaning every byte is ``0xA5``.

    Signal windows are not poisoned: the notify protocol needs them zeroed.
    """
    if is_float_dtype(dtype):
        return np.nan
    if dtype.kind == "c":
        return complex(np.nan, np.nan)
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    return None


POISON_BYTE = 0xA5
"""Byte pattern used for dtypes without a natural poison value."""


def _fill_array(arr: np.ndarray, dtype: np.dtype[Any], fill: Any) -> None:
    """Fill ``arr`` with ``fill``; ``None`` means the 0xA5 byte pattern."""
    if fill is None:
        arr.view(np.uint8)[...] = POISON_BYTE
    else:
        arr[...] = fill


def segment_array(buf: Any, dtype: np.dtype[Any], numel: int) -> np.ndarray:
    """Zero-copy 1-D numpy view of an MPI window segment (an mpi4py buffer).

    ``buf`` is typed ``Any`` because mpi4py's ``buffer`` stub does not
    declare the buffer protocol it implements.
    """
    return np.frombuffer(buf, dtype=dtype, count=max(numel, 1))[:numel]


def as_shape(value: int | Sequence[SupportsIndex] | np.ndarray, what: str) -> Shape:
    """Normalise an int or sequence of ints into a shape tuple (no bounds)."""
    if isinstance(value, (int, np.integer)):
        return (operator.index(value),)
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError as exc:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {value!r}") from exc


@dataclass(frozen=True, slots=True)
class RegionPlan:
    """A checked region, ready for either back end.

    ``disp`` is the flat element index of the region's first element in the
    peer's packed buffer (the MPI target displacement, ``disp_unit`` being the
    item size); ``layout`` the region as ``(count, element_stride)`` pairs,
    outermost first, after merging contiguous dims and dropping unit dims;
    ``slices`` the same region for numpy.
    """

    view_shape: Shape
    offsets: Shape
    shape: Shape
    disp: int
    numel: int
    layout: tuple[tuple[int, int], ...]
    slices: tuple[slice, ...]


def region_layout(view_shape: Shape, shape: Shape) -> tuple[tuple[int, int], ...]:
    """Canonical ``(count, element_stride)`` description of a region.

    Dims of extent 1 are dropped (they only move the displacement) and an
    outer dim is merged into the inner one when the inner one is contiguous
    up to the outer stride, so e.g. full rows of a 2-D view become one run.
    Two regions with the same layout share one MPI datatype.
    """
    strides = [1] * len(view_shape)
    for i in range(len(view_shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * view_shape[i + 1]
    pairs: list[tuple[int, int]] = []
    for count, stride in zip(shape, strides, strict=True):
        if count == 1:
            continue
        pairs.append((count, stride))
    merged: list[tuple[int, int]] = []
    for count, stride in reversed(pairs):  # innermost first
        if merged and stride == merged[-1][0] * merged[-1][1]:
            inner_count, inner_stride = merged.pop()
            merged.append((count * inner_count, inner_stride))
        else:
            merged.append((count, stride))
    return tuple(reversed(merged))


class FreedOnExit:
    """A collective resource used as a context manager: leaving the ``with`` block calls ``free()``,
    and after an exception :meth:`abandon` (by default ``free()`` too: on every rank, error or not,
    so that the collective free cannot hang)."""

    def free(self) -> None:
        """Collectively release the resource; idempotent."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Leave the block after an exception; a resource whose free would hang when only this rank
        failed overrides it to leave the release to the MPI job's teardown."""
        self.free()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.free()
        else:
            self.abandon()


class Window(FreedOnExit, ABC):
    """One RMA window: a buffer of ``shape``/``dtype`` on every rank of ``comm``.

    Created collectively by :func:`pldemu.windows.allocate_window` (or
    :meth:`WindowSet.allocate`); freed collectively by :meth:`free` or by
    leaving a ``with`` block.  Every rank must call both.

    Data operations address an N-D rectangle (``offsets``/``shape``) of a
    *view* of the peer's packed buffer; ``view_shape`` must have the window's
    element count (the runtime reshapes windows freely).  Signal operations
    (``notify``/``wait``) address a flat INT32 cell index and need an INT32
    window.  Every access is checked before anything moves; a refused access
    raises :class:`WindowAccessError` and writes nothing.

    Views returned by :attr:`local`/:meth:`local_view` alias window memory
    and must not be used after :meth:`free` (the memory is unmapped).
    A window is meant to be driven by one thread per rank.
    """

    backend: ClassVar[BackendName]
    """``"shared"``, ``"rma"`` or ``"hybrid"``."""

    def __init__(
        self,
        comm: MPI.Intracomm,
        name: str,
        shape: Shape,
        dtype: np.dtype[Any],
        *,
        fill: Any,
        signal: bool,
        wakes: WakeBatch | None = None,
    ) -> None:
        """Allocate the window collectively; use ``allocate_window`` instead.  ``wakes``: where the
        wake-ups of this rank's notifies are deferred to (shared by a window set's windows), None
        to send each at once; only back ends that sleep in the kernel use it."""
        self._comm = comm
        self._wakes: WakeBatch | None = None  # set by _create_win where the back end defers wakes
        self._wake_batch = wakes
        self._name = name
        self._shape = shape
        self._dtype = dtype
        self._signal = signal
        self._rank: int = comm.Get_rank()
        self._size: int = comm.Get_size()
        self._numel = math.prod(shape)
        self._stats = WindowStats()
        self._types: dict[tuple[tuple[int, int], ...], MPI.Datatype] = {}
        self._plans: dict[tuple[Any, Any, Shape], RegionPlan] = {}  # see _plan
        self._base_type, self._base_is_predefined = _mpi_base_type(dtype)
        # MPI_SUM needs a predefined numeric type.  float16 is excluded: MPICH
        # 5.0.2 sums MPIX_C_FLOAT16 as raw integers (1.0 + 1.0 -> 32768.0).
        self._atomic_add_ok = (
            self._base_is_predefined and dtype.kind in "iufc" and dtype != np.dtype(np.float16)
        )
        # Notify origins, one cell per notify not completed yet (see _cell_atomic): MPI may read an
        # origin until the Flush, and mpi4py keeps none alive for us.
        self._origins = np.zeros(PENDING_NOTIFIES, dtype=SIGNAL_DTYPE)
        self._incomplete = 0
        self._int32 = dtype == SIGNAL_DTYPE  # signal ops allowed (checked per op, so precomputed)
        # Never allocate 0 bytes: some MPI libraries hand back NULL segments
        # for them, which numpy cannot wrap; the view is cut to numel anyway.
        nbytes = max(self._numel, 1) * dtype.itemsize
        try:
            win, local = self._create_win(nbytes)
        except BaseException:
            if not self._base_is_predefined:
                self._base_type.Free()
            raise
        self._win: MPI.Win | None = win
        self._local: np.ndarray | None = local[: self._numel].reshape(shape)
        self._locked = False
        try:
            self._open_epoch(win, self._local, fill)
        except BaseException:
            self._release()
            raise

    def _open_epoch(self, win: MPI.Win, local: np.ndarray, fill: Any) -> None:
        """Start the passive-target epoch of the window's whole life and fill this rank's segment;
        collective (ends in a barrier every rank reaches, even after a failed fill)."""
        # We never take exclusive locks, so NOCHECK is valid and saves lock traffic.
        win.Lock_all(MPI.MODE_NOCHECK)
        self._locked = True
        try:
            _fill_array(local, self._dtype, fill)
            win.Sync()  # make the fill visible before anyone may access it
        finally:
            # Even on a failed fill every rank must reach the barrier, or the others would hang in it.
            self._comm.Barrier()

    # ----------------------------------------------------------------- back end

    @staticmethod
    @abstractmethod
    def allocate_mpi(comm: MPI.Intracomm, nbytes: int, disp_unit: int) -> MPI.Win:
        """The bare MPI window allocation of this back end (collective; see :func:`mpi_window`)."""

    @abstractmethod
    def _create_win(self, nbytes: int) -> tuple[MPI.Win, np.ndarray]:
        """Allocate the MPI window; return it and this rank's segment (1-D)."""

    @abstractmethod
    def _store(self, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        """Non-atomically write ``data`` (C-contiguous, window dtype) into the
        peer's region; complete at the target on return."""

    @abstractmethod
    def _load(self, peer: int, plan: RegionPlan) -> np.ndarray:
        """Return a fresh array holding the peer's region."""

    def _load_into(self, peer: int, plan: RegionPlan, out: np.ndarray) -> None:
        """Write the peer's region into ``out`` (region-shaped, any dtype it
        casts to, may alias window memory).  Back ends override this to skip
        the intermediate array of :meth:`_load` (a second full copy)."""
        out[...] = self._load(peer, plan)

    @abstractmethod
    def _poll_cell(self, cell: int, polls: int) -> int:
        """One atomic read of local cell ``cell`` that also drives MPI progress.

        ``polls`` is the number of polls already made in this ``wait``.
        """

    # ----------------------------------------------------------- introspection

    @property
    def name(self) -> str:
        """The window's name (used in every error message)."""
        return self._name

    @property
    def dtype(self) -> np.dtype[Any]:
        """Element type."""
        return self._dtype

    @property
    def shape(self) -> Shape:
        """Shape of each rank's segment (identical on all ranks)."""
        return self._shape

    @property
    def numel(self) -> int:
        """Elements per rank."""
        return self._numel

    @property
    def nbytes(self) -> int:
        """Bytes per rank."""
        return self._numel * self._dtype.itemsize

    @property
    def is_signal(self) -> bool:
        """True for signal windows (INT32, zero-initialised)."""
        return self._signal

    @property
    def comm(self) -> MPI.Intracomm:
        """The communicator the window was allocated on."""
        return self._comm

    @property
    def rank(self) -> int:
        """This rank in :attr:`comm`."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks in :attr:`comm` (valid peers are ``0..size-1``)."""
        return self._size

    @property
    def stats(self) -> WindowStats:
        """Live operation counters of this rank on this window."""
        return self._stats

    @property
    def freed(self) -> bool:
        """True once :meth:`free` has been called."""
        return self._win is None

    def __repr__(self) -> str:
        state = "freed" if self._win is None else "live"
        return (
            f"<{type(self).__name__} '{self._name}' {self.backend} {self._dtype} {self._shape} "
            f"rank {self._rank}/{self._size} {state}>"
        )

    # -------------------------------------------------------------- local data

    @property
    def local(self) -> np.ndarray:
        """This rank's own segment, zero-copy, with the window's shape.

        After local stores that peers will read, call :meth:`sync` (``notify``
        does it for you).
        """
        return self._live_local("local")

    def local_view(self, view_shape: int | Sequence[SupportsIndex]) -> np.ndarray:
        """This rank's segment reshaped to ``view_shape`` (zero-copy)."""
        local = self._live_local("local_view")
        vs = as_shape(view_shape, "view_shape")
        self._check_view(vs, "local_view", self._rank)
        return local.reshape(vs)

    def sync(self) -> None:
        """Memory barrier on this rank's window memory (``MPI_Win_sync``)."""
        self._live_win("sync").Sync()

    # --------------------------------------------------------------- data ops

    def put(
        self,
        peer: int,
        view_shape: int | Sequence[SupportsIndex],
        offsets: int | Sequence[SupportsIndex],
        data: np.ndarray,
        atomic_add: bool = False,
    ) -> None:
        """Write ``data`` into region ``offsets``/``data.shape`` of ``peer``.

        With ``atomic_add`` the write is an element-wise atomic add
        (``MPI_Accumulate`` with ``MPI_SUM``); it needs an integer, float or
        complex dtype other than float16.  Complete at the target on
        return.  ``data`` must have the region's shape exactly and a dtype
        that casts safely to the window's.
        """
        plan = self.check_put(peer, view_shape, offsets, data, atomic_add)
        win = self._live_win("put")
        buf = np.ascontiguousarray(data, dtype=self._dtype)
        if plan.numel:
            if atomic_add:
                self._accumulate(win, peer, plan, buf, MPI.SUM)
            else:
                self._store(peer, plan, buf)
        st = self._stats
        if atomic_add:
            st.atomic_puts += 1
        else:
            st.puts += 1
        st.bytes_put += buf.nbytes

    def check_put(self, peer: int, view_shape: int | Sequence[SupportsIndex], offsets: int | Sequence[SupportsIndex],
                  data: np.ndarray, atomic_add: bool = False) -> RegionPlan:
        """Refuse, as :meth:`put` would, a put that cannot happen, but move nothing (for a caller that
        issues the put later, deferred visibility, and must fail where the program put); return
        where the region lives."""
        self._live_win("put")
        arr = np.asarray(data)
        op = "put"
        plan = self._plan(op, peer, view_shape, offsets, arr.shape)
        if arr.dtype != self._dtype and not np.can_cast(arr.dtype, self._dtype, "safe"):
            raise self._access_error(
                op, peer, f"data dtype {arr.dtype} does not cast safely to window dtype {self._dtype}"
            )
        if atomic_add and not self._atomic_add_ok:
            raise self._access_error(op, peer, f"atomic_add is not supported for dtype {self._dtype}")
        return plan

    # ----------------------------------------------------- word-atomic access

    def store_words(self, peer: int, offset: int, data: np.ndarray) -> None:
        """Write the 1-D ``data`` at flat ``offset`` of ``peer`` so that a concurrent
        :meth:`load_words` never sees a torn element; complete at the target on return.

        For shadow state many ranks read while its owner writes (the race detector's clocks).
        ``rma``: ``MPI_Accumulate(MPI_REPLACE)``; ``shared``: aligned stores between memory
        barriers (not atomic against ``atomic_add`` puts into the same elements).
        """
        win = self._live_win("store_words")
        arr = np.ascontiguousarray(data, dtype=self._dtype).reshape(-1)
        plan = self._plan("store_words", peer, (self._numel,), (offset,), arr.shape)
        if plan.numel:
            self._store_words(win, peer, plan, arr)

    def load_words(self, peer: int, offset: int, count: int) -> np.ndarray:
        """Read ``count`` elements at flat ``offset`` of ``peer`` (a fresh array), each element
        atomically with respect to :meth:`store_words` (``rma``: ``MPI_Get_accumulate(MPI_NO_OP)``)."""
        win = self._live_win("load_words")
        plan = self._plan("load_words", peer, (self._numel,), (offset,), (count,))
        if not plan.numel:
            return np.empty(0, dtype=self._dtype)
        return self._load_words(win, peer, plan)

    def _store_words(self, win: MPI.Win, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        win.Accumulate(self._origin(data, plan), peer, self._target(plan), MPI.REPLACE)
        win.Flush(peer)

    def _load_words(self, win: MPI.Win, peer: int, plan: RegionPlan) -> np.ndarray:
        out = np.empty(plan.shape, dtype=self._dtype)
        noop = np.empty_like(out)  # ignored by MPI_NO_OP, but origin and result must not alias
        win.Get_accumulate(self._origin(noop, plan), self._origin(out, plan), peer, self._target(plan), MPI.NO_OP)
        win.Flush(peer)
        return out

    def get(
        self,
        peer: int,
        view_shape: int | Sequence[SupportsIndex],
        offsets: int | Sequence[SupportsIndex],
        shape: int | Sequence[SupportsIndex],
        *,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return a fresh copy of region ``offsets``/``shape`` of ``peer``.

        With ``out`` (an array of the region's shape) the region is written
        into ``out`` instead, in one copy, and ``out`` is returned.
        """
        if out is None:
            return self._get("get", peer, view_shape, offsets, shape)
        op = "get"
        self._live_win(op)
        plan = self._plan(op, peer, view_shape, offsets, shape)
        if out.shape != plan.shape:
            raise self._access_error(op, peer, f"out has shape {list(out.shape)}, the region {list(plan.shape)}")
        if plan.numel:
            self._load_into(peer, plan, out)
        self._stats.gets += 1
        self._stats.bytes_got += plan.numel * self._dtype.itemsize
        return out

    def remote_load(
        self,
        peer: int,
        view_shape: int | Sequence[SupportsIndex],
        offsets: int | Sequence[SupportsIndex],
        shape: int | Sequence[SupportsIndex],
    ) -> np.ndarray:
        """Same as :meth:`get`; errors name the op ``remote_load``."""
        return self._get("remote_load", peer, view_shape, offsets, shape)

    def _get(
        self,
        op: str,
        peer: int,
        view_shape: int | Sequence[SupportsIndex],
        offsets: int | Sequence[SupportsIndex],
        shape: int | Sequence[SupportsIndex],
    ) -> np.ndarray:
        if self._win is None:
            self._live_win(op)  # raises
        plan = self._plan(op, peer, view_shape, offsets, shape)
        out = self._load(peer, plan) if plan.numel else np.empty(plan.shape, dtype=self._dtype)
        st = self._stats
        st.gets += 1
        st.bytes_got += out.nbytes
        return out

    # ------------------------------------------------------------- signal ops

    def notify(self, peer: int, cell: int, value: int, op: NotifyOp = ATOMIC_ADD) -> None:
        """Atomically add ``value`` to (``AtomicAdd``) or replace (``Set``) ``peer``'s
        INT32 ``cell``.

        Ordered after every put this rank issued before (on any window): the
        data is visible to whoever observes the notify.  ``peer == rank``
        goes through the same atomic path as a remote notify.  Complete at
        the target on return, except on RMA windows of a window set, which
        complete it at the end of this rank's burst of notifies (see the
        module docstring).
        """
        self._notify(peer, cell, value, op, False)

    def fetch_notify(self, peer: int, cell: int, value: int, op: NotifyOp = ATOMIC_ADD) -> int:
        """:meth:`notify` as one fetching atomic (``MPI_Fetch_and_op``): return the cell's value just
        before this notify landed, so the notifier knows exactly what the cell became (the
        invariant checks of ``pldemu.runtime.instrument.invariants`` need it; a read after the notify could
        already include a peer's later update)."""
        return self._notify(peer, cell, value, op, True)

    def _notify(self, peer: int, cell: int, value: int, op: NotifyOp, fetch: bool) -> int:
        opname = "notify"
        win = self._live_win(opname)
        peer = self._check_peer(opname, peer)
        cell = self._check_cell(opname, peer, cell)
        if not isinstance(op, NotifyOp):
            raise TypeError(f"notify: op must be a NotifyOp, got {op!r}")
        if not INT32_MIN <= value <= INT32_MAX:
            raise self._access_error(
                opname, peer, f"cell {cell}: value {value} outside INT32 [{INT32_MIN}, {INT32_MAX}]"
            )
        old = self._cell_atomic(win, peer, cell, value, op, fetch)
        self._stats.notifies += 1
        return old

    def _cell_atomic(self, win: MPI.Win, peer: int, cell: int, value: int, op: NotifyOp, fetch: bool) -> int:
        """The atomic of notify (``fetch`` False: returns 0) and fetch_notify (returns the value the
        cell held just before), complete at the target on return, ordered after this rank's earlier
        stores.  MPI accumulates; the shared back end overrides this with CPU atomics on INT32
        windows (a sequentially consistent atomic is its own barrier)."""
        mpi_op = _NOTIFY_MPI_OPS[op]
        # Puts are already complete at their targets when put() returns, so only this rank's own
        # local stores still need ordering: a memory barrier before the accumulate.
        win.Sync()
        if not fetch:
            k = self._incomplete
            origins = self._origins
            origins[k] = value
            win.Accumulate([origins[k:k + 1], 1, MPI.INT32_T], peer, (cell, 1, MPI.INT32_T), mpi_op)
            batch = self._wakes
            if batch is None:
                win.Flush(peer)  # k is 0: nothing is ever left incomplete here
                return 0
            # In a window set the Flush is deferred to the end of the burst (the set's batch: this
            # rank's next wait, test or read_cell, the end of a run, free): one Flush_all for a
            # barrier's credits instead of one round trip each (docs/benchmarks.md, issue 23).
            self._incomplete = k + 1
            if k == 0:
                batch.defer_completion(self)
            if k + 1 == PENDING_NOTIFIES:
                self.complete_notifies()
            return 0
        buf = np.array([value, 0], dtype=SIGNAL_DTYPE)
        win.Fetch_and_op([buf[0:1], 1, MPI.INT32_T], [buf[1:2], 1, MPI.INT32_T], peer, cell, mpi_op)
        win.Flush(peer)
        return int(buf[1])

    def test(self, cell: int, expected: int, cmp: WaitCmp = CMP_GE) -> bool:
        """One poll of :meth:`wait`, never blocking: True when this rank's ``cell``
        already equals (``Eq``) or reaches (``Ge``) ``expected``, with the same
        acquire barrier as a satisfied wait (peers' data is then visible)."""
        win = self._win
        if win is None:
            win = self._live_win("wait")  # raises
        cell = self._check_wait(cell, cmp)
        wakes = self._wakes
        if wakes is not None:
            wakes.flush()  # a poll ends this rank's burst of notifies (see futex.WakeBatch)
        value = self._poll_cell(cell, 0)
        st = self._stats
        st.polls += 1
        if value >= expected if cmp is CMP_GE else value == expected:
            win.Sync()
            st.waits += 1
            return True
        return False

    def read_cell(self, cell: int) -> int:
        """One atomic read of this rank's INT32 ``cell`` (no waiting), with the acquire barrier of
        a satisfied wait after it."""
        win = self._live_win("read_cell")
        cell = self._check_cell("read_cell", self._rank, cell)
        wakes = self._wakes
        if wakes is not None:
            wakes.flush()  # a read may be a poll loop of its own: end the burst here too
        value = self._poll_cell(cell, 0)
        win.Sync()
        return value

    def wait(
        self,
        cell: int,
        expected: int,
        cmp: WaitCmp = CMP_GE,
        deadline: float | None = None,
        *,
        timeout: float | None = None,
        hook: WaitHook | None = None,
        policy: PollPolicy | None = None,
    ) -> int:
        """Poll this rank's INT32 ``cell`` until it equals (``Eq``) or reaches
        (``Ge``) ``expected``; return the value observed.

        ``deadline`` is an absolute :func:`time.monotonic` time, ``timeout``
        a duration from now; the earlier one wins, neither means forever.
        On expiry :class:`WaitTimeout` is raised with the last observed value.
        Every poll is an atomic read that also makes MPI calls, so remote
        writes keep landing across hosts.  Between polls the wait backs off
        as ``policy`` says (:class:`pldemu.mpi.Backoff`): on shared windows
        its sleeps are kernel sleeps on the cell, ended by the notify that
        changes it (``policy.block``); ``hook(last_value)``
        is called about every ``policy.hook_interval`` seconds.  On return,
        data that peers put before their notify is visible in :attr:`local`.
        """
        win = self._live_win("wait")
        cell = self._check_wait(cell, cmp)
        wakes = self._wakes
        if wakes is not None:
            wakes.flush()  # the end of this rank's burst of notifies (see futex.WakeBatch)
        st = self._stats
        st.waits += 1
        st.polls += 1
        # One poll before any bookkeeping: inside a running recipe most waits
        # are already satisfied (the credit arrived while this rank worked).
        value = self._poll_cell(cell, 0)
        if not (value >= expected if cmp is CMP_GE else value == expected):
            end = math.inf if deadline is None else deadline
            if timeout is not None:
                end = min(end, time.monotonic() + timeout)
            value = self._poll_until(cell, expected, cmp, value, end, hook, policy or DEFAULT_POLICY)
        # Acquire side of the put->notify ordering: loads of local data
        # after this see what the notifier wrote before.
        win.Sync()
        return value

    def _poll_until(self, cell: int, expected: int, cmp: WaitCmp, observed: int, end: float,
                    hook: WaitHook | None, policy: PollPolicy) -> int:
        """The rest of a :meth:`wait` whose first poll saw ``observed``: poll between the pauses of
        ``policy``'s back-off until the cell meets ``expected``; return the value seen then, or raise
        :class:`WaitTimeout` once ``end`` has passed."""
        value, polls, ge = observed, 1, cmp is CMP_GE

        def block(timeout: float) -> bool:
            # Looked up when the back-off first sleeps in the kernel (after block_after), not for
            # every wait that blocks a moment; False where this window cannot.
            sleeper = self._sleeper(cell)
            return sleeper is not None and sleeper(value, timeout)

        backoff = Backoff(policy, end, None if hook is None else lambda: hook(value), block)
        try:
            while True:
                if not backoff.pause():
                    raise WaitTimeout(window=self._name, rank=self._rank, cell=cell, expected=expected,
                                      cmp=cmp, observed=value, waited=backoff.waited, polls=polls)
                value = self._poll_cell(cell, polls)
                polls += 1
                if value >= expected if ge else value == expected:
                    return value
        finally:
            self._stats.polls += polls - 1  # the first poll was counted by wait()

    def _sleeper(self, cell: int) -> CellSleeper | None:
        """How a wait on this rank's ``cell`` sleeps in the kernel until the cell changes, or None:
        the wait then backs off with timed sleeps between polls.  None here: an RMA window's waits
        must keep driving MPI progress (every poll is an MPI call), and a notify through MPI
        accumulates wakes nobody.  The shared back end overrides it (futexes, ``shared.py``)."""
        return None

    def _check_wait(self, cell: int, cmp: WaitCmp) -> int:
        if self._int32 and type(cell) is int and 0 <= cell < self._numel and type(cmp) is WaitCmp:
            return cell  # the common case, in one test
        cell = self._check_cell("wait", self._rank, cell)
        if not isinstance(cmp, WaitCmp):
            raise TypeError(f"wait: cmp must be a WaitCmp, got {cmp!r}")
        return cell

    # ------------------------------------------------------------------- free

    def flush_wakes(self) -> None:
        """Send the wake-ups and complete the notifies this rank deferred (see
        :class:`pldemu.windows.futex.WakeBatch`; a no-op on windows that defer neither).  Call it
        before blocking outside the windows layer while peers may wait for cells this rank
        changed; ``wait``, ``test``, ``read_cell`` and ``free`` call it themselves."""
        if self._wakes is not None:
            self._wakes.flush()

    def complete_notifies(self) -> None:
        """Complete this rank's notifies on the window whose ``Flush`` was deferred (see
        :meth:`_cell_atomic`; the window set's batch calls it at the end of a burst)."""
        if self._incomplete and self._win is not None:
            self._incomplete = 0
            self._win.Flush_all()

    def free(self) -> None:
        """Collectively free the window; idempotent.  All ranks must call it."""
        if self._win is None:
            return
        self.flush_wakes()
        self._release()

    def _release(self) -> None:
        win, self._win = self._win, None
        self._local = None
        try:
            if win is not None:
                try:
                    if self._locked:
                        self._locked = False
                        win.Unlock_all()  # completes this rank's outstanding ops
                finally:
                    win.Free()
        finally:
            types, self._types = self._types, {}
            for t in types.values():
                t.Free()
            if not self._base_is_predefined:
                self._base_type.Free()

    # ------------------------------------------------------------- checks etc.

    def _live_win(self, op: str) -> MPI.Win:
        win = self._win
        if win is None:
            raise WindowFreedError(f"{op}: rank {self._rank}: window '{self._name}' has been freed")
        return win

    def _live_local(self, op: str) -> np.ndarray:
        local = self._local
        if local is None:
            raise WindowFreedError(f"{op}: rank {self._rank}: window '{self._name}' has been freed")
        return local

    def _access_error(self, op: str, peer: object, detail: str) -> WindowAccessError:
        return WindowAccessError(
            f"{op}: rank {self._rank} -> peer {peer} on window '{self._name}' "
            f"({self._dtype}{list(self._shape)}, {self._size} ranks): {detail}"
        )

    def _check_peer(self, op: str, peer: Any) -> int:
        if type(peer) is int and 0 <= peer < self._size:
            return peer  # the common case, without operator.index
        try:
            p = operator.index(peer)
        except TypeError:
            raise self._access_error(op, peer, f"peer must be an int, got {type(peer).__name__}") from None
        if not 0 <= p < self._size:
            raise self._access_error(op, p, f"peer {p} out of range [0, {self._size})")
        return p

    def _check_cell(self, op: str, peer: int, cell: Any) -> int:
        if self._int32 and type(cell) is int and 0 <= cell < self._numel:
            return cell  # the common case
        if self._dtype != SIGNAL_DTYPE:
            raise self._access_error(op, peer, f"signal ops need an INT32 window, this one is {self._dtype}")
        try:
            c = operator.index(cell)
        except TypeError:
            raise self._access_error(op, peer, f"cell must be an int, got {type(cell).__name__}") from None
        if not 0 <= c < self._numel:
            raise self._access_error(op, peer, f"cell {c} out of range [0, {self._numel})")
        return c

    def _check_view(self, vs: Shape, op: str, peer: int) -> None:
        if any(d < 0 for d in vs) or math.prod(vs) != self._numel:
            raise self._access_error(
                op,
                peer,
                f"view shape {list(vs)} has {math.prod(vs)} elements, window has {self._numel}",
            )

    def _plan(
        self,
        op: str,
        peer: int,
        view_shape: int | Sequence[SupportsIndex],
        offsets: int | Sequence[SupportsIndex],
        shape: int | Sequence[SupportsIndex],
    ) -> RegionPlan:
        """Check peer, view and region; return where the region lives.

        Plans are cached per (view, offsets, shape): a recipe run again and
        again addresses the same regions, and building a plan (normalising,
        checking, the MPI layout) cost more than moving a small tile.  A hit
        costs one dictionary lookup and the peer's check (the plan does not
        depend on the peer); only a miss normalises the arguments.
        """
        if type(view_shape) is tuple and type(offsets) is tuple and type(shape) is tuple:
            cached = self._plans.get((view_shape, offsets, shape))
            if cached is not None:
                if not (type(peer) is int and 0 <= peer < self._size):
                    self._check_peer(op, peer)  # raises, or normalises an index-like peer
                return cached
        p = self._check_peer(op, peer)
        shape = as_shape(shape, "shape")
        key = (view_shape, offsets, shape) if type(view_shape) is tuple and type(offsets) is tuple else None
        vs = as_shape(view_shape, "view_shape")
        off = as_shape(offsets, "offsets")
        self._check_view(vs, op, p)
        where = f"region offsets {list(off)} shape {list(shape)} in view {list(vs)}"
        if not len(off) == len(shape) == len(vs):
            raise self._access_error(
                op,
                p,
                f"{where}: rank mismatch (offsets {len(off)}-D, shape {len(shape)}-D, view {len(vs)}-D)",
            )
        for d, (o, n, v) in enumerate(zip(off, shape, vs, strict=True)):
            if o < 0 or n < 0 or o + n > v:
                raise self._access_error(op, p, f"{where}: dim {d} covers [{o}, {o + n}) outside [0, {v})")
        disp = 0
        for o, v in zip(off, vs, strict=True):
            disp = disp * v + o
        plan = RegionPlan(
            view_shape=vs,
            offsets=off,
            shape=shape,
            disp=disp,
            numel=math.prod(shape),
            layout=region_layout(vs, shape),
            slices=tuple(slice(o, o + n) for o, n in zip(off, shape, strict=True)),
        )
        if key is not None:
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()  # a sweep over more regions than this: start over
            self._plans[key] = plan
        return plan

    def _target(self, plan: RegionPlan) -> tuple[int, int, MPI.Datatype]:
        """MPI target spec ``(disp, count, datatype)`` of a checked region.

        Derived datatypes are built once per layout and cached on the window
        (freed with it).  A contiguous run needs none.
        """
        layout = plan.layout
        if not layout:
            return (plan.disp, 1, self._base_type)
        if len(layout) == 1 and layout[0][1] == 1:
            return (plan.disp, layout[0][0], self._base_type)
        dtype = self._types.get(layout)
        if dtype is None:
            dtype = _layout_datatype(self._base_type, self._dtype.itemsize, layout)
            self._types[layout] = dtype
        return (plan.disp, 1, dtype)

    def _origin(self, buf: np.ndarray, plan: RegionPlan) -> list[Any]:
        """MPI origin spec of a C-contiguous buffer holding the region."""
        return [buf, plan.numel, self._base_type]

    def _accumulate(self, win: MPI.Win, peer: int, plan: RegionPlan, buf: np.ndarray, op: MPI.Op) -> None:
        """Atomic element-wise ``op`` of ``buf`` into the peer's region.

        Shared by both back ends (the shared one overrides it for INT32
        windows, whose atomics are all CPU atomics).
        ``buf`` stays referenced by this frame until the flush, because
        mpi4py does not keep origin buffers alive on its own.
        """
        # Order earlier local stores / shared-memory copies before the atomic.
        win.Sync()
        win.Accumulate(self._origin(buf, plan), peer, self._target(plan), op)
        win.Flush(peer)


_PLAN_CACHE_SIZE = 8192
"""Region plans a window keeps (a 64 MiB ring allreduce addresses ~6k regions per peer window)."""


def _mpi_base_type(dtype: np.dtype[Any]) -> tuple[MPI.Datatype, bool]:
    """MPI element type of ``dtype``; ``(type, is_predefined)``.

    Plain native scalars map to their predefined MPI type (needed for
    accumulates); anything else is moved as opaque bytes.
    """
    if dtype.fields is None and dtype.subdtype is None and dtype.isnative and dtype.kind in "biufc":
        try:
            return MPI.Datatype.fromcode(dtype.char), True
        except (KeyError, ValueError):
            pass
    t = MPI.BYTE.Create_contiguous(dtype.itemsize)
    t.Commit()
    return t, False


def _layout_datatype(base: MPI.Datatype, itemsize: int, layout: tuple[tuple[int, int], ...]) -> MPI.Datatype:
    """Nested hvectors describing ``layout``; committed.

    Each level's extent ends exactly at the region's last element, so the
    type never reaches past the window even for regions at its far end.
    """
    current = base
    owned: list[MPI.Datatype] = []
    try:
        for count, stride in reversed(layout):  # innermost first
            if stride == 1:
                nxt = current.Create_contiguous(count)
            else:
                nxt = current.Create_hvector(count, 1, stride * itemsize)
            owned.append(nxt)
            current = nxt
        current.Commit()
    except BaseException:
        for t in owned:
            t.Free()
        raise
    for t in owned[:-1]:
        t.Free()  # intermediate types are not needed once the outer one exists
    return current
