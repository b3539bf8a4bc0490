"""The single run of a program on every rank of a job: one home for ``pldemu run`` and ``pldemu.launch``.

:func:`run_once` instantiates the program on this rank, loads ``--inputs``, runs the entry function
once (or ``plan.iters`` times back to back, every ``plan.block`` calls checked:
:func:`pldemu.harness.repeat.run_program_iterations`), takes the checkers' verdicts (invariants,
races, ``--expect``), gathers every rank's figures on rank 0, writes ``--dump``, closes the instance
(rank 0 writes the trace) and returns a :class:`Ran`. The printed and JSON forms of a ``Ran`` are
:mod:`pldemu.harness.report`. A rank whose run fails prints its error and aborts the whole job (exit 3).

Importing this module does not initialise MPI (its MPI users are imported on first call): the
launching half of ``pldemu run`` imports it too.
"""

from __future__ import annotations

import contextlib
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pldemu.harness import injob
from pldemu.ir import BufferKind, Program
from pldemu.job.buffer_io import Mismatch
from pldemu.job.exits import EXIT_FAIL, EXIT_OK, EXIT_RACES, UsageError
from pldemu.job.launch import startup_mark
from pldemu.job.run_io import NO_IO, JobIO
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.harness.blocks import RunContext
    from pldemu.harness.repeat import RepeatResult
    from pldemu.runtime.instrument.invariants import Violation
    from pldemu.runtime.instrument.races import RaceReport
    from pldemu.runtime.instrument.written import WriteTracker
    from pldemu.runtime.interpreter import ProgramInstance
    from pldemu.runtime.sites import OpEvent
    from pldemu.runtime.truncation import Truncation


@dataclass(frozen=True)
class RunPlan:
    """What a single run asks of the job besides the program and its options: the ``-n`` it was
    launched for, ``--dump DIR``, whether the program was lowered (for the report), and the
    repeated calls (``--iters``, ``--block``; ``--no-cell-check`` is ``RuntimeOptions.cell_check``)."""

    ranks: int | None = None
    dump: str | None = None
    lowered: bool = True
    iters: int = 1
    block: int | None = None
    io: JobIO = NO_IO
    """``--inputs`` / ``--expect`` / ``--report`` (:mod:`pldemu.job.run_io`)."""


@dataclass(frozen=True)
class RankFigures:
    """One rank's part of the report, gathered on rank 0: run() seconds, ops by name, a checksum line
    per buffer, the buffers compared with ``--expect`` and this rank's mismatches."""

    seconds: float
    ops: dict[str, int]
    buffers: dict[str, str]
    checked: int
    mismatches: list[Mismatch]


@dataclass(frozen=True)
class Ran:
    """What a single run produced: this rank's run() seconds, the ``--iters`` result (or None), the
    checkers' verdicts (the same on every rank), the exit code, the window back end, and on rank 0
    every rank's :class:`RankFigures` (empty elsewhere)."""

    seconds: float
    repeated: RepeatResult | None
    violations: list[Violation]
    races: list[RaceReport]
    code: int
    backend: str
    gathered: tuple[RankFigures, ...] = ()
    checked: int = 0
    """Buffers compared with ``--expect`` on this rank."""
    mismatches: list[Mismatch] = field(default_factory=list)
    """This rank's ``--expect`` mismatches."""
    notes: list[str] = field(default_factory=list)
    """The race detector's notes on fences and cacheinvalids (``--visibility fenced``), not failures."""
    truncations: tuple[Truncation, ...] = ()
    """Every rank's truncating ``tdiv`` / ``trem`` whose value differed from floor semantics, once per site
    (the same on every rank; ``pldemu.runtime.truncation``): exit 1 unless ``--truncation-warn``."""

    def ops(self) -> Counter[str]:
        """Ops executed over every rank (rank 0)."""
        total: Counter[str] = Counter()
        for g in self.gathered:
            total.update(g.ops)
        return total


def buffer_summary(a: np.ndarray, unwritten: int = 0) -> str:
    """One buffer's final contents on one rank as one line: sum, min, max (NaNs counted) and a crc32;
    ``unwritten``: how many of its elements no rank wrote (tracked as the run went,
    :mod:`pldemu.runtime.instrument.written`: a written NaN is data, not poison)."""
    crc = zlib.crc32(np.ascontiguousarray(a).tobytes())
    if a.size == 0:
        return f"empty crc32={crc:08x}"
    if unwritten >= a.size:
        return f"never written (all {a.size} elements hold the initial fill) crc32={crc:08x}"
    rest = f" unwritten={unwritten}" if unwritten else ""
    if is_float_dtype(a.dtype):
        nan = int(np.isnan(a).sum())
        finite = a[~np.isnan(a)]
        if finite.size == 0:
            return f"all {a.size} NaN{rest} crc32={crc:08x}"
        total = float(finite.astype(np.float64).sum())
        return (f"sum={total:.6g} min={float(finite.min()):.6g} max={float(finite.max()):.6g} "
                f"nan={nan}{rest} crc32={crc:08x}")
    values = a.astype(np.int64)
    return f"sum={int(values.sum())} min={int(values.min())} max={int(values.max())}{rest} crc32={crc:08x}"


