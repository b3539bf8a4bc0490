"""The loop of every rank of a pool job: ``python -m mpi4py -m pldemu.pool.server``.

Rank 0 reads one request per line on its stdin (JSON: ``argv``, the ``pldemu`` arguments,
``folder`` and the launcher's ``cwd``); every rank runs ``pldemu ARGV`` with its stdout and stderr in ``folder/rankR.out`` /
``.err``; rank 0 answers on its own stdout with one :data:`~pldemu.pool.client.REPLY` line holding
every rank's exit code. End of input ends the job, and so does a run that did not end cleanly
(:data:`~pldemu.pool.client.CLEAN_EXITS`). Between requests the ranks sleep (rank 0 in ``read``, the
others in a barrier's back-off), so an idle pool costs its machine nothing.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pldemu.job.launch import prepare_rank
from pldemu.pool.client import CLEAN_EXITS, REPLY


@contextmanager
def _output_to(folder: Path, rank: int) -> Iterator[None]:
    """This process's file descriptors 1 and 2 (and so ``print``, numpy, MPI) in ``folder``'s files."""
    saved = [os.dup(1), os.dup(2)]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        for fd, suffix in ((1, "out"), (2, "err")):
            with open(folder / f"rank{rank}.{suffix}", "wb") as f:
                os.dup2(f.fileno(), fd)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)


def _run_one(argv: Sequence[str], folder: Path, rank: int) -> int:
    from pldemu.cli import main

    with _output_to(folder, rank):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's own exits
            code = stop.code if isinstance(stop.code, int) else 2
    return code


def serve() -> int:
    """Serve requests until rank 0's stdin ends; collective."""
    from mpi4py import MPI

    from pldemu.mpi import IDLE_POLICY, BoundedComm
    from pldemu.runtime.shm import unlink_named_segments

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    polite = BoundedComm(comm, math.inf)  # waits that sleep: the machine's cores are the runs' own
    idle = BoundedComm(comm, math.inf, policy=IDLE_POLICY)
    idle.barrier("the job's start")
    # Every local rank has mapped MPI_Init's named segment now: drop the name at once, not at the first
    # run, so that a pool idle for a long time shows nothing in /dev/shm (and leaves nothing if killed).
    unlink_named_segments()
    while True:
        line = sys.stdin.readline() if rank == 0 else ""
        idle.barrier("the next request")  # the others sleep here while rank 0 reads
        request = comm.bcast(json.loads(line) if line.strip() else None)
        if request is None:
            return 0
        os.chdir(request["cwd"])  # where the launcher is now, as for a job of its own
        code = _run_one(request["argv"], Path(request["folder"]), rank)
        if MPI.Is_finalized():
            return 0  # a refusal ended MPI: the launcher sees the job end and runs the request alone
        codes = polite.allgather(code, "the exit codes")
        if rank == 0:
            print(REPLY, json.dumps(codes), flush=True)
        if any(c not in CLEAN_EXITS for c in codes):
            return 0  # the launcher retires this job and runs the request again in a job of its own


if __name__ == "__main__":
    prepare_rank()
    sys.exit(serve())
