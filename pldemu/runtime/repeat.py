"""Run a user's program K times back to back on one instance and check it at every block end.

:func:`run_program_iterations` is what ``pldemu run PROGRAM --iters K`` and ``pldemu stress
PROGRAM.pld`` run on every rank. It is the generic half of the checking harness
(:func:`pldemu.runtime.check.run_check`): no inputs are written and there is no oracle (the program is
the user's, so nothing says what its buffers should hold), but everything the credit protocol itself
promises is checked. Calls run back to back, with **no MPI synchronisation between them**; at the end
of every block of ``block`` calls all ranks meet at a barrier (after ``Schedule.host_sync`` when a
schedule is active, so deferred writes have landed) and

* every cell of every SIGNAL buffer on every rank must be 0 (the self-clearing credit protocol's
  claim once all ranks have retired a call and no next-call credit can have arrived); a program that
  leaves cells non-zero on purpose turns this off (``cell_check=False``);
* the invariant checker (``RuntimeOptions.invariants``) and the race detector (``race_detect``) get
  their checkpoint, when the instance has them.

Rank 0 prints one row per block (``emit``); every rank prints its own first failure (``report``).
The result has the shape ``pldemu.runtime.stress`` consumes from ``run_check``: ``kinds`` (the first
failure of each kind this rank saw), ``ok``, ``iters`` and ``summary()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.ir import BufferKind, Program
from pldemu.runtime.check import default_block
from pldemu.runtime.harness import (
    CheckError,
    Failure,
    RowTotals,
    bounded,
    checkpoint_checkers,
    rank0_printer,
    record_failure,
    report_line,
    signal_cells,
)
from pldemu.runtime.oracle import compare

MAX_KEPT = 32
"""Invariant violations and race reports kept for the final report (the rest are only counted)."""

HEADER = f"{'iters':>7}  {'time/iter(us)':>13}  {'cells!=0':>8}  {'invariants':>10}  {'races':>6}"
"""Column titles of the progress table."""

CELL_CHECK_HINT = "(a program that leaves signal cells non-zero on purpose: --no-cell-check skips this check)"


@dataclass(frozen=True)
class IterationRow:
    """One progress row: one block of calls, reduced over all ranks."""

    iters: int
    """Calls done at the end of this block (cumulative)."""
    count: int
    """Calls in this block."""
    time_us: float
    """Per-call ``run()`` time: the slowest rank's block total divided by ``count``."""
    cells_nonzero: int
    """Signal cells != 0 at the block end, summed over ranks and buffers (0 when not checked)."""
    invariants: int
    """Protocol invariant violations found by the runtime's checker in this block (all ranks)."""
    races: int
    """Race reports of the race detector at this block's checkpoint."""

    @property
    def ok(self) -> bool:
        """True when nothing was wrong in this block."""
        return self.cells_nonzero == 0 and self.invariants == 0 and self.races == 0

    def format(self) -> str:
        """The row as printed under :data:`HEADER`."""
        return (f"{self.iters:>7}  {self.time_us:>13.1f}  {self.cells_nonzero:>8}  {self.invariants:>10}  "
                f"{self.races:>6}")


