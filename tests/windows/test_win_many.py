"""``WindowSet.allocate_many``: a program's windows with one argument check (issue 23, item 2: window
allocation at the cost of the MPI calls). Ranks that disagree on any window, or a repeated name, get
the error on every rank before the first window exists; otherwise the windows are the ones
``allocate`` would make, in order."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from pldemu.windows import WindowSet, WindowSpec

SPECS = (WindowSpec("data", (4, 8), np.float32), WindowSpec("sig", 4, np.int32, signal=True),
         WindowSpec("zeros", 3, np.float64, fill=0))


@pytest.mark.mpi
def test_the_windows_are_what_allocate_makes(comm: MPI.Intracomm, backend: str) -> None:
    with WindowSet(comm, backend=backend) as ws:
        data, sig, zeros = ws.allocate_many(SPECS)
        assert [w.name for w in ws] == ["data", "sig", "zeros"]
        assert data.shape == (4, 8) and np.isnan(data.local).all()  # poisoned, as allocate() fills it
        assert sig.is_signal and (sig.local == 0).all()
        assert (zeros.local == 0).all()
        comm.Barrier()  # every rank has looked at its fresh windows before any peer writes them
        peer = (comm.rank + 1) % comm.size
        data.put(peer, (4, 8), (0, 0), np.full((4, 8), comm.rank, np.float32))
        comm.Barrier()
        data.sync()
        assert (data.local == (comm.rank - 1) % comm.size).all()


@pytest.mark.mpi(min_size=2)
def test_ranks_that_disagree_on_any_window_fail_before_the_first_exists(comm: MPI.Intracomm, backend: str) -> None:
    third = WindowSpec("zeros", 3 if comm.rank == 0 else 5, np.float64, fill=0)
    with WindowSet(comm, backend=backend) as ws:
        with pytest.raises(ValueError, match="ranks disagree on the windows") as err:
            ws.allocate_many([*SPECS[:2], third])
        assert "'zeros', (3,)" in str(err.value) and "'zeros', (5,)" in str(err.value)
        assert len(ws) == 0
        assert [w.name for w in ws.allocate_many(SPECS)] == ["data", "sig", "zeros"]  # the set is still usable


@pytest.mark.mpi
def test_a_repeated_name_fails_before_the_first_window_exists(comm: MPI.Intracomm) -> None:
    with WindowSet(comm) as ws:
        with pytest.raises(ValueError, match="more than one window named 'data'"):
            ws.allocate_many([SPECS[0], WindowSpec("data", 2, np.int32, signal=True)])
        assert len(ws) == 0
        ws.allocate_many(SPECS[1:])
        with pytest.raises(ValueError, match="more than one window named 'sig'"):
            ws.allocate_many([SPECS[0], SPECS[1]])
        assert len(ws) == 2
