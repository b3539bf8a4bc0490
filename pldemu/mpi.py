"""The MPI toolkit: the one back-off every wait uses, and bounded collectives that never hang.

**One back-off.** :class:`PollPolicy` says how a waiter polls: spin a few polls, then
``os.sched_yield()`` a few more, then sleep with a doubling timed sleep up to a cap; once the wait
has lasted ``block_after`` seconds, sleep in the kernel on the awaited word instead when the waiter
offers a way to (a :data:`Blocker`: shared windows on Linux, ``pldemu.windows.futex``). :class:`Backoff` is that policy applied to one wait (its
state: polls so far, the next sleep, the deadline, the progress hook, the blocker). Every waiting loop in pldemu is ``poll; if satisfied: stop; backoff.pause()``:
``Window.wait`` (a signal cell), :meth:`BoundedComm.complete` (a nonblocking collective of a
harness, a checker or the benchmark) and the raw-MPI contender of ``pldemu bench signals``.

**Bounded collectives.** A rank that never reaches a collective exchange (stuck in a wait, or
gone) must not hang its peers forever. :class:`BoundedComm` wraps a communicator with a timeout
and an error factory: every exchange is a nonblocking MPI collective completed against a deadline
with the back-off, and a missed deadline raises the caller's error (``CheckTimeout``,
``RaceCheckTimeout``, ``BenchError``, ...). It carries the numeric collectives the harnesses need
(barrier, allreduce) and the pickled-object ones (allgather, alltoall, gather), which share one
size-then-bytes exchange (:func:`_vector_exchange`, given the two MPI primitives it drives).
:meth:`BoundedComm.gather_direct` and :meth:`BoundedComm.bcast_direct` move a pickled object in one
hop instead: point-to-point messages straight to (from) the root, each receiver probing a message for
its size, so no rank waits for a tree's inner ranks or for a byte-count phase (the race detector's
checkpoint, where every round needs every rank scheduled on shared cores).
"""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """How a waiter backs off between two polls.

    Spin ``spin_polls`` times (lowest latency when the peer has its own core), then
    ``os.sched_yield()`` for up to ``yield_polls`` more polls, then sleep, doubling from ``min_sleep``
    up to ``max_sleep`` seconds (in the kernel until woken, after ``block_after``, see ``block``).
    Never busy-spin for long: oversubscribed ranks that spin starve the very peer they are waiting
    for.  Yield rather than sleep while a yield hands the core to a peer of the same job that has
    work and gets it back soon (the peer waits too); stop yielding once a yield returned late
    (``yield_lost``): a yield only moves this rank's deadline back, so where another job keeps the
    core a rank that yields again and again is picked last, while a rank that wakes from a short
    sleep is placed fairly.  The measurements behind the defaults: docs/benchmarks.md, "The
    back-off's defaults" and "Item 4, fifth pass".
    """

    spin_polls: int = 4
    yield_polls: int = 32
    min_sleep: float = 10e-6
    max_sleep: float = 100e-6
    hook_interval: float = 0.05
    """Seconds between two calls of a wait's progress hook (also the longest kernel sleep)."""
    block: bool = True
    """Sleep in the kernel until the awaited word changes when the waiter offers a blocker: an
    oversubscribed rank then gives its core to exactly the rank it waits for and wakes when the
    credit lands, instead of polling after each timed sleep.  False forces the timed sleeps (the
    fallback where futexes are unavailable; ``RuntimeOptions.blocking_waits``)."""
    block_after: float = 1e-3
    """Seconds a wait backs off with timed sleeps before its sleeps go to the kernel.  Sleeping in
    the kernel at once was 2x slower: a notifier's ``FUTEX_WAKE`` makes the woken rank run at once,
    preempting the notifier mid-barrier (two context switches per credit), and a barrier's waiter
    is woken once per credit where a timed sleep collects several (measured: docs/benchmarks.md,
    "The back-off's defaults").  Long waits still sleep in the kernel."""
    yield_lost: float = 200e-6
    """Seconds a yield may keep this rank off its core before the wait stops yielding and sleeps:
    a yield that returns late handed the core to a task that kept it (another job, or a peer with
    work to do), and yielding again would put this rank last in line once more."""
    tight_sleeps: bool = True
    """Sleep with :data:`TIMER_SLACK_NS` of timer slack (:func:`precise_sleep`), so that a sleep lasts
    what it asks for; False keeps the thread's own slack (50 us by default), whose late, coalesced
    wake-ups suit a wait for peers that run a whole block of calls first."""


