"""Batched wake-ups (``futex.WakeBatch``): the wakes of a burst of notifies are sent once, when the
notifier next waits, tests or reads a cell (on any window of its set), at the end of a run, on
``flush_wakes`` or after ``bound``, and none is ever lost -- also with 8 ranks on 2 cores."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.mpi import PollPolicy
from pldemu.windows import NotifyOp, WaitCmp, WaitTimeout, Window, WindowSet, allocate_window
from pldemu.windows import shared as shared_backend
from pldemu.windows.base import PENDING_NOTIFIES
from pldemu.windows.futex import Futex, WakeBatch

HOOKLESS = PollPolicy(spin_polls=0, yield_polls=0, hook_interval=3600.0, block_after=0.0)
"""Kernel sleeps from the first pause on, ended only by a wake or the deadline: a lost wake-up is a
WaitTimeout, a deferred one a late return."""


class _Recorder:
    """Stands in for :class:`Futex`: records the addresses woken."""

    def __init__(self) -> None:
        self.woken: list[int] = []

    def wake(self, addr: int, count: int = 0) -> int:
        self.woken.append(addr)
        return 0


def _batch(bound: float = 3600.0) -> tuple[WakeBatch, _Recorder]:
    rec = _Recorder()
    fake: Futex = rec  # type: ignore[assignment]  # duck-typed: WakeBatch only calls wake()
    return WakeBatch(fake, bound), rec


def test_a_batch_sends_each_address_once_in_order_at_flush() -> None:
    batch, rec = _batch()
    for addr in (40, 8, 40, 16, 8):
        batch.defer(addr)
    assert rec.woken == [] and batch.pending == 3
    batch.flush()
    assert rec.woken == [40, 8, 16] and batch.pending == 0
    batch.flush()
    assert rec.woken == [40, 8, 16]


def test_a_burst_longer_than_the_bound_is_sent_by_the_next_defer() -> None:
    batch, rec = _batch(bound=0.01)
    batch.defer(4)
    time.sleep(0.02)
    batch.defer(8)
    assert rec.woken == [4, 8] and batch.pending == 0
    batch.defer(12)  # a new burst: deferred again
    assert rec.woken == [4, 8] and batch.pending == 1


class _Incomplete:
    """Stands in for a window with notifies to complete: counts the calls."""

    def __init__(self) -> None:
        self.completed = 0

    def complete_notifies(self) -> None:
        self.completed += 1


def test_a_batch_completes_deferred_notifies_before_it_wakes_and_after_the_bound() -> None:
    batch, rec = _batch(bound=0.01)
    win = _Incomplete()
    batch.defer_completion(win)
    batch.defer(4)
    assert (win.completed, rec.woken, batch.incomplete) == (0, [], 1)
    batch.flush()
    assert (win.completed, rec.woken, batch.incomplete) == (1, [4], 0)
    batch.defer_completion(win)
    time.sleep(0.02)
    batch.defer_completion(win)  # the burst outlived the bound: this defer sends the batch
    assert (win.completed, batch.incomplete) == (3, 0)


@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["rma", "hybrid"])
def test_rma_notifies_are_completed_at_the_end_of_the_burst(comm: MPI.Intracomm, backend: str) -> None:
    """In a window set an RMA notify leaves its Flush to the set's batch (one Flush_all when the
    rank next waits, tests, reads a cell or flushes); a window of its own flushes every notify, and
    a burst of PENDING_NOTIFIES completes itself."""
    r, n = comm.Get_rank(), comm.Get_size()
    right, left = (r + 1) % n, (r - 1) % n
    with WindowSet(comm, backend=backend) as ws, allocate_window(comm, "wb-alone", n, np.int32, backend=backend,
                                                                  signal=True) as alone:
        sig = ws.allocate("wb-rma", n, np.int32, signal=True)
        batch = ws._wakes
        assert batch is not None
        sig.notify(right, r, 1, NotifyOp.AtomicAdd)
        deferred = (sig._incomplete, batch.incomplete)
        got = sig.wait(left, 1, WaitCmp.Ge, timeout=30.0)  # its flush completes the credit first
        after = (sig._incomplete, batch.incomplete)
        alone.notify(right, r, 1, NotifyOp.AtomicAdd)
        for _ in range(PENDING_NOTIFIES):
            sig.notify(r, r, 0, NotifyOp.AtomicAdd)
        full = sig._incomplete
        ws.flush_wakes()
        ok = deferred == (1, 1) and got == 1 and after == (0, 0) and alone._incomplete == 0 and full == 0
        agree(comm, ok, f"deferred {deferred}, waited {got}, after the wait {after}, "
                        f"own window {alone._incomplete}, after {PENDING_NOTIFIES} notifies {full}")
        comm.Barrier()


def _sleeping(comm: MPI.Intracomm) -> bool:
    ok = shared_backend.FUTEX is not None and shared_backend.CPU_ATOMICS is not None and comm.Get_size() >= 2
    return bool(comm.allreduce(ok, MPI.LAND))


def test_busy_says_whether_anything_is_deferred() -> None:
    batch, rec = _batch()
    win = _Incomplete()
    assert not batch.busy
    batch.flush()  # nothing deferred: nothing sent
    assert (rec.woken, win.completed, batch.busy) == ([], 0, False)
    batch.defer(4)
    assert batch.busy
    batch.flush()
    assert not batch.busy and rec.woken == [4]
    batch.defer_completion(win)
    assert batch.busy
    batch.flush()
    assert not batch.busy and win.completed == 1


class _Failing:
    def complete_notifies(self) -> None:
        raise RuntimeError("flush failed")


def test_a_failed_completion_still_sends_the_wakes() -> None:
    """A lost wake could leave a peer asleep until its timeout: the batch sends its wakes even when
    completing a window's notifies raised, and is empty afterwards."""
    batch, rec = _batch()
    batch.defer_completion(_Failing())
    batch.defer(4)
    with pytest.raises(RuntimeError, match="flush failed"):
        batch.flush()
    assert (rec.woken, batch.pending, batch.incomplete, batch.busy) == ([4], 0, 0, False)


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["flush_wakes", "test"])
def test_a_wake_is_held_until_the_notifier_flushes(comm: MPI.Intracomm, how: str) -> None:
    """Rank 1 sleeps in the kernel on its cell 0; rank 0 notifies it: the cell changes at once, the
    wake waits in rank 0's batch (rank 1 is still asleep 0.2 s later), and ``flush_wakes`` or a poll
    of any cell (``test``, unsatisfied here) ends the sleep. Other ranks only watch."""
    if not _sleeping(comm):
        pytest.skip("needs shared windows with futexes and 2 ranks")
    r = comm.Get_rank()
    with WindowSet(comm, backend="shared") as ws:
        sig = ws.allocate("wb-held", 2, np.int32, signal=True)
        assert isinstance(sig, shared_backend.SharedWindow)
        comm.Barrier()
        ok, detail = True, ""
        if r == 1:
            value = sig.wait(0, 1, WaitCmp.Ge, timeout=30.0, policy=HOOKLESS)
            ok, detail = value == 1, f"woke with {value}"
        elif r == 0:
            deadline = time.monotonic() + 30.0
            while sig._sleeper_of(1) != 1 and time.monotonic() < deadline:  # rank 1 asleep on cell 0
                time.sleep(1e-3)
            sig.notify(1, 0, 1, NotifyOp.AtomicAdd)
            pending = ws._wakes.pending if ws._wakes is not None else -1
            time.sleep(0.2)
            still = sig._sleeper_of(1)
            if how == "test":
                assert not sig.test(1, 1, WaitCmp.Ge)  # rank 0's own cell 1 stays 0
            else:
                ws.flush_wakes()
            ok = pending == 1 and still == 1 and ws._wakes is not None and ws._wakes.pending == 0
            detail = f"{pending} wakes pending after the notify, rank 1's sleeper word {still} 0.2 s later"
        agree(comm, ok, detail)
        comm.Barrier()