def run_once(comm: MPI.Intracomm, program: Program, options: RuntimeOptions, plan: RunPlan,
             listeners: Sequence[Callable[[OpEvent], None]] = ()) -> Ran | None:
    """Run ``program`` on every rank of ``comm`` as ``plan`` says (collective) and return the
    :class:`Ran`; None after a usage error every rank reached (rank 0 printed it, MPI is finalized).
    ``listeners`` are attached to the instance besides the op counter (traces, extra checks)."""
    from pldemu.runtime.instrument.written import WriteTracker
    from pldemu.runtime.interpreter import OpCounter

    inst = _instance(comm, program, options, plan)
    if inst is None:
        return None
    startup_mark("windows")
    counter = OpCounter()
    inst.add_listener(counter)
    for fn in listeners:
        inst.add_listener(fn)
    written = WriteTracker(comm.Get_rank(), comm.Get_size())
    inst.add_monitor(written)
    _load_inputs(comm, inst, options, plan.io, written)
    comm.Barrier()
    seconds, repeated = _execute(comm, inst, options, plan)
    startup_mark("ran")
    violations, races = _verdicts(comm, inst, options, repeated)
    notes = inst.races.notes() if inst.races is not None else []  # collective
    truncations = _truncations(comm, inst)  # collective
    checked, mismatches = plan.io.expected(comm.Get_rank(), inst.local)
    wrong = comm.allreduce(len(mismatches))
    failed = (wrong or violations or (repeated is not None and (repeated.cells_nonzero or repeated.invariant_violations))
              or (truncations and not options.truncation_warn))
    code = EXIT_FAIL if failed else EXIT_RACES if races else EXIT_OK
    unwritten = _unwritten(comm, inst, written)
    signals = {d.var.name for d in program.buffers if d.kind is BufferKind.SIGNAL}
    summaries = {name: buffer_summary(inst.local(name), 0 if name in signals else unwritten.get(name, 0))
                 for name in inst.buffer_names()}
    mine = RankFigures(seconds, {op.text: n for op, n in counter.counts.items()}, summaries, checked, mismatches)
    if plan.dump is not None:
        _dump(Path(plan.dump), comm.Get_rank(), inst, program)
    gathered = comm.gather(mine, root=0)
    ran = Ran(seconds, repeated, violations, races, code, str(inst.backend), tuple(gathered or ()), checked,
              mismatches, notes, truncations)
    startup_mark("reported")
    inst.close()  # collective; rank 0 writes the trace
    startup_mark("closed")
    return ran


HEAD = "pldemu run: "
"""How every message of a rank of ``pldemu run`` starts (then ``rank R: ``)."""

_FOUND = "truncating division: "
"""How a truncation finding is named where it precedes a failure it may have caused."""

LOCATION_HINT = ("(locations are FUNC:LINE in the executed program as printed, --dump DIR writes it to "
                 "DIR/program.pld; [FILE:LINE] is the line of your file it came from)")


def _host(comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions) -> RunContext:
    """A run context over ``inst`` for host-side writes (its hooks order them for the checkers)."""
    from pldemu.harness.blocks import RunContext
    from pldemu.harness.repeat import RepeatLog

    return RunContext(comm, inst, options, RepeatLog())


def _load_inputs(comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions, io: JobIO,
                 written: WriteTracker) -> None:
    """``--inputs``: this rank writes its arrays into its buffers, then every rank fences, so no peer
    reads them before they are there (and the race detector knows it); ``written`` records them."""
    if io.inputs is not None:
        ctx = _host(comm, inst, options)
        arrays = io.inputs.load(comm.Get_rank())
        ctx.write_own(arrays, "--inputs")
        for name in arrays:
            written.host_write(name, inst.local(name).size)
        ctx.fence("the barrier after loading --inputs")


def _truncations(comm: MPI.Intracomm, inst: ProgramInstance) -> tuple[Truncation, ...]:
    """Every rank's truncation findings, once per site (collective: the same on every rank)."""
    from pldemu.runtime.truncation import merge

    return merge(t for part in comm.allgather(inst.truncations) for t in part)


def _unwritten(comm: MPI.Intracomm, inst: ProgramInstance, written: WriteTracker) -> dict[str, int]:
    """Elements of each of this rank's buffers that no rank wrote (collective: puts write peers')."""
    from pldemu.runtime.instrument.written import unwritten_elements

    parts = comm.alltoall(written.by_target())
    return unwritten_elements(parts, {name: inst.local(name).size for name in inst.buffer_names()})


def _reloader(comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions, io: JobIO) -> Callable[[int], None] | None:
    """``--reload-inputs``: before every call after the first, fence (no peer may still use this rank's
    windows from the previous call), load the inputs again, fence."""
    if not io.reload or io.inputs is None:
        return None
    ctx, arrays = _host(comm, inst, options), io.inputs.load(comm.Get_rank())

    def reload(iteration: int) -> None:
        if iteration > 0:
            ctx.fence("the barrier before reloading --inputs")
            ctx.write_own(arrays, "--reload-inputs")
            ctx.fence("the barrier after reloading --inputs")

    return reload


