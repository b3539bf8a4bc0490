"""Fixtures and helpers for the window tests (run under pytest-mpi).

Every test here is collective: all ranks run it and must reach the same
collective calls.  Checks whose failure on one rank would leave the others
stuck in a later collective use ``windows_helpers.agree``, which fails on
*all* ranks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mpi4py import MPI

BACKENDS = ("shared", "rma")


@pytest.fixture
def comm() -> Iterator[MPI.Intracomm]:
    """COMM_WORLD, with a barrier after the test so tests never overlap."""
    world = MPI.COMM_WORLD
    yield world
    world.Barrier()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each test runs on both back ends."""
    return str(request.param)