DEFAULT_POLICY = PollPolicy()
"""The back-off of signal waits and of the benchmark's synchronisation."""

TIMED_POLICY = PollPolicy(block=False)
""":data:`DEFAULT_POLICY` without kernel sleeps: the fallback back-off, forced."""

HOST_POLICY = PollPolicy(spin_polls=0, yield_polls=0, min_sleep=1e-5, max_sleep=2e-4, tight_sleeps=False)
"""The back-off of the harnesses' and checkers' own exchanges: they wait for peers that may run a
whole block of calls first, so they sleep at once and let those peers have the cores. The sleeps
stop doubling at 200 us: with a 1 ms cap every exchange overslept its last peer by up to a
millisecond, with every rank asleep and the cores idle. The 8-rank job of the MPI test suites took
120 s (147 s of CPU) with the 1 ms cap and 98-102 s (130-139 s) with this one; ``pldemu stress barrier
-n 4 --iters 1000 --no-races`` 1.6-2.0 s against 1.2 s (docs/benchmarks.md, "Item 3, ninth pass")."""

IDLE_POLICY = PollPolicy(spin_polls=0, yield_polls=0, min_sleep=1e-4, max_sleep=2e-2, tight_sleeps=False)
WARM_POLICY = PollPolicy(spin_polls=0, yield_polls=0, min_sleep=1e-4, max_sleep=1e-3, tight_sleeps=False)
"""The back-off of a resident job's rank in the first :data:`WARM_SECONDS` after a request (a prepared
worker's dispatches come in bursts: the next one is picked up within a millisecond), before the idle one."""
WARM_SECONDS = 1.0
"""The back-off of a warm job's ranks between two runs (``pldemu.pool``): a run that follows at once
is picked up within a fraction of a millisecond, and a rank idle for longer wakes 50 times a second,
so that the idle ranks of several pools do not take the cores from the run in progress (each poll
of an idle rank cost about 80 us of CPU at 3 ranks on 2 cores: with 5 ms sleeps, 15 idle ranks took
14 % of a core)."""

CHECKPOINT_POLICY = PollPolicy(spin_polls=16, yield_polls=0, min_sleep=1e-5, max_sleep=1e-4)
"""The back-off of the race detector's checkpoint exchanges, nine in a row with every rank already
there: a few polls, then sleeps of at most 100 us.  With :data:`HOST_POLICY`'s sleeps doubling to
1 ms (its cap then) each exchange overslept by up to a millisecond: the checkpoint took 41 ms of rank 0's time per
block of 10 barriers (``pldemu stress barrier -n 4``, cProfile of rank 0 on 2 loaded cores), the
larger part of the detector's cost (docs/benchmarks.md, issue 23)."""


PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30
"""``prctl(2)`` options: set / get the calling thread's timer slack, in nanoseconds."""

TIMER_SLACK_NS = 1_000
"""The timer slack of the back-off's own sleeps. Linux lets a timer expire up to the thread's slack
late so that wake-ups coalesce; the default, 50 us, made every 10-100 us sleep of the back-off last
60-150 us: the barrier round on 4 ranks / 2 cores went from 76-109 to 54-66 us with 1 us of slack
(docs/benchmarks.md, "Item 4, fourth pass: timer slack"). Only the back-off's sleeps are tightened, not the thread: MPICH's
progress throttle (``launch.MPICH_OVERSUBSCRIBED``) sleeps between polls and relies on the default
slack to sleep long; with the thread's slack at 1 us a 4-rank test job spent 6x its CPU in the kernel."""


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def precise_sleep(seconds: float) -> None:
    """``time.sleep(seconds)`` with :data:`TIMER_SLACK_NS` of slack (Linux; elsewhere a plain sleep):
    the calling thread's slack is tightened for the sleep and restored after it."""
    prctl = _PRCTL
    if prctl is None:
        time.sleep(seconds)
        return
    before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)
    prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)
    try:
        time.sleep(seconds)
    finally:
        prctl(PR_SET_TIMERSLACK, before, 0, 0, 0)


