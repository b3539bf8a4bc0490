"""Run a user's program K times back to back on one instance and check it at every block end.

:func:`run_program_iterations` is what ``pldemu run PROGRAM --iters K`` and ``pldemu stress
PROGRAM.pld`` run on every rank. It is the generic half of the checking harness
(:func:`pldemu.harness.check.run_check`): no inputs are written and there is no oracle (the program is
the user's, so nothing says what its buffers should hold), but everything the credit protocol itself
promises is checked. The calls run in the block loop every harness shares
(:func:`pldemu.harness.blocks.run_blocks`): back to back, with **no MPI synchronisation between
them**; at the end of every block of ``block`` calls all ranks meet at a barrier (after every
deferred write has landed) and

* every cell of every SIGNAL buffer on every rank must be 0 (the self-clearing credit protocol's
  claim once all ranks have retired a call and no next-call credit can have arrived); a program that
  leaves cells non-zero on purpose turns this off (``cell_check=False``);
* the invariant checker (``RuntimeOptions.invariants``) and the race detector (``race_detect``) get
  their checkpoint, when the instance has them.

Rank 0 prints one row per block (``Hooks.emit``); every rank prints its own first failure
(``Hooks.report``).
The result has the shape ``pldemu.harness.stress`` consumes from ``run_check``: ``kinds`` (the first
failure of each kind this rank saw), ``ok``, ``iters`` and ``summary()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from pldemu.harness.blocks import DEFAULT_HOOKS, BlockFigures, Hooks, RunContext, block_size, run_blocks
from pldemu.harness.common import Failure, RowTotals, record_failure, signal_cells
from pldemu.harness.oracle import compare
from pldemu.ir import BufferKind, Program
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from pldemu.runtime.interpreter import ProgramInstance


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
class RepeatLog:
    """What the loop accumulates on this rank (a :class:`~pldemu.harness.common.FailureLog`)."""

    first_error: str | None = None
    failure: Failure | None = None
    kinds: dict[str, Failure] = field(default_factory=dict)
    violations: list[Any] = field(default_factory=list)
    races: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class RepeatResult(RowTotals):
    """Outcome of :func:`run_program_iterations` (identical on every rank except :attr:`first_error`,
    :attr:`failure`, :attr:`kinds` and :attr:`seconds`); ``iters``, ``cells_nonzero``, ``time_us``
    and ``ok`` (every block clean) come from :class:`~pldemu.harness.common.RowTotals`."""

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
    notes: tuple[str, ...] = ()
    """The race detector's notes on fences and cacheinvalids (``--visibility fenced``), not failures."""

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


def cells_at_rest(inst: ProgramInstance, names: tuple[str, ...], me: int, it: int, log: Any,
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
    options: RuntimeOptions,
    block: int | None = None,
    *,
    hooks: Hooks = DEFAULT_HOOKS,
    cell_check: bool = True,
) -> RepeatResult:
    """Run the entry function ``iters`` times back to back on every rank of ``comm`` and check every
    block of ``block`` calls (default :func:`pldemu.harness.blocks.default_block`).

    ``inst_or_program`` is a LOWERED ``Program`` (instantiated here with ``options``, closed at the
    end) or a ``ProgramInstance`` the caller made and keeps (its listeners stay attached; the caller
    closes it). ``options``: the runtime's knobs; its ``timeout`` bounds every wait (the harness's own
    MPI waits time out after 4x that, at least 60 s). ``hooks``: the progress printer, the
    first-failure reporter, the per-call and instance hooks and the early stop
    (:class:`pldemu.harness.blocks.Hooks`). ``cell_check=False`` skips the at-rest check of the
    signal cells.

    A deadlock raises ``DeadlockError`` and a program error ``ProgramError`` on the rank that hit it
    (as ``run_check`` does): the caller ends the job. Collective: every rank of ``comm`` must call it
    with the same arguments.
    """
    block = block_size(iters, block)
    log = RepeatLog()
    with RunContext.open(comm, inst_or_program, options, log, hooks) as ctx:
        program: Program = ctx.inst.program
        harness = _ProgramHarness(signal_buffers(program) if cell_check else (), log)
        ctx.emit(f"# pldemu run: program {program.name}, {ctx.nranks} ranks, {iters} iters in blocks of {block}, "
                 f"windows={ctx.backend}, seed={options.seed}" + ("" if cell_check else ", signal cells not checked"))
        ctx.emit("#" + HEADER[1:])
        run = run_blocks(ctx, iters, block, harness)
    result = RepeatResult(program.name, ctx.nranks, tuple(run.rows), ctx.backend, cell_check, log.kinds,
                          log.first_error, log.failure, tuple(log.violations), tuple(log.races), run.seconds,
                          run.stopped, tuple(run.notes))
    ctx.emit(result.summary())
    return result


class _ProgramHarness:
    """The block-end work of :func:`run_program_iterations` (a ``BlockHarness``): a user's program has
    no inputs and no oracle; its signal cells must be 0 at rest."""

    def __init__(self, signals: tuple[str, ...], log: RepeatLog) -> None:
        self.signals, self.log = signals, log

    def call(self, ctx: RunContext, it: int) -> float:
        return ctx.run_call(it)

    def block_end(self, ctx: RunContext, last: int) -> list[int]:
        return [cells_at_rest(ctx.inst, self.signals, ctx.me, last, self.log, ctx.hooks.report)]

    def row(self, f: BlockFigures) -> IterationRow:
        _keep(self.log.violations, f.violations)
        _keep(self.log.races, f.races)
        return IterationRow(f.iters, f.count, f.time_us, f.totals[0], len(f.violations), len(f.races))


def _keep(kept: list[Any], new: list[Any]) -> None:
    kept.extend(new[: max(0, MAX_KEPT - len(kept))])


__all__ = [
    "HEADER",
    "IterationRow",
    "RepeatLog",
    "RepeatResult",
    "cells_at_rest",
    "run_program_iterations",
    "signal_buffers",
]
