"""Shared-memory back end: ``MPI_Win_allocate_shared`` + numpy views.

Usable when every rank of the communicator lives on one node.  Each peer's
segment is mapped into this process (``MPI_Win_shared_query``), so plain data
puts and gets are numpy copies into/out of the peer's view, bracketed by
``MPI_Win_sync`` memory barriers.

Atomics.  On INT32 windows (every signal window) each atomic -- ``notify``,
``fetch_notify``, ``atomic_add`` puts -- is a sequentially consistent CPU
atomic (``__atomic_fetch_add_4`` / ``__atomic_exchange_4`` from libatomic,
through ctypes) on the peer's mapped cell.  An MPI accumulate + flush on a
shared window costs ~4 us (MPICH serialises them with a process-shared
mutex, and an oversubscribed rank preempted while holding it stalls every
notifier for a time slice: notifies of 1-8 ms were measured at 4 ranks on 2
cores); the CPU atomic costs a ctypes call.  Mixing the two kinds on one cell
would not be atomic -- MPI only guarantees atomicity among its own
accumulates -- so the choice is per window and covers all its atomics; polls
are plain 4-byte loads (a ctypes array over the own segment), and a satisfied
wait, test or read_cell makes the acquire ``MPI_Win_sync`` after its poll.
Other dtypes, and any machine without libatomic, keep ``MPI_Accumulate`` (see
``base.py``).

Blocking waits.  A wait on such a window that is still unsatisfied after the
back-off's spins and yields sleeps in the kernel on its cell (``futex.py``:
``FUTEX_WAIT`` on the mapped cell with the value last polled, timed to the
wait's deadline and next hook call) instead of timed sleeps, so an
oversubscribed rank leaves its core to the ranks it waits for and wakes when
the credit lands.  Each segment carries one sleeper word after its cells:
the cell its owner sleeps on, plus one (0: awake).  The protocol, which
loses no wake-up: the waiter writes the word (a sequentially consistent
atomic), then the kernel compares the cell with the value seen and sleeps;
every writer of a cell (notify, fetch_notify, an atomic_add put, a plain put
into the window) first changes it, then reads the target's sleeper word, and
wakes the cell only when the owner sleeps on exactly that cell.  Either the
writer sees the word, or the kernel's compare sees the new value.  The word
is one per segment because only the segment's owner waits on its cells (one
thread per rank drives a window), and a rank notifying its own cells reads
no word: it is not asleep.  Windows of a ``WindowSet`` defer the wake to the
end of the notifier's burst of notifies (``futex.WakeBatch``, where the
argument that deferral loses nothing is).  The notify's atomic needs no
``MPI_Win_sync`` before it: a sequentially consistent atomic already orders
the notifier's earlier stores (a put's copy) before it.  Without libatomic
or futexes (``futex.load_futex`` is None) the window has no word and waits
keep the timed back-off.  Seam for a back end composing this one (hybrid windows):
:meth:`SharedWindow.sleeper` and :meth:`SharedWindow.wake_cells`.
"""

from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np
from mpi4py import MPI

from .base import (
    ATOMIC_ADD,
    CMP_GE,
    INT32_MAX,
    INT32_MIN,
    SIGNAL_DTYPE,
    BackendName,
    CellSleeper,
    NotifyOp,
    RegionPlan,
    WaitCmp,
    Window,
    segment_array,
)
from .futex import Futex, load_futex

_SEQ_CST = 5
"""``__ATOMIC_SEQ_CST``: the atomic is also a full barrier, so earlier stores (a put's copy) are
visible before it, like the ``MPI_Win_sync`` + accumulate it replaces."""

AtomicFn = Callable[[int, int, int], int]
"""``fn(address, uint32 operand, memorder) -> uint32 previous value``."""

LoadFn = Callable[[int, int], int]
"""``fn(address, memorder) -> uint32 value``."""


RawAtomicFn = Callable[[ctypes.c_void_p, int, int], int]
"""``fn(address as a c_void_p, int32 operand, memorder) -> uint32 previous value``: the same entry
point without ctypes argument conversion (see :class:`CpuAtomics`)."""


@dataclass(frozen=True, slots=True)
class CpuAtomics:
    """libatomic's 4-byte fetch-add, exchange and load; ``raw`` holds the fetch-add and exchange
    once more without ``argtypes``, for the notify fast path: ctypes then passes a ``c_void_p``
    as the pointer and a Python int as a C ``int`` without building a converter object per
    argument (250 ns per call against 600-800 ns).  Callers pass the operand as a signed INT32:
    the same 32 bits as the ``uint32_t`` parameter in every ABI that passes both in one register."""

    add: AtomicFn
    xchg: AtomicFn
    load: LoadFn
    raw: Mapping[NotifyOp, RawAtomicFn]