Blocker = Callable[[float], bool]
"""``block(timeout)``: sleep in the kernel until the awaited word may have changed, at most
``timeout`` seconds; False when blocking failed and the wait must use timed sleeps from now on."""


class Backoff:
    """One wait's back-off (see :class:`PollPolicy`): call :meth:`pause` after every poll that did
    not find what the waiter wants; it returns False once ``deadline`` (a :func:`time.monotonic`
    time) has passed, and calls ``hook()`` about every ``policy.hook_interval`` seconds.  With a
    ``block`` (and ``policy.block``), the sleeping phase sleeps in the kernel instead, never past
    the deadline or the next hook call."""

    __slots__ = ("_block", "_hook", "_next_hook", "_pauses", "_policy", "_sleep", "_sleeper", "_spin_end",
                 "_yield_end", "_yielded", "deadline", "now", "start")

    def __init__(self, policy: PollPolicy = DEFAULT_POLICY, deadline: float = math.inf,
                 hook: Callable[[], None] | None = None, block: Blocker | None = None) -> None:
        self._policy = policy
        self._block = block if policy.block else None
        self.start = self.now = time.monotonic()
        """When the wait began; :attr:`now` is the last time :meth:`pause` looked at the clock."""
        self.deadline = deadline
        self._hook = hook
        self._next_hook = self.start + policy.hook_interval
        self._pauses = 0
        self._spin_end = policy.spin_polls
        self._yield_end = policy.spin_polls + policy.yield_polls
        self._yielded = math.inf
        self._sleep = policy.min_sleep
        self._sleeper = precise_sleep if policy.tight_sleeps else time.sleep

    @property
    def waited(self) -> float:
        """Seconds from the start of the wait to the last look at the clock."""
        return self.now - self.start

    def pause(self) -> bool:
        """Spin, yield or sleep before the next poll; False (at once) once the deadline has passed."""
        self._pauses += 1
        if self._pauses < self._spin_end:
            return True
        now = self.now = time.monotonic()
        if now >= self.deadline:
            return False
        if now >= self._next_hook:
            if self._hook is not None:
                self._hook()
            self._next_hook = time.monotonic() + self._policy.hook_interval
        if self._pauses < self._yield_end and now - self._yielded < self._policy.yield_lost:
            self._yielded = now
            os.sched_yield()
        elif self._block is not None and now - self.start >= self._policy.block_after:
            if not self._block(min(self.deadline, self._next_hook) - now):
                self._block = None
        else:
            self._sleeper(self._sleep)
            self._sleep = min(self._sleep * 2, self._policy.max_sleep)
        return True


