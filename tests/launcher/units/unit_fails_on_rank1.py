"""A unit whose one test fails on rank 1 only; the job goes on (data for test_shared_units.py)."""

import pytest

pytestmark = pytest.mark.mpi


def test_rank1_disagrees(comm) -> None:
    assert comm.Get_rank() != 1, "rank 1 fails this test on purpose"
