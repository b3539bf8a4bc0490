"""A unit whose every rank sleeps far longer than any test waits (data for test_shared_units.py):
only a kill ends its job."""

import time

import pytest

pytestmark = pytest.mark.mpi


def test_every_rank_sleeps(comm) -> None:
    comm.Barrier()
    time.sleep(3600)
