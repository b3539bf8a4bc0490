"""What every rank of a ``pldemu`` job does with a refusal or a failure: refuse once, or end the job.

A bad input is found identically on every rank before any MPI traffic: :func:`refuse` prints it once
(rank 0) and returns exit 2. A failure inside the job ends it: :func:`abort_with` prints, gives the
process manager a moment to forward the message, then aborts every rank (exit 3);
:func:`abort_on_deadlock` prints a wait-for report once. One home for run, check, stress, bench and demo.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from pldemu.job.exits import EXIT_ERROR, EXIT_USAGE, UsageError, usage_error

ABORT_GRACE = 0.5
"""Seconds between a failing rank's message and its MPI_Abort (see :func:`abort_with`)."""
NONPRIMARY_GRACE = 2.0
"""Seconds a rank that timed out after a lower rank did waits before aborting, so the lower rank's
wait-for report gets printed before the abort tears the job down."""


def say(text: str) -> None:
    """One write per message, so that ranks' messages do not interleave mid-line."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def abort_with(comm: Any, text: str) -> NoReturn:
    """Print ``text`` (if any), give the process manager a moment to forward it, end the whole job
    (exit 3). ``MPI_Abort`` kills every rank at once, including output still in a pipe between this
    rank and mpiexec: without the pause a one-rank failure could end the job without its message."""
    from pldemu.job.launch import abort_job
    from pldemu.mpi import progress_sleep

    if text:
        say(text)
    progress_sleep(comm, ABORT_GRACE)  # peers on other hosts may still be reading our windows
    abort_job(comm, EXIT_ERROR)


def abort_on_deadlock(comm: Any, prefix: str, err: Any, hint: str = "") -> NoReturn:
    """End the job after a ``DeadlockError``: the rank that saw the deadlock first prints the whole
    wait-for report, every other rank one line, so the graph is printed once."""
    if err.primary:
        abort_with(comm, f"{prefix}{err}" + (f"\n{hint}" if hint else ""))
    from pldemu.mpi import progress_sleep

    say(f"{prefix}{err.message} (the wait-for report comes from a lower rank)")
    progress_sleep(comm, NONPRIMARY_GRACE)  # the lower rank reads our windows for its report
    abort_with(comm, "")


def check_job_size(requested: int | None, size: int) -> None:
    """Refuse (UsageError) a ``-n`` that disagrees with the MPI job this rank is part of."""
    if requested is not None and requested != size:
        raise UsageError(f"-n {requested} but this MPI job has {size} ranks")


def refuse(comm: Any, command: str, err: Exception) -> int:
    """A usage error every rank reached identically before any MPI traffic: rank 0 prints it once;
    every rank returns :data:`~pldemu.job.exits.EXIT_USAGE`."""
    if comm.Get_rank() == 0:
        usage_error(command, str(err))
    return EXIT_USAGE


__all__ = ["ABORT_GRACE", "NONPRIMARY_GRACE", "abort_on_deadlock", "abort_with", "check_job_size", "refuse", "say"]
