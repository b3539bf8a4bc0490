"""A unit whose rank 1 dies mid-test: mpiexec ends the job (data for test_shared_units.py)."""

import os

import pytest

pytestmark = pytest.mark.mpi


def test_rank1_dies(comm) -> None:
    comm.Barrier()
    if comm.Get_rank() == 1:
        os._exit(9)
    comm.Barrier()