def progress_sleep(comm: MPI.Comm, seconds: float) -> None:
    """Sleep ``seconds`` while driving MPI progress (an ``Iprobe`` about every millisecond). A rank
    that pauses while its peers read its windows (a deadlock report being built) must not simply
    sleep: over TCP, one-sided operations aimed at a rank complete only while it calls into MPI."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        time.sleep(min(left, 0.001))


def complete(req: MPI.Request, deadline: float, timeout_error: Callable[[], Exception],
             policy: PollPolicy = HOST_POLICY) -> None:
    """Poll ``req`` until it completes; raise ``timeout_error()`` once ``time.monotonic()`` passes
    ``deadline``."""
    backoff = Backoff(policy, deadline)
    while not req.Test():
        if not backoff.pause():
            raise timeout_error()


def _timeout_error(what: str) -> Exception:
    return TimeoutError(f"{what} did not complete in time: a rank is stuck or gone")


class BoundedComm:
    """``comm`` with collectives that give up after ``timeout`` seconds (per call) instead of hanging.

    ``error(what)`` builds the exception a missed deadline raises (``what`` names the exchange).
    Collective like the MPI calls behind it: every rank of ``comm`` calls the same methods in the
    same order.
    """

    def __init__(self, comm: MPI.Comm, timeout: float,
                 error: Callable[[str], Exception] = _timeout_error, policy: PollPolicy = HOST_POLICY) -> None:
        self.comm = comm
        self.timeout = timeout
        self._error = error
        self._policy = policy
        self.rounds = 0
        """Rounds of the exchanges so far (a barrier or an allreduce is one, an object collective two:
        its byte counts, then its bytes; a direct one is one hop). Tests pin a checkpoint's count."""

    @property
    def rank(self) -> int:
        """This rank in :attr:`comm`."""
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        """Ranks in :attr:`comm`."""
        return int(self.comm.Get_size())

    def deadline(self) -> float:
        """The deadline of an exchange that starts now."""
        return time.monotonic() + self.timeout

    def complete(self, req: MPI.Request, what: str, deadline: float | None = None) -> None:
        """Complete ``req`` by ``deadline`` (default: :attr:`timeout` from now) or raise ``error(what)``."""
        end = self.deadline() if deadline is None else deadline
        complete(req, end, lambda: self._error(what), self._policy)

    def barrier(self, what: str = "a barrier") -> None:
        """A bounded all-rank barrier."""
        self.rounds += 1
        self.complete(self.comm.Ibarrier(), what)

    def allreduce(self, values: Sequence[Any] | np.ndarray, op: MPI.Op, what: str = "an allreduce") -> np.ndarray:
        """Element-wise ``op`` of ``values`` (same length and dtype on every rank) over all ranks."""
        send = np.ascontiguousarray(values)
        recv = np.empty_like(send)
        self.rounds += 1
        self.complete(self.comm.Iallreduce(send, recv, op), what)
        return recv

    def allgather(self, item: Any, what: str = "an object allgather") -> list[Any]:
        """``comm.allgather`` of a picklable object: every rank's ``item``, by rank."""
        blob = _pickle(item)
        return _vector_exchange(
            self, what, np.array([blob.size], dtype=np.int64), np.zeros(self.size, dtype=np.int64),
            self.comm.Iallgather,
            lambda counts, displs, recv: self.comm.Iallgatherv(blob, [recv, (counts, displs), MPI.BYTE]),
        )

    def alltoall(self, items: Sequence[Any], what: str = "an object alltoall") -> list[Any]:
        """``comm.alltoall`` of picklable objects: ``items[r]`` goes to rank ``r``; returns what each
        rank sent to this one, by rank."""
        blobs = [_pickle(x) for x in items]
        send_counts = np.array([b.size for b in blobs], dtype=np.int64)
        send = np.concatenate(blobs) if blobs else np.zeros(0, dtype=np.uint8)
        return _vector_exchange(
            self, what, send_counts, np.zeros_like(send_counts), self.comm.Ialltoall,
            lambda counts, displs, recv: self.comm.Ialltoallv(
                [send, (send_counts, _displs(send_counts)), MPI.BYTE], [recv, (counts, displs), MPI.BYTE]),
        )

    def gather(self, item: Any, what: str = "an object gather", root: int = 0) -> list[Any] | None:
        """``comm.gather(item, root)``: every rank's ``item`` on ``root``, None elsewhere."""
        blob = _pickle(item)
        if self.rank != root:
            deadline = self.deadline()
            self.rounds += 2
            self.complete(self.comm.Igather(np.array([blob.size], dtype=np.int64), None, root=root), what, deadline)
            self.complete(self.comm.Igatherv(blob, None, root=root), what, deadline)
            return None
        return _vector_exchange(
            self, what, np.array([blob.size], dtype=np.int64), np.zeros(self.size, dtype=np.int64),
            lambda send, recv: self.comm.Igather(send, recv, root=root),
            lambda counts, displs, recv: self.comm.Igatherv(blob, [recv, (counts, displs), MPI.BYTE], root=root),
        )

    def gather_direct(self, item: Any, what: str, tag: int, root: int = 0) -> list[Any] | None:
        """:meth:`gather` in one hop: every rank sends its pickled ``item`` straight to ``root`` with
        ``tag``; on ``root`` every rank's item, by rank (its own as given), None elsewhere. A message of
        an exchange that timed out stays unmatched if the next exchange uses another tag."""
        self.rounds += 1
        deadline = self.deadline()
        if self.rank != root:
            self.complete(self.comm.Isend([_pickle(item), MPI.BYTE], root, tag), what, deadline)
            return None
        out: list[Any] = [None] * self.size
        out[root] = item
        for _ in range(self.size - 1):
            source, got = self._receive(MPI.ANY_SOURCE, tag, what, deadline)
            out[source] = got
        return out

    def bcast_direct(self, item: Any, what: str, tag: int, root: int = 0, patient: bool = False) -> Any:
        """``root``'s ``item`` on every rank in one hop: ``root`` sends it to each rank with ``tag``.
        ``patient``: the other ranks wait for it without a deadline (``root`` is known to be computing it:
        a crash there aborts the job, and the job's timeout bounds the rest)."""
        self.rounds += 1
        deadline = math.inf if patient and self.rank != root else self.deadline()
        if self.rank != root:
            return self._receive(root, tag, what, deadline)[1]
        blob = _pickle(item)  # alive until every send completed
        sends = [self.comm.Isend([blob, MPI.BYTE], r, tag) for r in range(self.size) if r != root]
        for req in sends:
            self.complete(req, what, deadline)
        return item

    def _receive(self, source: int, tag: int, what: str, deadline: float) -> tuple[int, Any]:
        """(sender, unpickled object) of the next message from ``source`` with ``tag``, probed for its
        size with the back-off."""
        status = MPI.Status()
        backoff = Backoff(self._policy, deadline)
        while (msg := self.comm.Improbe(source, tag, status)) is None:
            if not backoff.pause():
                raise self._error(what)
        buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        self.complete(msg.Irecv([buf, MPI.BYTE]), what, deadline)
        return status.Get_source(), pickle.loads(buf.tobytes())