def _failure_file(io: JobIO, me: int, text: str) -> None:
    """With ``--report``: this rank's failure message for the API (best effort: the job is ending)."""
    path = io.failure_file(me)
    if path is not None:
        with contextlib.suppress(OSError):
            path.write_text(text + "\n")


def _instance(comm: MPI.Intracomm, program: Program, options: RuntimeOptions,
              plan: RunPlan) -> ProgramInstance | None:
    """The program instance, or None after a usage error (raised identically on every rank before
    any window exists: ends MPI cleanly, which also removes MPI's shared-memory segments that an
    abort would leave behind)."""
    from pldemu.runtime.errors import AllocationError, ProgramError
    from pldemu.runtime.interpreter import ProgramInstance

    try:
        injob.check_job_size(plan.ranks, comm.Get_size())
        return ProgramInstance(program, comm, options)
    except AllocationError as err:
        _failure_file(plan.io, comm.Get_rank(), str(err))
        injob.abort_with(comm, str(err), head=HEAD)
    except (UsageError, ProgramError) as err:
        injob.refuse(comm, "run", err)  # also ends MPI
        return None


def _execute(comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions,
             plan: RunPlan) -> tuple[float, RepeatResult | None]:
    """Run the calls; (this rank's run() seconds, the ``RepeatResult`` of ``--iters`` K > 1 or None).
    A failing rank prints what happened and aborts the job."""
    from pldemu.harness.common import CheckError
    from pldemu.runtime.errors import Cause, DeadlockError, ProgramError
    from pldemu.windows import WindowError

    me = comm.Get_rank()
    try:
        if plan.iters == 1:  # a single call needs none of the repeat harness (its imports are start-up time)
            return inst.run().seconds, None
        from pldemu.harness.blocks import Hooks
        from pldemu.harness.repeat import run_program_iterations

        hooks = Hooks(before_run=_reloader(comm, inst, options, plan.io))
        repeated = run_program_iterations(comm, inst, plan.iters, options, plan.block, hooks=hooks,
                                          cell_check=options.cell_check)
        return repeated.seconds, repeated
    except DeadlockError as err:
        err = err.with_causes(tuple(Cause("truncation", t.call - 1, _FOUND + t.describe()) for t in inst.truncations))
        _failure_file(plan.io, me, str(err))
        injob.abort_on_deadlock(comm, HEAD, err, LOCATION_HINT)
    except (ProgramError, WindowError, CheckError) as err:
        # CheckError: a block-end synchronisation timed out (a peer is stuck or gone). A truncated `%`
        # this rank computed (a peer or offset of -1) is the likely cause: it comes first.
        first = tuple(_FOUND + t.describe() for t in inst.truncations)
        _failure_file(plan.io, me, injob.error_text(err, first))
        injob.abort_on_error(comm, HEAD, err, LOCATION_HINT, first=first)
    except Exception as err:  # not the program's fault: say so, with the traceback, and end the job
        trace = "".join(traceback.format_exception(err)).rstrip()
        injob.abort_with(comm, f"internal error: {type(err).__name__}: {err}\n{trace}", head=HEAD,
                         key=f"internal error: {type(err).__name__}: {err}")


def _verdicts(comm: MPI.Intracomm, inst: ProgramInstance, options: RuntimeOptions,
              repeated: RepeatResult | None) -> tuple[list[Violation], list[RaceReport]]:
    """(invariant violations, race reports) of a single call (collective checkpoints); with
    ``--iters`` K > 1 every block end was checked already."""
    if repeated is not None:
        return [], list(repeated.race_reports)
    races = inst.races.check() if inst.races is not None else []  # collective
    violations = []
    if inst.invariants is not None:  # collective
        if options.cell_check:
            from pldemu.harness.common import signal_cells
            from pldemu.harness.repeat import signal_buffers

            # Every rank has retired its call once all have met here: no credit may be left.
            _host(comm, inst, options).block_barrier("the barrier before the at-rest check")
            names = signal_buffers(inst.program)
            inst.invariants.at_rest({name: signal_cells(inst, name) for name in names}, "the end of the run")
        violations = inst.invariants.checkpoint(comm, max(60.0, 4.0 * float(options.timeout)))
    return violations, races


def _dump(root: Path, me: int, inst: ProgramInstance, program: Program) -> None:
    from pldemu.ir import format_program

    folder = root / f"rank{me}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in inst.buffer_names():
        # As np.save writes it: an ml_dtypes buffer (bf16, fp8) gets a void |V2 / |V1 descriptor, which
        # --inputs / --expect read back as the declared dtype (buffer_io.as_declared).
        np.save(folder / f"{name}.npy", np.array(inst.local(name), copy=True))
    if me == 0:
        (root / "program.pld").write_text(format_program(program))


__all__ = ["HEAD", "LOCATION_HINT", "Ran", "RankFigures", "RunPlan", "run_once"]
