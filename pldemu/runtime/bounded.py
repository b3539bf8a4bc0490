"""Completing a nonblocking MPI request by a deadline: the one poll loop behind every bounded
exchange of the harnesses and checkers (block-end barriers and sums, invariant and race checkpoints,
trace gathering).

A rank that never reaches a collective exchange (stuck in a wait, or gone) must not hang its peers
forever: they poll the request with a short, growing sleep (so an oversubscribed rank they wait for
gets the CPU) and raise the caller's error once the deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mpi4py import MPI

FIRST_SLEEP = 1e-5
"""Seconds of the first sleep between polls; each later one doubles, up to :data:`MAX_SLEEP`."""

MAX_SLEEP = 1e-3


def complete_by(req: MPI.Request, deadline: float, timeout_error: Callable[[], Exception]) -> None:
    """Poll ``req`` until it completes; raise ``timeout_error()`` once ``time.monotonic()`` passes
    ``deadline``."""
    sleep = FIRST_SLEEP
    while not req.Test():
        if time.monotonic() >= deadline:
            raise timeout_error()
        time.sleep(sleep)
        sleep = min(sleep * 2, MAX_SLEEP)


__all__ = ["MAX_SLEEP", "complete_by"]
