"""A unit whose rank 1 dies mid-test: mpiexec ends the job (data for test_shared_units.py)."""

import os

import pytest

from pldemu.runtime.shm import unlink_named_segments

pytestmark = pytest.mark.mpi


def test_rank1_dies(comm) -> None:
    comm.Barrier()
    if comm.Get_rank() == 1:
        # MPI_Finalize never runs in a killed job: drop the node's segment so this planned crash
        # leaves nothing in /dev/shm (the judging, not the leak, is what the test is about).
        unlink_named_segments()
        os._exit(9)
    comm.Barrier()
