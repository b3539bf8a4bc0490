"""Signal operations: atomic notify ADD/SET, wait EQ/GE, timeouts, ordering."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.windows import NotifyOp, PollPolicy, WaitCmp, WaitTimeout, WindowSet, allocate_window

TIMEOUT = 60.0  # generous: 8 oversubscribed ranks on 2 cores


@pytest.mark.mpi
def test_notify_add_concurrent_sum_exact(comm: MPI.Intracomm, backend: str) -> None:
    """Every rank hammers cell 1 of every rank (itself included) at once."""
    r, n = comm.Get_rank(), comm.Get_size()
    reps = 100
    with allocate_window(comm, "sig-add", 4, np.int32, backend=backend, signal=True) as s:
        comm.Barrier()
        for _ in range(reps):
            for p in range(n):
                s.notify(p, 1, r + 1, NotifyOp.AtomicAdd)
        total = reps * n * (n + 1) // 2
        got = s.wait(1, total, WaitCmp.Ge, timeout=TIMEOUT)
        comm.Barrier()
        final = s.read_cell(1)
        agree(comm, got == total and final == total, f"wait saw {got}, final {final}, want {total}")
        agree(comm, s.read_cell(0) == 0 and s.read_cell(2) == 0, "neighbouring cells touched")
        assert s.stats.notifies == reps * n
        comm.Barrier()


@pytest.mark.mpi
def test_notify_set_and_negative_add(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n
    with allocate_window(comm, "sig-set", 3, np.int32, backend=backend, signal=True) as s:
        s.notify(peer, 2, 5, NotifyOp.AtomicAdd)
        s.wait(2, 5, WaitCmp.Eq, timeout=TIMEOUT)
        comm.Barrier()
        s.notify(peer, 2, 1000 + r, NotifyOp.Set)  # replaces, does not add
        got = s.wait(2, 1000 + src, WaitCmp.Eq, timeout=TIMEOUT)
        comm.Barrier()
        s.notify(r, 2, -1500, NotifyOp.AtomicAdd)  # self-notify, negative value
        neg = s.wait(2, 1000 + src - 1500, WaitCmp.Eq, timeout=TIMEOUT)
        # Self-notify lands on the very cell remote notifies hit.
        agree(comm, got == 1000 + src and neg == src - 500 and s.local[2] == src - 500, f"{got} {neg}")
        s.notify(r, 0, np.iinfo(np.int32).min, NotifyOp.Set)
        agree(comm, s.read_cell(0) == np.iinfo(np.int32).min)
        comm.Barrier()


@pytest.mark.mpi
@pytest.mark.parametrize("cmp", [WaitCmp.Eq, WaitCmp.Ge])
def test_wait_for_value_from_peer(comm: MPI.Intracomm, backend: str, cmp: WaitCmp) -> None:
    """A token goes round the ring, rank 0 starting 0.2 s late: every other
    rank is already polling when its value arrives from its predecessor."""
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n
    expected = src + 3
    target = expected if cmp is WaitCmp.Eq else expected - 1
    hook_values: list[int] = []
    with allocate_window(comm, "sig-wait", 2, np.int32, backend=backend, signal=True) as s:
        comm.Barrier()
        if r == 0:
            time.sleep(0.2)
            s.notify(peer, 0, r + 3, NotifyOp.AtomicAdd)
            got = s.wait(0, target, cmp, timeout=TIMEOUT)
        else:
            policy = PollPolicy(hook_interval=0.01)
            got = s.wait(0, target, cmp, timeout=TIMEOUT, hook=hook_values.append, policy=policy)
            s.notify(peer, 0, r + 3, NotifyOp.AtomicAdd)
        agree(comm, got == expected, f"got {got}, expected {expected}")
        # Waiting ranks polled for >= 0.2 s before the value came: the hook ran
        # and saw the cell still at 0.
        hook_ok = r == 0 or (len(hook_values) >= 1 and set(hook_values) == {0})
        agree(comm, hook_ok, f"hook saw {hook_values}")
        comm.Barrier()


@pytest.mark.mpi
def test_wait_timeout_carries_observed_value(comm: MPI.Intracomm, backend: str) -> None:
    r = comm.Get_rank()
    calls: list[int] = []
    with allocate_window(comm, "sig-timeout", 4, np.int32, backend=backend, signal=True) as s:
        s.notify(r, 3, 7, NotifyOp.Set)
        t0 = time.monotonic()
        with pytest.raises(WaitTimeout) as info:
            s.wait(3, 8, WaitCmp.Eq, timeout=0.2, hook=calls.append, policy=PollPolicy(hook_interval=0.02))
        waited = time.monotonic() - t0
        exc = info.value
        assert (exc.observed, exc.expected, exc.cmp, exc.cell, exc.rank) == (7, 8, WaitCmp.Eq, 3, r)
        assert exc.window == "sig-timeout"
        msg = str(exc)
        assert "wait:" in msg and f"rank {r}" in msg and "'sig-timeout'" in msg and "observed value 7" in msg
        assert 0.2 <= waited < 10.0
        assert calls and set(calls) == {7}
        # Errors may be shipped between ranks: the exception survives pickling.
        clone = pickle.loads(pickle.dumps(exc))
        assert isinstance(clone, WaitTimeout) and str(clone) == msg and clone.observed == 7
        # Absolute deadline, GE, already passed: times out at the first check.
        with pytest.raises(WaitTimeout) as info2:
            s.wait(3, 100, WaitCmp.Ge, deadline=time.monotonic() - 1.0)
        assert info2.value.observed == 7 and isinstance(info2.value, TimeoutError)
        assert s.wait(3, 7, WaitCmp.Ge, timeout=0.0) == 7  # satisfied on the first poll
        comm.Barrier()


def _ring_iteration_pattern(src: int, i: int, shape: tuple[int, int]) -> np.ndarray:
    return np.arange(shape[0] * shape[1], dtype=np.float64).reshape(shape) + src * 1e7 + i * 1e4


@pytest.mark.mpi
def test_put_then_notify_ordering_push(comm: MPI.Intracomm, backend: str) -> None:
    """A puts ~1 MB into B then notifies on another window; B waits and reads
    its local copy: every element of this round must be there.  50 rounds,
    with an ack back so A never overwrites data B is still checking."""
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n
    shape = (512, 256)
    bad: list[str] = []
    with WindowSet(comm, backend=backend) as ws:
        data = ws.allocate("ord-data", shape, np.float64)
        sig = ws.allocate("ord-sig", 2, np.int32, signal=True)  # 0: data ready, 1: ack
        for i in range(1, 51):
            if i > 1:
                sig.wait(1, i - 1, WaitCmp.Ge, timeout=TIMEOUT)
            payload = _ring_iteration_pattern(r, i, shape)
            if i % 2:
                data.put(peer, shape, (0, 0), payload)
            else:
                # Several smaller puts (strided column blocks) before one notify.
                for c in range(0, shape[1], 64):
                    data.put(peer, shape, (0, c), payload[:, c : c + 64])
            sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
            sig.wait(0, i, WaitCmp.Ge, timeout=TIMEOUT)
            expect = _ring_iteration_pattern(src, i, shape)
            if not np.array_equal(data.local, expect):
                wrong = int(np.count_nonzero(data.local != expect))
                bad.append(f"round {i}: {wrong} stale elements")
            sig.notify(src, 1, 1, NotifyOp.AtomicAdd)
        sig.wait(1, 50, WaitCmp.Ge, timeout=TIMEOUT)
        agree(comm, not bad, "; ".join(bad[:5]))


@pytest.mark.mpi
def test_local_store_then_notify_ordering_pull(comm: MPI.Intracomm, backend: str) -> None:
    """A stores into its own segment then notifies; B waits and gets it."""
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n
    shape = (256, 512)
    bad: list[str] = []
    with WindowSet(comm, backend=backend) as ws:
        data = ws.allocate("pull-data", shape, np.float64)
        sig = ws.allocate("pull-sig", 2, np.int32, signal=True)  # 0: ready, 1: consumed
        for i in range(1, 51):
            if i > 1:
                sig.wait(1, i - 1, WaitCmp.Ge, timeout=TIMEOUT)  # peer is done reading round i-1
            data.local[...] = _ring_iteration_pattern(r, i, shape)
            sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
            sig.wait(0, i, WaitCmp.Ge, timeout=TIMEOUT)
            got = data.get(src, shape, (0, 0), shape)
            if not np.array_equal(got, _ring_iteration_pattern(src, i, shape)):
                bad.append(f"round {i}: stale data pulled from rank {src}")
            sig.notify(src, 1, 1, NotifyOp.AtomicAdd)
        sig.wait(1, 50, WaitCmp.Ge, timeout=TIMEOUT)
        agree(comm, not bad, "; ".join(bad[:5]))
