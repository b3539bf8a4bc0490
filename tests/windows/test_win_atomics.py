"""Atomics on shared windows: CPU atomics (libatomic) on INT32 windows, MPI accumulates otherwise.

The shared back end uses CPU atomics for every atomic of an INT32 window when libatomic loads, and
MPI accumulates when it does not (``pldemu.windows.shared.CPU_ATOMICS`` is None). Both mechanisms
must give the same results; each test runs with each of them (the choice is made per window, at
allocation, identically on every rank).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.windows import NotifyOp, WaitCmp, allocate_window
from pldemu.windows import shared as shared_backend

TIMEOUT = 60.0


@pytest.fixture(params=["cpu", "mpi"])
def atomics(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with CPU atomics (when available) and with the MPI fallback."""
    if request.param == "mpi":
        monkeypatch.setattr(shared_backend, "CPU_ATOMICS", None)
    elif shared_backend.CPU_ATOMICS is None:
        pytest.skip("libatomic is not available: the shared back end uses MPI accumulates")
    yield str(request.param)


@pytest.mark.mpi
def test_concurrent_notify_and_fetch(comm: MPI.Intracomm, atomics: str) -> None:
    """Every rank adds to cell 0 of every rank with notify, and to rank 0's cell 1 with fetch_notify:
    the sums are exact and the fetched values are exactly the distinct partial sums 0, 2, 4, ..."""
    r, n = comm.Get_rank(), comm.Get_size()
    reps = 50
    with allocate_window(comm, "atom", 4, np.int32, backend="shared", signal=True) as s:
        comm.Barrier()
        olds = []
        for _ in range(reps):
            for p in range(n):
                s.notify(p, 0, 1, NotifyOp.AtomicAdd)
            olds.append(s.fetch_notify(0, 1, 2, NotifyOp.AtomicAdd))
        s.wait(0, reps * n, WaitCmp.Eq, timeout=TIMEOUT)
        comm.Barrier()
        every = sorted(v for vals in comm.allgather(olds) for v in vals)
        agree(comm, s.read_cell(0) == reps * n, f"cell 0 is {s.read_cell(0)}")
        agree(comm, every == list(range(0, 2 * reps * n, 2)), "fetched values are not the partial sums")
        agree(comm, r != 0 or s.read_cell(1) == 2 * reps * n, f"cell 1 is {s.read_cell(1)}")
        comm.Barrier()


@pytest.mark.mpi
def test_set_wraps_and_atomic_put(comm: MPI.Intracomm, atomics: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    peer = (r + 1) % n
    imin, imax = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)
    with allocate_window(comm, "atom-set", (2, 3), np.int32, backend="shared", fill=0) as w:
        w.notify(peer, 0, imax, NotifyOp.Set)
        comm.Barrier()
        old = w.fetch_notify(peer, 0, 1, NotifyOp.AtomicAdd)  # INT32 wraps: max + 1 == min
        comm.Barrier()
        agree(comm, old == imax and w.read_cell(0) == imin, f"old {old}, cell {w.read_cell(0)}")
        comm.Barrier()
        for p in range(n):
            w.put(p, (2, 3), (1, 1), np.array([[r + 1, -(r + 1)]], dtype=np.int32), atomic_add=True)
        comm.Barrier()
        w.sync()
        total = n * (n + 1) // 2
        agree(comm, w.local[1].tolist() == [0, total, -total], f"row 1 is {w.local[1].tolist()}")
        comm.Barrier()
