"""Fixtures of the multi-rank race-detector and trace tests (pytest-mpi: every rank runs every test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mpi4py import MPI


@pytest.fixture
def comm() -> Iterator[MPI.Intracomm]:
    """COMM_WORLD, with a barrier after the test so that tests never overlap."""
    world = MPI.COMM_WORLD
    yield world
    world.Barrier()
