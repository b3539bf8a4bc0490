"""Small pieces shared by the harnesses that run a program K times back to back on one instance.

Two harnesses do that: :func:`pldemu.harness.check.run_check` (a built-in collective, checked against
an oracle) and :func:`pldemu.harness.repeat.run_program_iterations` (a user's program, no oracle);
``stress`` runs one of them. They share one run context and one block loop
(``pldemu.harness.blocks``: the host-side hook sequence lives there). What the loop is built from
lives here: the failure record (:class:`Failure`, :func:`record_failure`), the row totals, the
bounded collectives (:func:`bounded`, a ``pldemu.mpi.BoundedComm`` raising CheckTimeout: a stuck or
gone rank ends in :class:`CheckTimeout`, never a hang), the signal-cell reads and the checkpoint of
the runtime's optional checkers (invariants, races).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np
from mpi4py import MPI

from pldemu.mpi import HOST_POLICY, BoundedComm, PollPolicy

if TYPE_CHECKING:
    from pldemu.runtime.interpreter import ProgramInstance



class CheckError(RuntimeError):
    """The harness could not run the check (bad geometry, a rank failed, ...)."""


class CheckTimeout(CheckError):
    """An MPI synchronisation of the harness did not complete in time: some rank is stuck or gone."""


@dataclass(frozen=True)
class Failure:
    """The first failure one rank saw: its kind (``pldemu.mutants.FAILURE_KINDS``), the iteration
    (0-based call of the harness loop; -1 when not known) and the printed line."""

    kind: str
    iteration: int
    rank: int
    text: str


class RowTotals:
    """Totals over ``self.rows``, the progress rows of a harness run (each with ``iters``, ``count``,
    ``time_us``, ``cells_nonzero`` and ``ok``); shared by the harnesses' result classes."""

    rows: Sequence[Any]

    @property
    def iters(self) -> int:
        """Iterations run."""
        return int(self.rows[-1].iters) if self.rows else 0

    @property
    def cells_nonzero(self) -> int:
        """Non-zero signal cells over all block ends and ranks."""
        return sum(int(r.cells_nonzero) for r in self.rows)

    @property
    def time_us(self) -> float:
        """Mean per-iteration time (slowest rank per block)."""
        n = sum(r.count for r in self.rows)
        return float(sum(r.time_us * r.count for r in self.rows) / n) if n else 0.0

    @property
    def ok(self) -> bool:
        """True when every block was clean (see the row's ``ok``)."""
        return bool(self.rows) and all(r.ok for r in self.rows)


class FailureLog(Protocol):
    """What :func:`record_failure` updates (``CheckResult`` and the repeat harness's accumulator)."""

    first_error: str | None
    failure: Failure | None
    kinds: dict[str, Failure]


# ----------------------------------------------------------------------------------------------
# Bounded MPI helpers
# ----------------------------------------------------------------------------------------------


def bounded(comm: MPI.Comm, timeout: float, error: Callable[[str], Exception] | None = None,
            policy: PollPolicy = HOST_POLICY) -> BoundedComm:
    """``comm`` with bounded collectives (``pldemu.mpi.BoundedComm``): an exchange that does not
    complete in ``timeout`` seconds raises ``error(what)`` (default: CheckTimeout naming this rank; a
    peer is stuck or gone). ``policy``: how the completion polls (the benchmark's is tighter)."""

    def stuck(what: str) -> CheckTimeout:
        return CheckTimeout(f"rank {comm.Get_rank()}: {what} did not complete in {timeout:g}s "
                            "(a peer is stuck in the collective or has failed)")

    return BoundedComm(comm, timeout, error if error is not None else stuck, policy)


# ----------------------------------------------------------------------------------------------
# Printing and the first failure of each kind
# ----------------------------------------------------------------------------------------------


def rank0_printer(comm: MPI.Comm, stream: TextIO | None = None) -> Callable[[str], None]:
    """An ``emit`` that prints a line on rank 0 only (progress tables, reports), to ``stream``
    (default: stdout at the time of the call), flushed."""

    def emit(line: str) -> None:
        if comm.Get_rank() == 0:
            print(line, file=stream if stream is not None else sys.stdout, flush=True)

    return emit


def report_line(line: str) -> None:
    """Every rank reports its own first failure immediately (the table comes later). One write per
    line: ranks share the pipe to mpiexec, and ``print`` writes the newline separately, which let
    two ranks' lines run together."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def rank_of(line: str) -> int:
    """The rank a ``# rank R ...`` line names (-1 for lines about every rank)."""
    words = line.split()
    if len(words) > 2 and words[1] == "rank" and words[2].rstrip(":").isdigit():
        return int(words[2].rstrip(":"))
    return -1


def record_failure(log: FailureLog, report: Callable[[str], None] | None, line: str,
                   kind: str = "wrong-data", iteration: int = -1) -> None:
    """Keep ``line`` as the first failure of ``kind`` (and overall); ``report`` the first one only."""
    failure = Failure(kind, iteration, rank_of(line), line)
    log.kinds.setdefault(kind, failure)
    if log.first_error is None:
        log.first_error = line
        log.failure = failure
        if report is not None:
            report(line)


# ----------------------------------------------------------------------------------------------
# Block-end checks
# ----------------------------------------------------------------------------------------------


def signal_cells(inst: ProgramInstance, name: str) -> np.ndarray:
    """Atomic reads of every cell of this rank's signal window ``name``."""
    win = inst.window(name)
    read = getattr(win, "read_cell", None)
    if read is None:
        return np.array(inst.local(name), copy=True)
    flat = np.array([read(i) for i in range(int(win.numel))], dtype=np.int64)
    return flat.reshape(win.shape)


def checkpoint_checkers(comm: MPI.Intracomm, inst: ProgramInstance, sync: float, log: FailureLog,
                        report: Callable[[str], None] | None) -> tuple[list[Any], list[Any]]:
    """Collective block-end checkpoint of the instance's invariant checker and race detector (each
    only when the instance has it): record this rank's first violation and rank 0 the first race in
    ``log``; return (every violation, every race report), the same lists on every rank."""
    me = comm.Get_rank()
    checker = getattr(inst, "invariants", None)
    races = getattr(inst, "races", None)
    violations = checker.checkpoint(comm, sync) if checker is not None else []
    for v in violations:
        if v.rank == me:
            record_failure(log, report, f"# rank {me}: {v.describe()}", "invariant", v.iteration)
    race_reports = races.check(comm) if races is not None else []
    if race_reports:
        r0 = race_reports[0]
        # A host access "after call c" precedes iteration c; a program access in call c is iteration c - 1.
        race_its = [a.call if a.host else a.call - 1 for a in (r0.first, r0.second)]
        record_failure(log, report if me == 0 else None, f"# {r0.describe()}", "race", max(race_its))
    return violations, race_reports


__all__ = [
    "CheckError",
    "CheckTimeout",
    "Failure",
    "FailureLog",
    "RowTotals",
    "bounded",
    "checkpoint_checkers",
    "rank0_printer",
    "rank_of",
    "record_failure",
    "report_line",
    "signal_cells",
]
