"""Kernel sleeps on a 32-bit word of process-shared memory: Linux ``futex(2)`` through ctypes.

A waiter whose cell is not yet satisfied calls :meth:`Futex.wait` with the value it observed: the
kernel checks, atomically with queueing the caller, that the word still holds that value, and puts
the caller to sleep until :meth:`Futex.wake` is called on the same address or the timeout passes.
The words live in ``MPI_Win_allocate_shared`` segments mapped by several processes, so the
operations are the shared (not ``FUTEX_PRIVATE_FLAG``) ones: the kernel keys them by the page
behind the address, not by the process.

Lost wake-ups are prevented by the caller's protocol (``shared.py``): the waiter publishes that it
may sleep (a waiter count in the segment, a sequentially consistent atomic) *before* the kernel's
compare, and a notifier changes the cell *before* it reads that count, so either the notifier sees
the waiter and wakes it, or the kernel's compare sees the new value and the wait returns at once.

:func:`load_futex` returns None where futexes are unavailable (not Linux, an architecture whose
syscall number is unknown here, no libc, or the probe call fails): waits then keep their timed
back-off.  A syscall failing later (other than a timeout, a changed value or a signal) makes
:meth:`Futex.wait` return False, and the caller stops using it.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import sys
import time
from collections.abc import Callable
from typing import Protocol

FUTEX_WAIT = 0
FUTEX_WAKE = 1

WAKE_ALL = 0x7FFF_FFFF
"""``FUTEX_WAKE`` count waking every waiter."""

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98, "ppc64le": 221,
              "ppc64": 221, "s390x": 238, "i386": 240, "i686": 240, "armv7l": 240}
"""``SYS_futex`` per ``platform.machine()`` (Linux ABI)."""

_BENIGN = frozenset({errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR})
"""Errors of ``FUTEX_WAIT`` that are outcomes, not failures: the value had changed, the timeout
passed, a signal arrived.  The caller polls again in every case."""


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class Futex:
    """``FUTEX_WAIT`` / ``FUTEX_WAKE`` on raw addresses of shared memory (see the module docstring)."""

    __slots__ = ("_nr", "_op_wait", "_op_wake", "_syscall", "_wake_all")

    def __init__(self, syscall: Callable[..., int], number: int) -> None:
        self._syscall = syscall
        self._nr = ctypes.c_long(number)
        # The constant arguments built once: a notify's wake is on the hot path, and building
        # ctypes objects cost more than the syscall's conversion of a plain int address.
        self._op_wait = ctypes.c_int(FUTEX_WAIT)
        self._op_wake = ctypes.c_int(FUTEX_WAKE)
        self._wake_all = ctypes.c_int(WAKE_ALL)

    def wait(self, addr: int, observed: int, timeout: float) -> bool:
        """Sleep while the 32-bit word at ``addr`` holds ``observed``, at most ``timeout`` seconds.

        Returns True when the call did its job (woken, the value differed, timed out, interrupted:
        the caller polls again either way), False when the syscall failed and must not be used again.
        """
        ts = _Timespec(int(timeout), int((timeout % 1.0) * 1e9))
        rc = self._syscall(self._nr, ctypes.c_void_p(addr), self._op_wait,
                           ctypes.c_uint32(observed & 0xFFFF_FFFF), ctypes.byref(ts), None, ctypes.c_int(0))
        return rc == 0 or ctypes.get_errno() in _BENIGN

    def wake(self, addr: int, count: int = WAKE_ALL) -> int:
        """Wake up to ``count`` waiters sleeping on ``addr``; returns how many woke (-1: failed)."""
        n = self._wake_all if count == WAKE_ALL else ctypes.c_int(count)
        return int(self._syscall(self._nr, ctypes.c_void_p(addr), self._op_wake, n, None, None, None))


WAKE_BOUND = 200e-6
"""Seconds a deferred wake may wait for the notifier's next wait before a later notify sends it
anyway (see :class:`WakeBatch`)."""


class Completable(Protocol):
    """A window whose notifies a :class:`WakeBatch` completes (``Window.complete_notifies``)."""

    def complete_notifies(self) -> None: ...


class WakeBatch:
    """The deferred ``FUTEX_WAKE`` calls of one rank's notifies, sent together as one batch.

    Why.  On an oversubscribed machine a ``FUTEX_WAKE`` makes the woken rank runnable at once, and
    the scheduler lets it preempt the notifier: a barrier's burst of credits to every peer was
    interrupted after each credit (two context switches per credit, and a woken peer that only
    finds the next of its cells still empty).  Deferring the wakes to the end of the burst lets the
    notifier post every credit first and hand over its core when it has nothing left to do.

    The same batch completes the notifies of the set's RMA windows (:meth:`defer_completion`): an
    accumulate is issued at once and flushed with the batch, one ``Flush_all`` per window for a
    burst instead of a ``Flush`` round trip per notify (at 8 ranks on 2 cores the interpreter's
    barrier on RMA windows took 518 instead of 787 us). It is the same argument with MPI in place
    of the kernel: the notify's accumulate is issued before the notifier goes on, and it is
    complete at the target no later than the notifier's next flush point; MPICH also progresses it
    meanwhile, within any MPI call of the notifier.

    The windows of one :class:`~pldemu.windows.WindowSet` (one rank, one thread) share a batch.
    :meth:`defer` records the address of a changed cell whose owner may be asleep on it (addresses
    are kept once, in order); :meth:`flush` sends one wake per address.  A window flushes the batch
    at the start of every ``wait`` and ``test`` and on every ``read_cell`` (whether the poll then
    succeeds or not: that is where a burst of notifies ends), the interpreter at the end of every
    ``run()``, the set when it is freed or on :meth:`WindowSet.flush_wakes`, and :meth:`defer`
    itself once the oldest deferred wake is older than ``bound`` seconds (a burst of notifies that
    never waits).

    **No wake-up is lost** (the argument; tested in ``tests/windows/test_win_wake_batch.py``,
    including 8 ranks on 2 cores).  A waiter of cell ``c`` sleeps only through
    ``FUTEX_WAIT(c, v)``, after publishing ``c`` in its segment's sleeper word with a sequentially
    consistent atomic; the kernel returns at once unless ``c`` still holds ``v``.  A notifier first
    changes ``c`` (a sequentially consistent atomic), then reads the sleeper word.  Both sides
    write before they read, in one total order, so either the notifier reads ``c`` in the sleeper
    word -- and defers the wake -- or the waiter's kernel compare reads the new value and does not
    sleep.  Deferring only moves *when* ``FUTEX_WAKE`` is called, never whether: an address leaves
    the batch only through :meth:`flush`, which wakes it; every way a rank's code can stop running
    the windows layer's ops passes a flush point (its next wait/test/read, the end of ``run()``,
    free), and a notifier that keeps notifying flushes after ``bound``.  Between the change and the
    flush the waiter sleeps at most until its own timeout (the wait's next hook call, 50 ms by
    default), so even code that notifies and then blocks elsewhere without flushing (an MPI
    collective) delays a peer, it cannot hang it.  A wake that arrives after the waiter already
    left (timed out, or woken by another cell's wake) is harmless: it wakes nobody, or a later
    sleep on the same cell, which polls again.
    """

    __slots__ = ("_futex", "_incomplete", "_oldest", "_pending", "bound", "busy")

    def __init__(self, futex: Futex | None, bound: float = WAKE_BOUND) -> None:
        self._futex = futex
        self._pending: dict[int, None] = {}
        self._incomplete: list[Completable] = []
        self._oldest = 0.0
        self.bound = bound
        """Seconds after which :meth:`defer` or :meth:`defer_completion` sends the batch itself."""
        self.busy = False
        """Whether anything is deferred (:meth:`flush` returns at once when not: every poll calls it)."""

    def defer(self, addr: int) -> None:
        """Record a wake of ``addr`` (a cell just changed whose owner may sleep on it); only windows
        with a futex defer wakes."""
        late = self._started()
        self._pending[addr] = None
        self.busy = True
        if late:
            self.flush()

    def defer_completion(self, window: Completable) -> None:
        """Record that ``window`` issued notifies it has not completed yet (an RMA window's
        accumulates without their ``Flush``: see ``Window._cell_atomic``); :meth:`flush` calls its
        ``complete_notifies()``. A window registers once per burst, at its first pending notify."""
        late = self._started()
        self._incomplete.append(window)
        self.busy = True
        if late:
            self.flush()

    def _started(self) -> bool:
        """Start the batch's clock if it is empty; True when its oldest entry is older than ``bound``."""
        if not self._pending and not self._incomplete:
            self._oldest = time.monotonic()
            return False
        return time.monotonic() - self._oldest > self.bound

    def flush(self) -> None:
        """Complete every deferred notify, then send every deferred wake (one ``FUTEX_WAKE`` per
        address, in order)."""
        if not self.busy:
            return
        incomplete, pending = self._incomplete, self._pending
        self._incomplete, self._pending, self.busy = [], {}, False
        try:
            for window in incomplete:
                window.complete_notifies()
        finally:  # the wakes are sent even when a completion failed: a lost wake could hang a peer
            if pending:
                assert self._futex is not None  # only windows with a futex defer wakes
                wake = self._futex.wake
                for addr in pending:
                    wake(addr)

    @property
    def pending(self) -> int:
        """Deferred wakes not sent yet."""
        return len(self._pending)

    @property
    def incomplete(self) -> int:
        """Windows with notifies not completed yet."""
        return len(self._incomplete)


def load_futex() -> Futex | None:
    """The futex operations of this machine, or None where they are unavailable (see the module
    docstring); probed once with a wake on a private word (no waiter, so it must return 0)."""
    number = _SYS_FUTEX.get(platform.machine().lower())
    if not sys.platform.startswith("linux") or number is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    futex = Futex(syscall, number)
    probe = ctypes.c_int32(0)
    if futex.wake(ctypes.addressof(probe), 1) != 0:
        return None
    return futex


__all__ = ["FUTEX_WAIT", "FUTEX_WAKE", "WAKE_ALL", "WAKE_BOUND", "Completable", "Futex", "WakeBatch", "load_futex"]