def _jittered_barriers(credit: Window, done: Window, rounds: int, rng: random.Random) -> None:
    """Barriers whose credits go to ``credit`` and whose waits are on ``credit``, then a second phase
    on ``done``: the burst of one window is ended by a wait on the other, in random order and
    with random delays, so every flush point of the set is exercised."""
    me, n = credit.rank, credit.size
    for _ in range(rounds):
        for sig in (credit, done):
            peers = [(me + k) % n for k in range(1, n)]
            rng.shuffle(peers)
            for p in peers:
                if rng.random() < 0.2:
                    time.sleep(rng.random() * 50e-6)
                sig.notify(p, me, 1, NotifyOp.AtomicAdd)
            rng.shuffle(peers)
            for p in peers:
                if rng.random() < 0.2:
                    time.sleep(rng.random() * 50e-6)
                sig.wait(p, 1, WaitCmp.Ge, timeout=60.0, policy=HOOKLESS)
            for p in peers:
                sig.notify(me, p, -1, NotifyOp.AtomicAdd)


@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["shared", "rma"])
def test_no_batched_wake_up_is_lost_over_many_jittered_barriers(comm: MPI.Intracomm, backend: str) -> None:
    """2,000 rounds of two jittered barrier phases at 8 ranks (on this 2-core machine: 4 ranks per
    core), 500 at other sizes and on RMA windows (whose notifies the batch completes), in a
    batching window set, waits that sleep in the kernel at once (shared) and end only when woken
    or at the 60 s deadline: one lost wake-up or notify is a WaitTimeout. Every cell is back to 0
    at the end."""
    n = comm.Get_size()
    rounds = 2_000 if n == 8 and backend == "shared" else 500
    with WindowSet(comm, backend=backend) as ws:
        credit = ws.allocate("wb-credit", max(n, 1), np.int32, signal=True)
        done = ws.allocate("wb-done", max(n, 1), np.int32, signal=True)
        comm.Barrier()
        err = ""
        try:
            _jittered_barriers(credit, done, rounds, random.Random(comm.Get_rank()))
        except WaitTimeout as exc:
            err = str(exc)
        agree(comm, not err, err)
        comm.Barrier()
        left = credit.local.tolist() + done.local.tolist()
        agree(comm, not any(left), f"cells not back to 0: {left}")
        comm.Barrier()
