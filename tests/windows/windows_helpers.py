"""Helpers shared by the window tests (kept out of conftest.py so that
``import`` cannot pick up another directory's conftest module)."""

from __future__ import annotations

from mpi4py import MPI


def agree(comm: MPI.Intracomm, ok: bool, detail: str = "") -> None:
    """Collective assert: raise on every rank if it failed on any rank.

    A plain ``assert`` failing on one rank would send that rank into the
    window free while the others wait in some other collective: a hang.
    """
    results = comm.allgather((bool(ok), detail))
    bad = [(r, d) for r, (good, d) in enumerate(results) if not good]
    if bad:
        lines = "\n".join(f"  rank {r}: {d}" for r, d in bad)
        raise AssertionError(f"failed on {len(bad)} of {comm.Get_size()} ranks:\n{lines}")
