"""What every rank of a ``pldemu`` job does with a refusal or a failure: refuse once, or end the job.

A bad input is found identically on every rank before any MPI traffic: :func:`refuse` prints it once
(rank 0) and returns exit 2. A failure inside the job ends it: :func:`abort_with` prints, gives the
process manager a moment to forward the message, then aborts every rank (exit 3);
:func:`abort_on_deadlock` prints a wait-for report once, :func:`abort_on_error` names the
error; under a pldemu launcher the messages are left for it, which prints each failure once. One home for run, check, stress, bench and demo.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from pldemu.job.exits import EXIT_ERROR, EXIT_USAGE, UsageError, usage_error
from pldemu.job.launch import RankFailure, note_failure

if TYPE_CHECKING:
    from mpi4py import MPI


ABORT_GRACE = 0.5
"""Seconds between a failing rank's message and its MPI_Abort (see :func:`abort_with`)."""
NONPRIMARY_GRACE = 2.0
"""Seconds a rank that timed out after a lower rank did waits before aborting, so the lower rank's
wait-for report gets printed before the abort tears the job down."""


def say(text: str) -> None:
    """One write per message, so that ranks' messages do not interleave mid-line."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def abort_with(comm: MPI.Intracomm, text: str, *, head: str = "", key: str = "", hint: str = "",
               full: bool = True) -> NoReturn:
    """End the whole job (exit 3) after this rank's failure ``text`` (empty: nothing to say).

    ``head`` is the command's prefix (``pldemu run: ``); ranks whose failures share ``key`` (default:
    the text) hit the same failure. Under a pldemu launcher the message is left for it, which prints
    each failure once with the ranks that hit it (:func:`pldemu.job.launch.failure_report`);
    elsewhere this rank prints ``HEAD rank R: TEXT`` and ``hint``. Then a pause before ``MPI_Abort``:
    peers on other hosts may still read our windows, and ``MPI_Abort`` kills every rank at once,
    including output still in a pipe between this rank and mpiexec."""
    from pldemu.job.launch import abort_job
    from pldemu.mpi import progress_sleep

    if text:
        _tell(RankFailure(comm.Get_rank(), text, head, key, hint, full))
    progress_sleep(comm, ABORT_GRACE)  # peers on other hosts may still be reading our windows
    abort_job(comm, EXIT_ERROR)


def _tell(failure: RankFailure) -> None:
    """Leave ``failure`` for the launcher that spawned this job, or print it when there is none."""
    if not note_failure(failure):
        say(failure.line + (f"\n{failure.hint}" if failure.hint else ""))


def abort_on_error(comm: MPI.Intracomm, head: str, err: BaseException, hint: str = "",
                   first: Sequence[str] = ()) -> NoReturn:
    """End the job after ``err`` (a refused access, a program error): ranks that fail at one program
    location with one error type are one failure (their messages name their own ranks). ``first``:
    what this rank found before, the error's likely cause, said before it (``then ERROR``)."""
    from pldemu.runtime.errors import failure_key

    abort_with(comm, error_text(err, first), head=head, key=failure_key(err), hint=hint)


def error_text(err: BaseException, first: Sequence[str] = ()) -> str:
    """``TYPE: MESSAGE [FILE:LINE]`` of a rank's failure (the user's line of the statement, when known), after
    ``first`` (what it found before: ``then TYPE: ...``)."""
    from pldemu.runtime.errors import user_line

    origin = user_line(err)
    text = f"{type(err).__name__}: {err}" + (f" [{origin}]" if origin is not None else "")
    return "\n".join([*first, f"then {text}"]) if first else text


DEADLOCK_KEY = "DeadlockError: a wait timed out"
"""What every rank whose wait gave up has in common (the rank that saw it first prints the report)."""


def abort_on_deadlock(comm: MPI.Intracomm, head: str, err: Any, hint: str = "") -> NoReturn:
    """End the job after a ``DeadlockError``: the rank that saw the deadlock first gives the whole
    wait-for report, every other rank one line, so the graph is printed once."""
    if err.primary:
        abort_with(comm, str(err), head=head, key=DEADLOCK_KEY, hint=hint)
    from pldemu.mpi import progress_sleep

    _tell(RankFailure(comm.Get_rank(), f"{err.message} (the wait-for report comes from a lower rank)", head,
                      DEADLOCK_KEY, hint, full=False))
    progress_sleep(comm, NONPRIMARY_GRACE)  # the lower rank reads our windows for its report
    abort_with(comm, "")


def check_job_size(requested: int | None, size: int) -> None:
    """Refuse (UsageError) a ``-n`` that disagrees with the MPI job this rank is part of."""
    if requested is not None and requested != size:
        raise UsageError(f"-n {requested} but this MPI job has {size} ranks")


def refuse(comm: MPI.Intracomm, command: str, err: Exception) -> int:
    """A usage error every rank reached identically before any MPI traffic: rank 0 prints it once,
    then every rank ends MPI cleanly (collective), so that no rank's non-zero exit aborts the job
    before rank 0's message is out (and MPI's shared-memory segments go with MPI_Finalize); every
    rank returns :data:`~pldemu.job.exits.EXIT_USAGE`."""
    from mpi4py import MPI

    if comm.Get_rank() == 0:
        usage_error(command, str(err))
    MPI.Finalize()
    return EXIT_USAGE


__all__ = ["ABORT_GRACE", "DEADLOCK_KEY", "NONPRIMARY_GRACE", "abort_on_deadlock", "abort_on_error", "abort_with",
           "check_job_size", "error_text", "refuse", "say"]
