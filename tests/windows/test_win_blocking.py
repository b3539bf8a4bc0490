"""Blocking waits: a wait on a shared window sleeps in the kernel on its cell (``futex``) until the
notify that changes it; no wake-up is lost, timeouts are still reported, a long wait costs no CPU,
and the timed back-off stays available (forced by the policy, or wherever futexes are missing)."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.mpi import DEFAULT_POLICY, TIMED_POLICY, Backoff, PollPolicy
from pldemu.windows import NotifyOp, WaitCmp, WaitTimeout, Window, allocate_window
from pldemu.windows import shared as shared_backend

LONG = 1.0
"""Seconds of the long waits whose CPU time is measured."""

CPU_LIMIT = 0.2
"""CPU seconds a rank may burn while it waits LONG seconds in the kernel."""

HOOKLESS = PollPolicy(hook_interval=3600.0, block_after=0.0)
"""Kernel sleeps from the first sleep on, capped only by the deadline: a lost wake-up would sleep
until it (WaitTimeout)."""


def _blocking(backend: str) -> bool:
    """True where waits on this back end sleep in the kernel."""
    return backend == "shared" and shared_backend.FUTEX is not None and shared_backend.CPU_ATOMICS is not None


def test_backoff_sleeps_through_the_blocker_until_it_fails() -> None:
    timeouts: list[float] = []

    def block(timeout: float) -> bool:
        timeouts.append(timeout)
        time.sleep(min(timeout, 1e-3))
        return len(timeouts) < 3  # the third kernel sleep fails: timed sleeps from then on

    t0 = time.monotonic()
    b = Backoff(PollPolicy(spin_polls=0, yield_polls=0, hook_interval=0.01, block_after=0.0), t0 + 0.05,
                block=block)
    pauses = 0
    while b.pause():
        pauses += 1
    assert len(timeouts) == 3 and all(0 < t <= 0.01 + 1e-3 for t in timeouts)
    assert pauses > 3 and time.monotonic() - t0 >= 0.05


def test_the_blocker_waits_for_block_after() -> None:
    """Timed sleeps first: the kernel sleeps start once the wait has lasted ``block_after``."""
    first: list[float] = []
    # A deadline far past block_after, left at the first kernel sleep: with 4 ranks per core one
    # timed sleep can overrun by tens of milliseconds, and a deadline of 2x block_after was missed.
    b = Backoff(PollPolicy(spin_polls=0, yield_polls=0, block_after=0.02), time.monotonic() + 30.0,
                block=lambda t: first.append(time.monotonic() - b.start) is None)
    while not first and b.pause():
        pass
    assert first and first[0] >= 0.02


def test_a_policy_without_block_never_calls_the_blocker() -> None:
    calls: list[float] = []
    b = Backoff(TIMED_POLICY, time.monotonic() + 0.01, block=lambda t: calls.append(t) is None)
    while b.pause():
        pass
    assert calls == [] and DEFAULT_POLICY.block and not TIMED_POLICY.block


def _timed_wait(sig: Window, cell: int, expected: int, timeout: float,
                policy: PollPolicy = DEFAULT_POLICY) -> tuple[int | None, float, float, int]:
    """(value or None on timeout, wall seconds, CPU seconds, polls) of one wait."""
    polls0 = sig.stats.polls
    w0, c0 = time.monotonic(), time.process_time()
    try:
        value: int | None = sig.wait(cell, expected, WaitCmp.Ge, timeout=timeout, policy=policy)
    except WaitTimeout:
        value = None
    return value, time.monotonic() - w0, time.process_time() - c0, sig.stats.polls - polls0


@pytest.mark.mpi
def test_a_long_wait_times_out_on_time_without_a_busy_core(comm: MPI.Intracomm, backend: str) -> None:
    """Every rank waits LONG seconds on a cell nobody notifies: WaitTimeout, after LONG seconds, and
    (blocking back ends) well under CPU_LIMIT of CPU time and a handful of polls."""
    with allocate_window(comm, "blk-timeout", 2, np.int32, backend=backend, signal=True) as sig:
        comm.Barrier()
        value, wall, cpu, polls = _timed_wait(sig, 1, 1, LONG)
        agree(comm, value is None and wall >= LONG, f"value {value} after {wall:.3f}s")
        if _blocking(backend):
            agree(comm, cpu < CPU_LIMIT and polls < 200, f"{cpu:.3f}s CPU, {polls} polls in {wall:.3f}s")
        comm.Barrier()


@pytest.mark.mpi
@pytest.mark.parametrize("policy", [DEFAULT_POLICY, TIMED_POLICY], ids=["blocking", "timed"])
def test_a_late_notify_wakes_a_sleeping_waiter(comm: MPI.Intracomm, backend: str, policy: PollPolicy) -> None:
    """Rank 0 notifies every other rank LONG seconds late (a Set, then an add: both wake). The
    waiters get the value; blocking waits burn no CPU meanwhile, timed ones poll (the fallback is
    really off the kernel path)."""
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "blk-late", 2, np.int32, backend=backend, signal=True) as sig:
        comm.Barrier()
        if r == 0:
            time.sleep(LONG)
            for p in range(1, n):
                sig.notify(p, 0, 5, NotifyOp.Set)
            time.sleep(0.1)
            for p in range(1, n):
                sig.notify(p, 0, 2, NotifyOp.AtomicAdd)
            ok, detail = True, ""
        else:
            first, wall, cpu, polls = _timed_wait(sig, 0, 5, 30.0, policy)
            second, _, _, _ = _timed_wait(sig, 0, 7, 30.0, policy)
            ok = first == 5 and second == 7 and wall >= 0.5 * LONG
            detail = f"saw {first}, {second} after {wall:.3f}s, {cpu:.3f}s CPU, {polls} polls"
            if _blocking(backend) and policy.block:
                ok = ok and cpu < CPU_LIMIT and polls < 200
            elif policy is TIMED_POLICY:
                ok = ok and polls > 50
        agree(comm, ok, detail)
        comm.Barrier()


def _barriers(sig: Window, rounds: int, rng: random.Random, policy: PollPolicy) -> None:
    """The self-clearing barrier recipe on ``sig``, ``rounds`` times back to back, with a random
    delay before each primitive (microseconds, so ranks arrive in every order)."""
    me, n = sig.rank, sig.size
    for _ in range(rounds):
        for k in range(1, n):
            if rng.random() < 0.3:
                time.sleep(rng.random() * 50e-6)
            sig.notify((me + k) % n, me, 1, NotifyOp.AtomicAdd)
        for k in range(1, n):
            if rng.random() < 0.3:
                time.sleep(rng.random() * 50e-6)
            sig.wait((me + k) % n, 1, WaitCmp.Ge, timeout=60.0, policy=policy)
        for k in range(1, n):
            sig.notify(me, (me + k) % n, -1, NotifyOp.AtomicAdd)


@pytest.mark.mpi
def test_no_wake_up_is_lost_over_many_barriers_with_jitter(comm: MPI.Intracomm) -> None:
    """10,000 barriers back to back at 8 ranks (1,000 at other sizes), jittered, whose kernel sleeps
    end only when woken or at the 60 s deadline: one lost wake-up is a WaitTimeout. Every cell is
    back to 0 at the end."""
    n = comm.Get_size()
    rounds = 10_000 if n == 8 else 1_000
    with allocate_window(comm, "blk-barriers", max(n, 1), np.int32, backend="shared", signal=True) as sig:
        comm.Barrier()
        err = ""
        try:
            _barriers(sig, rounds, random.Random(comm.Get_rank()), HOOKLESS)
        except WaitTimeout as exc:
            err = str(exc)
        agree(comm, not err, err)
        comm.Barrier()
        agree(comm, not sig.local.any(), f"cells not back to 0: {sig.local.tolist()}")
        comm.Barrier()