@dataclass
class _Log:
    """What the loop accumulates on this rank (a :class:`~pldemu.runtime.harness.FailureLog`)."""

    first_error: str | None = None
    failure: Failure | None = None
    kinds: dict[str, Failure] = field(default_factory=dict)
    violations: list[Any] = field(default_factory=list)
    races: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class RepeatResult(RowTotals):
    """Outcome of :func:`run_program_iterations` (identical on every rank except :attr:`first_error`,
    :attr:`failure`, :attr:`kinds` and :attr:`seconds`); ``iters``, ``cells_nonzero``, ``time_us``
    and ``ok`` (every block clean) come from :class:`~pldemu.runtime.harness.RowTotals`."""

    program: str
    nranks: int
    rows: tuple[IterationRow, ...]
    backend: str
    cell_check: bool
    kinds: dict[str, Failure]
    """This rank's first failure of each kind (``invariant``, ``race``)."""
    first_error: str | None
    """This rank's first failure, as printed."""
    failure: Failure | None
    violations: tuple[Any, ...]
    """The first invariant violations over all ranks (at most :data:`MAX_KEPT`)."""
    race_reports: tuple[Any, ...]
    """The first race reports (at most :data:`MAX_KEPT`)."""
    seconds: float
    """This rank's total ``run()`` time."""
    stopped: bool = False
    """True when ``stop_on_failure`` ended the run early."""

    @property
    def invariant_violations(self) -> int:
        """Invariant violations over all blocks."""
        return sum(r.invariants for r in self.rows)

    @property
    def races(self) -> int:
        """Race reports over all blocks."""
        return sum(r.races for r in self.rows)

    def summary(self) -> str:
        """One line: what ran and the verdict."""
        cells = f"{self.cells_nonzero} signal cells != 0" if self.cell_check else "cells not checked"
        return (f"# {self.program}: {self.nranks} ranks, {self.iters} iters, {cells}, "
                f"{self.invariant_violations} invariant violations, {self.races} races, "
                f"{self.time_us:.1f} us/iter: {'PASS' if self.ok else 'FAIL'}")


def signal_buffers(program: Program) -> tuple[str, ...]:
    """The names of ``program``'s SIGNAL buffers, in declaration order."""
    return tuple(d.var.name for d in program.buffers if d.kind is BufferKind.SIGNAL)


def cells_at_rest(inst: Any, names: tuple[str, ...], me: int, it: int, log: Any,
                  report: Callable[[str], None] | None) -> int:
    """Count this rank's non-zero cells of the signal buffers ``names``; record the first one."""
    total = 0
    for name in names:
        cells = signal_cells(inst, name)
        m = compare(np.zeros_like(cells), cells, None, f"signal buffer {name}")
        if not m.ok:
            total += m.count
            idx = ", ".join(map(str, m.index or ()))
            record_failure(log, report, f"# rank {me} after iteration {it}: invariant nonzero-at-rest: {m.count} "
                           f"cell(s) != 0 in signal buffer {name} of rank {me}, first {name}[{idx}] = {m.seen} "
                           f"{CELL_CHECK_HINT}", "invariant", it)
    return total


def run_program_iterations(
    comm: MPI.Intracomm,
    inst_or_program: Any,
    iters: int,
    options: Any,
    block: int | None = None,
    *,
    before_run: Callable[[int], None] | None = None,
    stop_on_failure: bool = False,
    emit: Callable[[str], None] | None = None,
    report: Callable[[str], None] | None = report_line,
    header: bool = True,
    cell_check: bool = True,
    sync_timeout: float | None = None,
    on_instance: Callable[[Any], None] | None = None,
) -> RepeatResult:
    """Run the entry function ``iters`` times back to back on every rank of ``comm`` and check every
    block of ``block`` calls (default :func:`default_block`).

    ``inst_or_program`` is a LOWERED ``Program`` (instantiated here with ``options``, closed at the
    end) or a ``ProgramInstance`` the caller made and keeps (its listeners stay attached; the caller
    closes it). ``options`` is the runtime's ``RuntimeOptions``: its ``timeout`` bounds every wait
    (the harness's own MPI waits time out after ``sync_timeout``, default 4x that, at least 60 s).
    ``before_run(iteration)`` is called before every call. ``emit`` prints the table (default: rank
    0 to stdout; ``lambda s: None`` silences it), ``report`` prints this rank's first failure (None:
    silent), ``header`` the two title lines. ``cell_check=False`` skips the at-rest check of the
    signal cells. ``stop_on_failure`` ends the run after the first block with any failure (every
    rank agrees on that at the block end). ``on_instance(inst)`` is called once the instance exists.

    A deadlock raises ``DeadlockError`` and a program error ``ProgramError`` on the rank that hit it
    (as ``run_check`` does): the caller ends the job. Collective: every rank of ``comm`` must call it
    with the same arguments.
    """
    from pldemu.runtime.interpreter import ProgramInstance

    if iters < 1:
        raise CheckError(f"iters must be >= 1, got {iters}")
    block = default_block(iters) if block is None else block
    if block < 1:
        raise CheckError(f"block must be >= 1, got {block}")
    # The caller's instance stays open (nullcontext); one made here is closed on the way out.
    owned = not isinstance(inst_or_program, ProgramInstance)
    with ProgramInstance(inst_or_program, comm, options) if owned else nullcontext(inst_or_program) as inst:
        return _iterate(comm, inst, iters, options, block, before_run, stop_on_failure, emit, report, header,
                        cell_check, sync_timeout, on_instance)