def _libatomic_names() -> Iterator[str]:
    """Where libatomic may be: its usual soname, then what ``ctypes.util.find_library`` finds, asked
    only if that fails (it runs ldconfig: about 20 ms of every rank's start-up)."""
    yield "libatomic.so.1"
    import ctypes.util

    found = ctypes.util.find_library("atomic")
    if found:
        yield found


def _load_atomics() -> CpuAtomics | None:
    """libatomic's 4-byte atomics, or None (then MPI accumulates are used)."""
    for name in _libatomic_names():
        try:
            lib = ctypes.CDLL(name)
            add = getattr(lib, "__atomic_fetch_add_4")
            xchg = getattr(lib, "__atomic_exchange_4")
            load = getattr(lib, "__atomic_load_4")
        except (OSError, AttributeError):
            continue
        for fn in (add, xchg):
            fn.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int)
            fn.restype = ctypes.c_uint32
        load.argtypes = (ctypes.c_void_p, ctypes.c_int)
        load.restype = ctypes.c_uint32
        raw = ctypes.CDLL(name)  # a second handle: its function objects carry no argtypes
        raw_add, raw_xchg = raw["__atomic_fetch_add_4"], raw["__atomic_exchange_4"]
        for fn in (raw_add, raw_xchg):
            fn.restype = ctypes.c_uint32
        ops = MappingProxyType({NotifyOp.AtomicAdd: raw_add, NotifyOp.Set: raw_xchg})
        return CpuAtomics(add, xchg, load, ops)
    return None


CPU_ATOMICS: CpuAtomics | None = _load_atomics()
"""The CPU atomics INT32 windows use, None when libatomic is missing.  Read when a window is
allocated (tests set it to None to exercise the MPI path)."""

FUTEX: Futex | None = load_futex()
"""The kernel sleeps of blocking waits, None where futexes are unavailable.  Read when a window
is allocated."""

_WAITERS_BYTES = 4
"""The sleeper word after a signal segment's cells (int32)."""

_RMW_IS_FULL_BARRIER = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
"""Whether a locked read-modify-write is a full barrier here (x86-TSO: no later load is performed
before it), so the sleeper word may be read with a plain load after a notify's atomic."""

_IPROBE_EVERY = 16
"""A poll calls ``Iprobe`` every this many polls (not the first one of a
wait, which usually succeeds: MPICH completes shared-memory accumulates at
the origin, measured 2 us per Flush with the target asleep): ``Win_sync``
alone is a memory barrier, not a progress call, and an MPI that processes
accumulates aimed at us in its progress engine needs us to call into it."""


