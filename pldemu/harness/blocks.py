"""One run of a program on one rank (:class:`RunContext`) and the block loop every harness shares.

A harness (``check`` for a built-in collective, ``run --iters`` and ``stress`` for a user's program)
runs the entry function K times back to back on one instance and checks every block of calls.  What
all of them need lives here, once:

* :class:`RunContext` owns the run on this rank: the ``ProgramInstance`` and, through it, the
  adversarial schedule, the race detector, the invariant checker and the trace.  It performs the
  host-side hooks of those checkers itself, in the one right order: before the host touches its own
  windows the schedule lands this rank's deferred writes (``Schedule.host_access``), and the race
  detector learns of the access after it (``RaceDetector.host_access``); an all-rank fence lands
  every deferred write (``Schedule.host_sync``), meets at a bounded barrier and joins the race
  detector's clocks (``RaceDetector.join``).  A harness never calls those four methods itself.
* :class:`Hooks` groups the callbacks a caller may give a harness (progress printer, first-failure
  reporter, per-call hook, instance hook, early stop).
* :func:`run_blocks` is the block loop: calls back to back with no MPI synchronisation between them,
  then at every block end a barrier, the harness's own at-rest checks, the checkpoint of the invariant
  checker and the race detector, and one row of figures reduced over ranks.  The per-call and
  per-block work that differs (inputs and an oracle for a collective, nothing for a user's program)
  is a :class:`BlockHarness`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np
from mpi4py import MPI

from pldemu.harness.common import (
    CheckError,
    FailureLog,
    bounded,
    checkpoint_checkers,
    rank0_printer,
    record_failure,
    report_line,
)
from pldemu.runtime.errors import ROOT_CAUSE_ORDER, Cause, DeadlockError
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from pldemu.ir import Program
    from pldemu.runtime.interpreter import ProgramInstance

ROWS_TARGET = 8
"""The default block makes about this many progress rows."""


def silent(line: str) -> None:
    """An ``emit`` or ``report`` that prints nothing."""


@dataclass(frozen=True)
class Hooks:
    """The callbacks of a harness run (every one optional).

    ``emit`` prints the progress table (None: rank 0 prints to stdout; :func:`silent` silences it);
    ``report`` prints this rank's first failure (None: silent); ``before_run(iteration)`` is called
    before every call (tests delay a rank with it; ``stress`` prints progress); ``on_instance(inst)``
    is called once the program instance exists (a caller that must look at the checkers after a
    deadlock keeps it); ``stop_after(row)``: True ends the run after that block (every rank sees the
    same reduced row, so every rank agrees)."""

    emit: Callable[[str], None] | None = None
    report: Callable[[str], None] | None = report_line
    before_run: Callable[[int], None] | None = None
    on_instance: Callable[[Any], None] | None = None
    stop_after: Callable[[Row], bool] | None = None


DEFAULT_HOOKS = Hooks()
"""Rank 0 prints the table, every rank its first failure, the run goes to the end."""

QUIET = Hooks(emit=silent, report=None)
"""Print nothing (tests, and harnesses driven by another one)."""


def stop_at_failure(row: Row) -> bool:
    """A ``Hooks.stop_after`` that ends the run at the first block that was not clean."""
    return not row.ok


def default_block(iters: int) -> int:
    """Iterations per block so that ``iters`` makes about :data:`ROWS_TARGET` rows."""
    return max(1, math.ceil(iters / ROWS_TARGET))


def block_size(iters: int, block: int | None) -> int:
    """The block of a run of ``iters`` calls (None: about :data:`ROWS_TARGET` rows); CheckError on a
    count below 1."""
    if iters < 1:
        raise CheckError(f"iters must be >= 1, got {iters}")
    block = default_block(iters) if block is None else block
    if block < 1:
        raise CheckError(f"block must be >= 1, got {block}")
    return block


class RunContext:
    """A run of one program instance on this rank: the instance, its optional checkers and the
    host-side hooks, performed in order.

    ``log`` receives this rank's failures (:meth:`fail`); ``sync`` bounds every MPI wait of the harness
    itself (4x the options' wait timeout, at least 60 s), so a stuck peer ends in ``CheckTimeout``."""

    def __init__(self, comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions, log: FailureLog,
                 hooks: Hooks = DEFAULT_HOOKS) -> None:
        self.comm, self.inst, self.options, self.log, self.hooks = comm, inst, options, log, hooks
        self.me, self.nranks = comm.Get_rank(), comm.Get_size()
        self.sync = max(60.0, 4.0 * float(options.timeout))
        self.emit: Callable[[str], None] = hooks.emit if hooks.emit is not None else rank0_printer(comm)

    @classmethod
    @contextmanager
    def open(cls, comm: MPI.Intracomm, program: Program | ProgramInstance, options: RuntimeOptions,
             log: FailureLog, hooks: Hooks = DEFAULT_HOOKS) -> Iterator[RunContext]:
        """A context over ``program``: a LOWERED ``Program`` is instantiated here and closed on the way
        out; a ``ProgramInstance`` the caller made stays the caller's (its listeners stay attached)."""
        from pldemu.runtime.interpreter import ProgramInstance

        owner: AbstractContextManager[ProgramInstance] = (
            nullcontext(program) if isinstance(program, ProgramInstance) else ProgramInstance(program, comm, options))
        with owner as inst:
            if hooks.on_instance is not None:
                hooks.on_instance(inst)
            ctx = cls(comm, inst, options, log, hooks)
            if inst.hosts.spans_hosts:
                ctx.emit(f"# {inst.hosts.describe()}")
            yield ctx

    @property
    def backend(self) -> str:
        """The window back end the instance uses."""
        return str(self.inst.backend)

    # -- the host-side hooks ------------------------------------------------------------------------

    def write_own(self, arrays: Mapping[str, np.ndarray], where: str = "inputs") -> None:
        """The host writes this rank's own buffers ``arrays`` (name -> values, reshaped to the buffer)."""
        self._land_own()
        for name, values in arrays.items():
            buf = self.inst.local(name)
            buf[...] = values.reshape(buf.shape)
        self._record(arrays, True, where)

    def read_own(self, names: Sequence[str], where: str = "consume") -> list[np.ndarray]:
        """Copies of this rank's own buffers ``names``, read by the host (consuming a result)."""
        self._land_own()
        out = [np.array(self.inst.local(name), copy=True) for name in names]
        self._record(names, False, where)
        return out

    def fence(self, what: str) -> None:
        """An all-rank fence of the host: every deferred write lands, a bounded barrier, and the race
        detector learns that everything before it happens before everything after it."""
        self.block_barrier(what)
        if self.inst.races is not None:
            self.inst.races.join()

    def notes(self) -> list[str]:
        """Collective: the race detector's notes on fences and cacheinvalids (``--visibility fenced``;
        else none), the same list on every rank."""
        return self.inst.races.notes() if self.inst.races is not None else []

    def block_barrier(self, what: str) -> None:
        """The block-end barrier (bounded), after every deferred write has landed. The race detector's
        clocks are joined by its checkpoint (:meth:`checkpoint`), which follows."""
        if self.inst.schedule is not None:
            self.inst.schedule.host_sync()
        bounded(self.comm, self.sync).barrier(what)

    def _land_own(self) -> None:
        if self.inst.schedule is not None:
            self.inst.schedule.host_access()

    def _record(self, names: Iterable[str], write: bool, where: str) -> None:
        if self.inst.races is not None:
            for name in names:
                self.inst.races.host_access(name, write, where)

    # -- calls, failures, block-end collectives ----------------------------------------------------------

    def run_call(self, iteration: int) -> float:
        """One call of the entry function (after ``Hooks.before_run``); its ``run()`` time in seconds."""
        if self.hooks.before_run is not None:
            self.hooks.before_run(iteration)
        t0 = time.perf_counter()
        self.inst.run()
        return time.perf_counter() - t0

    def fail(self, line: str, kind: str, iteration: int) -> None:
        """Record ``line`` in the log (the first one of each kind is kept; the very first is reported)."""
        record_failure(self.log, self.hooks.report, line, kind, iteration)

    def checkpoint(self) -> tuple[list[Any], list[Any]]:
        """Collective checkpoint of the invariant checker and the race detector (when the instance has
        them): (every violation, every race report), the same on every rank; failures go to the log."""
        return checkpoint_checkers(self.comm, self.inst, self.sync, self.log, self.hooks.report)

    def sum_ints(self, values: list[int]) -> list[int]:
        """Bounded element-wise sum over ranks."""
        totals = bounded(self.comm, self.sync).allreduce(np.array(values, dtype=np.int64), MPI.SUM, "the block-end sum")
        return [int(v) for v in totals]

    def max_float(self, value: float) -> float:
        """Bounded maximum over ranks."""
        return float(bounded(self.comm, self.sync).allreduce([float(value)], MPI.MAX, "the block-end max")[0])


@dataclass(frozen=True)
class BlockFigures:
    """What the loop knows at a block end, reduced over ranks: calls done (cumulative) and in the
    block, the slowest rank's ``run()`` time per call, the harness's counts summed over ranks, and the
    checkpoint's violations and race reports."""

    iters: int
    count: int
    time_us: float
    totals: list[int]
    violations: list[Any]
    races: list[Any]


class Row(Protocol):
    """A progress row: whether the block was clean, and how it prints."""

    @property
    def ok(self) -> bool:
        """True when nothing was wrong in the block."""
        ...

    def format(self) -> str:
        """The row as printed under the harness's header."""
        ...


RowT = TypeVar("RowT", bound=Row)
RowT_co = TypeVar("RowT_co", bound=Row, covariant=True)


class BlockHarness(Protocol[RowT_co]):
    """What differs between harnesses: one call (around :meth:`RunContext.run_call`), the at-rest
    checks of a block end (this rank's counts, summed over ranks by the loop) and the row."""

    def call(self, ctx: RunContext, iteration: int) -> float:
        """Run call ``iteration`` with its per-call checks; return its ``run()`` time."""
        ...

    def block_end(self, ctx: RunContext, last: int) -> list[int]:
        """This rank's counts at the end of the block whose last call was ``last``."""
        ...

    def row(self, figures: BlockFigures) -> RowT_co:
        """The block's progress row."""
        ...


@dataclass
class BlockRun(Generic[RowT]):
    """What :func:`run_blocks` returns: the rows, this rank's total ``run()`` time, and whether
    ``Hooks.stop_after`` ended the run early."""

    rows: list[RowT] = field(default_factory=list)
    seconds: float = 0.0
    stopped: bool = False
    notes: list[str] = field(default_factory=list)
    """The race detector's notes on the run's fences and cacheinvalids (fenced mode), printed after the rows."""


def run_blocks(ctx: RunContext, iters: int, block: int, harness: BlockHarness[RowT]) -> BlockRun[RowT]:
    """Run ``iters`` calls in blocks of ``block`` and check every block end (see the module docstring).
    Collective: every rank of ``ctx.comm`` runs it with the same arguments."""
    try:
        return _run_blocks(ctx, iters, block, harness)
    except DeadlockError as err:
        # What earlier checkpoints found (a race, an invariant) is the likely cause of the hang.
        raise err.with_causes(logged_causes(ctx.log)) from None


def logged_causes(log: FailureLog) -> tuple[Cause, ...]:
    """The first failure of each root-cause kind in ``log``, as deadlock causes."""
    found = (log.kinds.get(kind) for kind in ROOT_CAUSE_ORDER)
    return tuple(Cause(f.kind, f.iteration, f.text.removeprefix("# ")) for f in found if f is not None)


def _run_blocks(ctx: RunContext, iters: int, block: int, harness: BlockHarness[RowT]) -> BlockRun[RowT]:
    out: BlockRun[RowT] = BlockRun()
    it = 0
    while it < iters:
        count = min(block, iters - it)
        run_time = 0.0
        for _ in range(count):
            run_time += harness.call(ctx, it)
            it += 1
        out.seconds += run_time
        # Block end: nobody starts the next call before everybody has finished this block, so no
        # next-call credit can have arrived and every signal cell must be exactly 0.
        ctx.block_barrier(f"the block-end barrier after iteration {it - 1}")
        mine = harness.block_end(ctx, it - 1)
        violations, race_reports = ctx.checkpoint()
        totals = ctx.sum_ints(mine)
        slowest = ctx.max_float(run_time)
        row = harness.row(BlockFigures(it, count, slowest / count * 1e6, totals, violations, race_reports))
        out.rows.append(row)
        ctx.emit(row.format())
        if ctx.hooks.stop_after is not None and ctx.hooks.stop_after(row) and it < iters:
            out.stopped = True
            break
    out.notes = ctx.notes()
    for note in out.notes:
        ctx.emit(f"# {note}")
    return out


__all__ = ["DEFAULT_HOOKS", "QUIET", "ROWS_TARGET", "BlockFigures", "BlockHarness", "BlockRun", "Hooks",
           "Row", "RunContext", "block_size", "default_block", "run_blocks", "silent", "stop_at_failure"]
