"""Helpers shared by the check-harness MPI tests."""

from __future__ import annotations

from mpi4py import MPI


def agree(comm: MPI.Intracomm, ok: bool, detail: str = "") -> None:
    """Collective assert: raise on every rank if it failed on any rank, with every failing rank's detail."""
    results = comm.allgather((bool(ok), detail))
    bad = [(r, d) for r, (good, d) in enumerate(results) if not good]
    if bad:
        lines = "\n".join(f"  rank {r}: {d}" for r, d in bad)
        raise AssertionError(f"failed on {len(bad)} of {comm.Get_size()} ranks:\n{lines}")