class SharedWindow(Window):
    """Window whose peers' segments are numpy views of node-shared memory."""

    backend: ClassVar[BackendName] = "shared"

    _peers: list[np.ndarray]

    @staticmethod
    def allocate_mpi(comm: MPI.Intracomm, nbytes: int, disp_unit: int) -> MPI.Win:
        info = MPI.Info.Create()
        try:
            # Page-aligned per-rank segments: avoids false sharing between
            # neighbours' signal cells and keeps every dtype aligned.
            info.Set("alloc_shared_noncontig", "true")
            return MPI.Win.Allocate_shared(nbytes, disp_unit, info, comm)
        finally:
            info.Free()

    def _create_win(self, nbytes: int) -> tuple[MPI.Win, np.ndarray]:
        int32 = self._dtype == SIGNAL_DTYPE
        atomics = CPU_ATOMICS if int32 else None
        futex = FUTEX if atomics is not None else None
        win = self.allocate_mpi(self._comm, nbytes + (_WAITERS_BYTES if futex else 0), self._dtype.itemsize)
        try:
            win.Set_name(self._name[:120])
            peers = []
            for r in range(self._size):
                buf, _ = win.Shared_query(r)
                peers.append(segment_array(buf, self._dtype, self._numel))
        except BaseException:
            win.Free()
            raise
        self._peers = peers
        # Segment base addresses for the CPU atomics (the mapping lives as long as the window).
        self._addrs = [int(p.ctypes.data) for p in peers]
        self._atomics = atomics
        self._raw_ops: dict[NotifyOp, RawAtomicFn] = dict(atomics.raw) if atomics is not None else {}
        self._ptrs: dict[int, ctypes.c_void_p] = {}  # peer * numel + cell -> the cell's address (notify)
        # This rank's cells as a ctypes array: indexing it is one plain 4-byte load returning an int.
        self._cells = (ctypes.c_int32 * self._numel).from_address(self._addrs[self._rank]) if int32 else None
        self._futex = futex
        self._can_sleep = futex is not None
        self._waiters = [a + nbytes for a in self._addrs]  # each segment's sleeper word, after its cells
        self._sleepers: list[ctypes.c_int32] = []
        if futex is not None:
            # Zeroed before the allocation's closing barrier (Window.__init__): no peer reads it earlier.
            ctypes.c_int32.from_address(self._waiters[self._rank]).value = 0
            self._sleepers = [ctypes.c_int32.from_address(a) for a in self._waiters]
            self._wakes = self._wake_batch
        return win, peers[self._rank]

    def _release(self) -> None:
        self._peers = []  # drop our aliases of peer memory before it is unmapped
        self._ptrs = {}
        self._cells = None
        super()._release()

    def notify(self, peer: int, cell: int, value: int, op: NotifyOp = ATOMIC_ADD) -> None:
        """:meth:`Window.notify`.  Fast path of an INT32 window with CPU atomics: plain in-range
        ints, the general path's checks inlined and one ctypes call without argument conversion
        (``CpuAtomics.raw``); every other case, and every refusal, goes the general way.  Every
        call and attribute load counts here: a barrier round is nine of these and tests."""
        fn = self._raw_ops.get(op) if self._win is not None and type(op) is NotifyOp else None
        if (fn is None or type(peer) is not int or type(cell) is not int or type(value) is not int
                or not (0 <= peer < self._size and 0 <= cell < self._numel and INT32_MIN <= value <= INT32_MAX)):
            super().notify(peer, cell, value, op)
            return
        key = peer * self._numel + cell
        ptr = self._ptrs.get(key)
        if ptr is None:
            ptr = self._ptrs[key] = ctypes.c_void_p(self._addrs[peer] + 4 * cell)
        fn(ptr, value, _SEQ_CST)  # a sequentially consistent atomic: see _cell_atomic
        if peer != self._rank and self._sleepers and self._sleeper_of(peer) == cell + 1:
            self._wake(self._addrs[peer] + 4 * cell)
        self._stats.notifies += 1

    def test(self, cell: int, expected: int, cmp: WaitCmp = CMP_GE) -> bool:
        """:meth:`Window.test` with its steps inlined for an INT32 window (a satisfied wait's
        first poll is this); anything unusual goes the general way."""
        cells = self._cells
        if cells is None or type(cell) is not int or not 0 <= cell < self._numel or type(cmp) is not WaitCmp:
            return super().test(cell, expected, cmp)
        wakes = self._wakes
        if wakes is not None:
            wakes.flush()  # a poll ends this rank's burst of notifies (see futex.WakeBatch)
        value = cells[cell]
        st = self._stats
        st.polls += 1
        if value >= expected if cmp is CMP_GE else value == expected:
            win = self._win
            assert win is not None  # live: it has cells
            win.Sync()  # acquire, as in Window.test
            st.waits += 1
            return True
        return False

    def _store(self, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        self._peers[peer].reshape(plan.view_shape)[plan.slices] = data.reshape(plan.shape)
        # Release barrier: the copy is visible before anything we do next
        # (in particular before a notify's atomic).
        self._sync()
        if self._futex is not None and self._may_sleep(peer):
            self.wake_cells(peer, _flat_cells(plan))  # a put into a signal window changes cells too

    def _load(self, peer: int, plan: RegionPlan) -> np.ndarray:
        self._sync()  # acquire: see what other ranks stored before
        return self._peers[peer].reshape(plan.view_shape)[plan.slices].copy()

    def _cell_atomic(self, win: MPI.Win, peer: int, cell: int, value: int, op: NotifyOp, fetch: bool) -> int:
        atomics = self._atomics
        if atomics is None:
            return super()._cell_atomic(win, peer, cell, value, op, fetch)
        fn = atomics.add if op is NotifyOp.AtomicAdd else atomics.xchg
        addr = self._addrs[peer] + 4 * cell
        # No MPI_Win_sync first: the sequentially consistent atomic orders this rank's earlier
        # stores before it (the module docstring).
        old = fn(addr, value & 0xFFFF_FFFF, _SEQ_CST)
        # The cell changed first, then the sleeper word is read (the module docstring).  A rank
        # notifying itself skips it: the only sleeper of a segment is its owner, the caller.
        if peer != self._rank and self._sleepers and self._sleeper_of(peer) == cell + 1:
            self._wake(addr)
        return old - 0x1_0000_0000 if old & 0x8000_0000 else old

    def _sleeper_of(self, peer: int) -> int:
        """``peer``'s sleeper word, read after this rank's atomic on one of its cells: a plain load
        where a locked read-modify-write already orders later loads after it (x86: the atomic is a
        full barrier), a sequentially consistent atomic load elsewhere."""
        if _RMW_IS_FULL_BARRIER:
            return int(self._sleepers[peer].value)
        atomics = self._atomics
        assert atomics is not None  # only windows with CPU atomics have sleeper words
        return int(atomics.load(self._waiters[peer], _SEQ_CST))

    def _wake(self, addr: int) -> None:
        """Wake the sleeper of the cell at ``addr``: deferred to this rank's wake batch when the
        window has one (``futex.WakeBatch``), at once otherwise."""
        wakes = self._wakes
        if wakes is not None:
            wakes.defer(addr)
            return
        futex = self._futex
        assert futex is not None  # only windows with a futex have sleeper words
        futex.wake(addr)

    def _accumulate(self, win: MPI.Win, peer: int, plan: RegionPlan, buf: np.ndarray, op: MPI.Op) -> None:
        atomics = self._atomics
        if atomics is None or op != MPI.SUM:
            super()._accumulate(win, peer, plan, buf, op)
            return
        # An atomic_add put into an INT32 window: one CPU fetch-add per element (see the module
        # docstring: this window's atomics must never be MPI accumulates).
        win.Sync()
        flat = _flat_cells(plan)
        add, base = atomics.add, self._addrs[peer]
        for i, v in zip(flat, buf.reshape(-1).tolist(), strict=True):
            add(base + 4 * i, v & 0xFFFF_FFFF, _SEQ_CST)
        self.wake_cells(peer, flat)

    def _load_into(self, peer: int, plan: RegionPlan, out: np.ndarray) -> None:
        self._sync()  # acquire, as in _load
        # One copy straight from the peer's segment (numpy handles overlap with ``out``).
        out[...] = self._peers[peer].reshape(plan.view_shape)[plan.slices]

    def _store_words(self, win: MPI.Win, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        self._store(peer, plan, data)  # aligned words, then a release barrier: no accumulate needed

    def _load_words(self, win: MPI.Win, peer: int, plan: RegionPlan) -> np.ndarray:
        return self._load(peer, plan)

    def _poll_cell(self, cell: int, polls: int) -> int:
        # A plain load: a poll needs no barrier of its own, the one that orders the data after it
        # is the acquire ``MPI_Win_sync`` a satisfied wait or test makes (``Window.wait``).
        cells = self._cells
        assert cells is not None  # callers checked liveness and the INT32 dtype
        value = cells[cell]
        if polls % _IPROBE_EVERY == _IPROBE_EVERY - 1:
            self._comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        return value

    def _sleeper(self, cell: int) -> CellSleeper | None:
        return self.sleeper(cell)

    def sleeper(self, cell: int) -> CellSleeper | None:
        """The kernel sleep of a wait on this rank's ``cell`` (see the module docstring), None when
        this window cannot block (not INT32, no libatomic, no futexes, or a futex call failed)."""
        if not self._can_sleep:
            return None
        return functools.partial(self._sleep_on, self._addrs[self._rank] + 4 * cell)

    def _sleep_on(self, addr: int, observed: int, timeout: float) -> bool:
        futex, atomics = self._futex, self._atomics
        assert futex is not None and atomics is not None  # sleeper() checked
        word = self._waiters[self._rank]
        # Published before the kernel compares the cell: the cell this rank sleeps on, + 1.
        atomics.xchg(word, (addr - self._addrs[self._rank]) // 4 + 1, _SEQ_CST)
        try:
            ok = futex.wait(addr, observed, timeout)
        finally:
            atomics.xchg(word, 0, _SEQ_CST)
        if not ok:
            self._can_sleep = False  # this rank's later waits use timed sleeps; its notifies still wake
        return ok

    def _may_sleep(self, peer: int) -> bool:
        """Whether ``peer`` may be asleep on one of its cells (its sleeper word, an atomic load)."""
        atomics = self._atomics
        return (atomics is not None and peer != self._rank and bool(self._sleepers)
                and bool(atomics.load(self._waiters[peer], _SEQ_CST)))

    def wake_cells(self, peer: int, cells: Iterable[int]) -> None:
        """Wake whoever sleeps on ``peer``'s ``cells`` (call after changing them, in the order of
        the module docstring); a no-op unless ``peer`` sleeps on one of them."""
        if not self._may_sleep(peer):
            return
        sleeping = self._sleeper_of(peer) - 1
        for c in cells:
            if c == sleeping:
                self._wake(self._addrs[peer] + 4 * c)

    def _sync(self) -> None:
        win = self._win
        assert win is not None  # callers checked liveness
        win.Sync()


def _flat_cells(plan: RegionPlan) -> list[int]:
    """The flat element indices of a region, in C order."""
    grid = np.indices(plan.shape).reshape(len(plan.shape), -1)
    offs = np.asarray(plan.offsets, dtype=np.intp).reshape(-1, 1)
    return list(np.ravel_multi_index(tuple(grid + offs), plan.view_shape).tolist())
