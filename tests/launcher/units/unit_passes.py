"""A unit that passes on every rank (data for tests/launcher/test_shared_units.py, never collected alone)."""

import pytest

pytestmark = pytest.mark.mpi


def test_every_rank_agrees(comm) -> None:
    assert comm.allreduce(1) == comm.Get_size()


def test_another_passing_test(comm) -> None:
    assert comm.bcast(comm.Get_rank(), root=0) == 0