def _iterate(comm: MPI.Intracomm, inst: Any, iters: int, options: Any, block: int,
             before_run: Callable[[int], None] | None, stop_on_failure: bool, emit: Callable[[str], None] | None,
             report: Callable[[str], None] | None, header: bool, cell_check: bool, sync_timeout: float | None,
             on_instance: Callable[[Any], None] | None) -> RepeatResult:
    me, nr = comm.Get_rank(), comm.Get_size()
    timeout = float(getattr(options, "timeout", 30.0))
    sync = sync_timeout if sync_timeout is not None else max(60.0, 4.0 * timeout)
    emit = emit if emit is not None else rank0_printer(comm)
    program: Program = inst.program
    signals = signal_buffers(program) if cell_check else ()
    if on_instance is not None:
        on_instance(inst)
    sched = inst.schedule
    backend = str(inst.backend)
    if header:
        emit(f"# pldemu run: program {program.name}, {nr} ranks, {iters} iters in blocks of {block}, "
             f"windows={backend}, seed={getattr(options, 'seed', 0)}"
             + ("" if cell_check else ", signal cells not checked"))
        emit("#" + HEADER[1:])
    log = _Log()
    rows: list[IterationRow] = []
    seconds = 0.0
    stopped = False
    it = 0
    while it < iters:
        count = min(block, iters - it)
        run_time = 0.0
        for _ in range(count):
            if before_run is not None:
                before_run(it)
            t0 = time.perf_counter()
            inst.run()
            run_time += time.perf_counter() - t0
            it += 1
        seconds += run_time
        # Block end: nobody starts the next call before everybody has finished this block, so no
        # next-call credit can have arrived and every cell must be exactly 0.
        if sched is not None:
            sched.host_sync()
        bounded(comm, sync).barrier(f"the block-end barrier after iteration {it - 1}")
        nonzero = cells_at_rest(inst, signals, me, it - 1, log, report)
        violations, race_reports = checkpoint_checkers(comm, inst, sync, log, report)
        _keep(log.violations, violations)
        _keep(log.races, race_reports)
        cells = int(bounded(comm, sync).allreduce(np.array([nonzero], dtype=np.int64), MPI.SUM, "the block-end sum")[0])
        slowest = float(bounded(comm, sync).allreduce([float(run_time)], MPI.MAX, "the block-end max")[0])
        row = IterationRow(it, count, slowest / count * 1e6, cells, len(violations), len(race_reports))
        rows.append(row)
        emit(row.format())
        if stop_on_failure and not row.ok and it < iters:
            stopped = True
            break
    result = RepeatResult(program.name, nr, tuple(rows), backend, cell_check, log.kinds, log.first_error,
                          log.failure, tuple(log.violations), tuple(log.races), seconds, stopped)
    emit(result.summary())
    return result


def _keep(kept: list[Any], new: list[Any]) -> None:
    kept.extend(new[: max(0, MAX_KEPT - len(kept))])


__all__ = [
    "HEADER",
    "IterationRow",
    "RepeatResult",
    "cells_at_rest",
    "default_block",
    "run_program_iterations",
    "signal_buffers",
]