SizesCall = Callable[[np.ndarray, np.ndarray], MPI.Request]
"""A nonblocking collective exchanging the byte counts: ``call(send_counts, recv_counts)``."""

BytesCall = Callable[[np.ndarray, np.ndarray, np.ndarray], MPI.Request]
"""A nonblocking vector collective moving the bytes: ``call(recv_counts, recv_displs, recv_buffer)``."""


def _vector_exchange(bc: BoundedComm, what: str, send_counts: np.ndarray, recv_counts: np.ndarray,
                     sizes: SizesCall, data: BytesCall) -> list[Any]:
    """The two phases of every object collective, under one deadline: exchange the byte counts
    with ``sizes``, then the pickled bytes with ``data``; unpickle what arrived, by source rank."""
    deadline = bc.deadline()
    bc.rounds += 2
    bc.complete(sizes(send_counts, recv_counts), what, deadline)
    displs = _displs(recv_counts)
    recv = np.zeros(max(int(recv_counts.sum()), 1), dtype=np.uint8)
    bc.complete(data(recv_counts, displs, recv), what, deadline)
    return [pickle.loads(recv[d : d + c].tobytes()) for d, c in zip(displs, recv_counts, strict=True)]


def _pickle(item: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


def _displs(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


__all__ = [
    "CHECKPOINT_POLICY",
    "DEFAULT_POLICY",
    "HOST_POLICY",
    "IDLE_POLICY",
    "TIMED_POLICY",
    "WARM_POLICY",
    "WARM_SECONDS",
    "Backoff",
    "Blocker",
    "BoundedComm",
    "PollPolicy",
    "complete",
    "progress_sleep",
]
