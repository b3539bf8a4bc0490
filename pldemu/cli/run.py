"""``pldemu run PROGRAM -n N``: read (``.pld`` or a Python builder file), lower, verify and execute a program on N MPI ranks.

Outside an MPI job the command checks its input, then launches itself under
``mpiexec -n N python -m mpi4py -m pldemu run ...``; inside the job every rank parses and lowers the
program again (no MPI traffic before it is known to be good), instantiates it, runs the entry function
once, and rank 0 prints a report: ranks, back end, wall time, ops executed by kind, and per buffer a
checksum of every rank's final contents. ``--dump DIR`` also writes every rank's buffers as ``.npy``
plus the executed (lowered) program, whose line numbers the error locations refer to.
``--races`` runs the happens-before race detector (``pldemu.runtime.races``) and lists its reports;
``--trace FILE.json`` writes a Chrome/Perfetto trace (``pldemu trace-plot FILE.json -o FILE.png``).

``--iters K`` (K > 1) runs the entry function K times back to back on the same windows
(:func:`pldemu.runtime.repeat.run_program_iterations`) and checks at every block end (``--block B``
calls; default about 8 blocks): all ranks meet at a barrier, every SIGNAL cell on every rank must be 0
(the self-clearing credit protocol; ``--no-cell-check`` skips this for a program that leaves cells
non-zero on purpose), and the ``--invariants`` checker and the ``--races`` detector get their
checkpoint; rank 0 prints one row per block, then the usual report (ops over all calls, final buffers).

Exit codes: 0 ran (and with ``--iters`` K > 1 every block was clean), 1 signal cells not 0 at rest or
invariant violations (``--iters`` K > 1), 2 bad input (missing file, parse/lowering/verification error,
bad options), 3 the program failed while running (deadlock, refused access, program error), 4 ran but
``--races`` found races, 124 job timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pldemu.cli import common
from pldemu.cli.argtypes import format_number, positive_int
from pldemu.cli.common import EXIT_FAIL, EXIT_OK, EXIT_RACES, EXIT_USAGE, UsageError
from pldemu.cli.outputs import OutputPathError, output_dir
from pldemu.cli.prelaunch import add_force_argument, check_before_launch
from pldemu.cli.run_io import (
    NO_IO,
    JobIO,
    add_io_arguments,
    expectation_summary,
    io_argv,
    job_io,
    write_report,
)
from pldemu.ir import DType, Program
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.buffer_io import BF16_DUMP
from pldemu.runtime.options import RuntimeOptions

DEFAULT_RANKS = 4
DEFAULT_JOB_TIMEOUT = 3600.0
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="the program to run: .pld text, or a Python file that builds it "
                        "(module-level `program` or `build_program()`)")
    common.add_ranks_argument(parser, DEFAULT_RANKS)
    parser.add_argument("--no-lower", action="store_true",
                        help="run the program as written (it must already be lowered)")
    parser.add_argument("--dump", metavar="DIR", default=None,
                        help="write every rank's buffers (DIR/rankR/NAME.npy) and the executed program")
    common.add_job_timeout_argument(parser, DEFAULT_JOB_TIMEOUT)
    add_force_argument(parser)
    it = parser.add_argument_group("repeated calls (--iters K > 1)")
    it.add_argument("--iters", type=positive_int, default=1, metavar="K",
                    help="run the entry function K times back to back on the same windows (default 1); with "
                         f"K > 1 check every block: signal cells 0 at rest, invariants, races (exit {EXIT_FAIL} "
                         "on non-zero cells or invariant violations)")
    it.add_argument("--block", type=positive_int, default=None, metavar="B",
                    help="calls between all-rank checkpoints (default: about 8 blocks)")
    common.add_runtime_arguments(parser, "run", helps={
        "--seed": "seed of every randomised schedule (default %(default)s)",
        "--races": f"detect data races on windows (happens-before); exit {EXIT_RACES} if any",
        "--trace": "write a Chrome/Perfetto trace of every rank's ops (see pldemu trace-plot); a rank whose run "
                   "fails writes its own part to FILE.rankR.json",
    })
    add_io_arguments(parser)


def load_program(path: str, lower: bool = True, nranks: int | None = None, options: RuntimeOptions | None = None,
                 force: bool = False) -> Program:
    """Read (``.pld`` text or a Python builder file, see ``pldemu.ir.source``), lower unless ``lower`` is
    False, and verify ``path``; with ``nranks``, also check it before a job of that many ranks
    (:func:`pldemu.cli.prelaunch.check_before_launch`, the memory estimate unless ``force``). Every
    problem is a UsageError."""
    from pldemu.ir import VerifyError, verify
    from pldemu.ir.source import SourceError, load_source

    try:
        source = program = load_source(path)
        verify(source)  # before lowering: it bounds the nesting every later walk recurses on
    except SourceError as err:
        raise UsageError(str(err)) from None
    except VerifyError as err:
        raise UsageError(f"{path}: {err}") from None
    if lower:
        from pldemu.lowering import lower_composite_ops

        try:
            program = lower_composite_ops(program)
        except ValueError as err:  # LoweringError and the IR's own type errors
            raise UsageError(f"{path}: cannot lower: {err}") from None
    else:
        from pldemu.lowering import composite_calls

        composite = next(iter(composite_calls(program)), None)
        if composite is not None:
            raise UsageError(f"{path}: --no-lower, but the program still calls the composite collective "
                             f"{composite.op.text}: drop --no-lower (or lower it first: pldemu lower --after-only)")
    try:
        verify(program)
    except VerifyError as err:
        raise UsageError(f"{path}: {err}") from None
    if nranks is not None:
        try:
            check_before_launch([(program, source)], nranks, options or RuntimeOptions(), force=force)
        except UsageError as err:
            raise UsageError(f"{path}: {err}") from None
    return program


def _options(args: argparse.Namespace) -> Any:
    if args.iters == 1:
        if args.block is not None:
            raise UsageError("--block applies to repeated calls: give --iters K with K > 1")
        if args.no_cell_check and not args.invariants:
            raise UsageError("--no-cell-check applies to repeated calls (give --iters K with K > 1) or to the "
                             "at-rest check of a single run with --invariants")
    try:
        if args.dump is not None:
            output_dir(args.dump, "--dump")
    except OutputPathError as err:
        raise UsageError(str(err)) from None
    return common.runtime_options(args)


LOCATION_HINT = ("(locations are FUNC:LINE in the executed program as printed, --dump DIR writes it to "
                 "DIR/program.pld; [FILE:LINE] is the line of your file it came from)")


def child_argv(args: argparse.Namespace, n: int) -> list[str]:
    """The ``pldemu run`` arguments every rank of the spawned job gets (explicit, absolute paths)."""
    argv = ["run", str(Path(args.program).resolve()), "-n", str(n), "--job-timeout", format_number(args.job_timeout)]
    if args.no_lower:
        argv.append("--no-lower")
    if args.dump is not None:
        argv += ["--dump", str(Path(args.dump).resolve())]
    if args.iters != 1:
        argv += ["--iters", str(args.iters)]
    if args.block is not None:
        argv += ["--block", str(args.block)]
    return argv + common.runtime_argv(args) + io_argv(args)


@dataclass(frozen=True)
class RunPlan:
    """What ``pldemu run`` asks of the job besides the program and its options: the ``-n`` it was
    launched for, ``--dump DIR``, whether the program was lowered here (for the report), and the
    repeated calls (``--iters``, ``--block``; ``--no-cell-check`` is ``RuntimeOptions.cell_check``)."""

    ranks: int | None = None
    dump: str | None = None
    lowered: bool = True
    iters: int = 1
    block: int | None = None
    io: JobIO = NO_IO
    """``--inputs`` / ``--expect`` / ``--report`` (:mod:`pldemu.cli.run_io`)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace, io: JobIO | None = None) -> RunPlan:
        """The plan the parsed command line describes."""
        return cls(args.ranks, args.dump, not args.no_lower, args.iters, args.block, io if io is not None else NO_IO)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu run``."""
    from pldemu.runtime.buffer_io import BufferFileError
    from pldemu.runtime.launch import in_mpi_job, job_rank, job_size, spawn

    inside = in_mpi_job()
    n = args.ranks or (job_size() if inside else None) or DEFAULT_RANKS
    try:
        options = _options(args)
        # Inside, the peers' own memory is already in use: the launcher judged it.
        program = load_program(args.program, lower=not args.no_lower, nranks=n, options=options,
                               force=args.force or inside)
        io = job_io(args, program, n)
    except (UsageError, BufferFileError, OutputPathError) as err:
        # Inside a job every rank reaches the same verdict before touching MPI; one prints it.
        return common.usage_error("run", str(err)) if not inside or job_rank() in (0, None) else EXIT_USAGE
    if inside:
        return run_in_job(program, options, source=args.program, plan=RunPlan.from_args(args, io))
    return spawn(n, child_argv(args, n), args.job_timeout, placement=common.placement(args))


def run_in_job(program: Program, options: RuntimeOptions, *, source: str = "",
               listeners: Sequence[Callable[[Any], None]] = (), plan: RunPlan | None = None) -> int:
    """Run ``program`` on every rank of COMM_WORLD as ``plan`` says and report (rank 0). Returns the
    exit code; a rank whose run fails prints its error and aborts the whole job (exit 3). ``listeners``
    are attached to the instance besides the op counter (traces, extra checks). With ``plan.iters`` >
    1 the calls run back to back and every ``plan.block`` of them is checked
    (:func:`pldemu.runtime.repeat.run_program_iterations`)."""
    from mpi4py import MPI

    from pldemu.runtime.interpreter import OpCounter

    plan = plan if plan is not None else RunPlan()
    comm = MPI.COMM_WORLD
    inst = _instance(comm, program, options, plan)
    if inst is None:
        return EXIT_USAGE
    counter = OpCounter()
    for fn in (counter, *listeners):
        inst.add_listener(fn)
    _load_inputs(comm, inst, options, plan.io)
    comm.Barrier()
    seconds, repeated = _execute(comm, inst, options, plan)
    violations, races = _verdicts(comm, inst, options, repeated)
    checked, mismatches = plan.io.expected(comm.Get_rank(), inst.local)
    wrong = comm.allreduce(len(mismatches))
    failed = wrong or violations or (repeated is not None and (repeated.cells_nonzero or repeated.invariant_violations))
    code = EXIT_FAIL if failed else EXIT_RACES if races else EXIT_OK
    _gather_report(comm, inst, program, source, options, plan,
                   _Ran(seconds, counter.counts, repeated, violations, races, checked, mismatches, code))
    inst.close()  # collective; rank 0 writes the trace
    if comm.Get_rank() == 0 and options.trace:
        print(f"  trace: {options.trace} (draw it: pldemu trace-plot {options.trace} -o FILE.png)", flush=True)
    # Every rank got the same verdict: end MPI cleanly so that a non-zero exit is not an abort.
    if code != EXIT_OK:
        MPI.Finalize()
    return code


def _host(comm: Any, inst: Any, options: RuntimeOptions) -> Any:
    """A run context over ``inst`` for host-side writes (its hooks order them for the checkers)."""
    from pldemu.runtime.context import RunContext
    from pldemu.runtime.repeat import RepeatLog

    return RunContext(comm, inst, options, RepeatLog())


def _load_inputs(comm: Any, inst: Any, options: RuntimeOptions, io: JobIO) -> None:
    """``--inputs``: this rank writes its arrays into its buffers, then every rank fences, so no peer
    reads them before they are there (and the race detector knows it)."""
    if io.inputs is not None:
        ctx = _host(comm, inst, options)
        ctx.write_own(io.inputs.load(comm.Get_rank()), "--inputs")
        ctx.fence("the barrier after loading --inputs")


def _reloader(comm: Any, inst: Any, options: RuntimeOptions, io: JobIO) -> Callable[[int], None] | None:
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


def _instance(comm: Any, program: Program, options: RuntimeOptions, plan: RunPlan) -> Any:
    """The program instance, or None after a usage error (raised identically on every rank before
    any window exists: ends MPI cleanly, which also removes MPI's shared-memory segments that an
    abort would leave behind)."""
    from mpi4py import MPI

    from pldemu.runtime.errors import AllocationError, ProgramError
    from pldemu.runtime.interpreter import ProgramInstance

    try:
        common.check_job_size(plan.ranks, comm.Get_size())
        return ProgramInstance(program, comm, options)
    except AllocationError as err:
        _failure_file(plan.io, comm.Get_rank(), str(err))
        common.abort_with(comm, f"pldemu run: rank {comm.Get_rank()}: {err}")
    except (UsageError, ProgramError) as err:
        if comm.Get_rank() == 0:
            common.usage_error("run", str(err))
        MPI.Finalize()
        return None


def _execute(comm: Any, inst: Any, options: RuntimeOptions, plan: RunPlan) -> tuple[float, Any]:
    """Run the calls; (this rank's run() seconds, the ``RepeatResult`` of ``--iters`` K > 1 or None).
    A failing rank prints what happened and aborts the job."""
    from pldemu.runtime.context import Hooks
    from pldemu.runtime.errors import DeadlockError, ProgramError
    from pldemu.runtime.harness import CheckError
    from pldemu.runtime.repeat import run_program_iterations
    from pldemu.windows import WindowError

    me = comm.Get_rank()
    try:
        if plan.iters == 1:
            return inst.run().seconds, None
        hooks = Hooks(before_run=_reloader(comm, inst, options, plan.io))
        repeated = run_program_iterations(comm, inst, plan.iters, options, plan.block, hooks=hooks,
                                          cell_check=options.cell_check)
        return repeated.seconds, repeated
    except DeadlockError as err:
        _failure_file(plan.io, me, str(err))
        common.abort_on_deadlock(comm, f"pldemu run: rank {me}: ", err, LOCATION_HINT)
    except (ProgramError, WindowError, CheckError) as err:
        # CheckError: a block-end synchronisation timed out (a peer is stuck or gone).
        _failure_file(plan.io, me, f"{type(err).__name__}: {err}")
        common.abort_with(comm, f"pldemu run: rank {me}: {type(err).__name__}: {err}\n{LOCATION_HINT}")
    except Exception as err:  # not the program's fault: say so, with the traceback, and end the job
        trace = "".join(traceback.format_exception(err)).rstrip()
        common.abort_with(comm, f"pldemu run: rank {me}: internal error: {type(err).__name__}: {err}\n{trace}")


def _verdicts(comm: Any, inst: Any, options: RuntimeOptions, repeated: Any) -> tuple[list[Any], list[Any]]:
    """(invariant violations, race reports) of a single call (collective checkpoints); with
    ``--iters`` K > 1 every block end was checked already."""
    if repeated is not None:
        return [], list(repeated.race_reports)
    from pldemu.runtime.harness import signal_cells
    from pldemu.runtime.repeat import signal_buffers

    races = inst.races.check() if inst.races is not None else []  # collective
    violations = []
    if inst.invariants is not None:  # collective
        if options.cell_check:
            # Every rank has retired its call once all have met here: no credit may be left.
            _host(comm, inst, options).block_barrier("the barrier before the at-rest check")
            names = signal_buffers(inst.program)
            inst.invariants.at_rest({name: signal_cells(inst, name) for name in names}, "the end of the run")
        violations = inst.invariants.checkpoint(comm, max(60.0, 4.0 * float(options.timeout)))
    return violations, races


@dataclass(frozen=True)
class _Ran:
    """What this rank's run produced: run() seconds, ops by kind, the ``--iters`` result (or None),
    and the verdicts of the checkers (the same on every rank)."""

    seconds: float
    counts: Any
    repeated: Any
    violations: list[Any]
    races: list[Any]
    checked: int = 0
    """Buffers compared with ``--expect`` on this rank."""
    mismatches: list[Any] = dataclasses.field(default_factory=list)
    """This rank's ``--expect`` mismatches."""
    code: int = EXIT_OK
    """The run's exit code (the same on every rank)."""


def _gather_report(comm: Any, inst: Any, program: Program, source: str, options: RuntimeOptions, plan: RunPlan,
                   ran: _Ran) -> None:
    """Gather every rank's figures and buffer checksums (``--dump``: write them) and print the report."""
    me = comm.Get_rank()
    summaries = {name: _summary(inst.local(name)) for name in inst.buffer_names()}
    mine = (ran.seconds, {op.text: n for op, n in ran.counts.items()}, summaries, ran.checked, ran.mismatches)
    if plan.dump is not None:
        _dump(Path(plan.dump), me, inst, program)
    gathered = comm.gather(mine, root=0)
    if me != 0:
        return
    assert gathered is not None
    print(_report(program, source, plan.lowered, inst.backend, options, gathered, plan.iters), flush=True)
    if ran.repeated is not None:
        print(repeat_summary(ran.repeated), flush=True)
    elif options.invariants:
        print(invariant_summary(ran.violations, options.cell_check), flush=True)
    if options.race_detect:
        from pldemu.runtime.repeat import signal_buffers

        print(race_summary(ran.races, ran.repeated.races if ran.repeated is not None else None,
                           bool(signal_buffers(program))), flush=True)
    if plan.io.checks:
        found = [m for g in gathered for m in g[4]]
        print(expectation_summary(plan.io, sum(g[3] for g in gathered), found), flush=True)
    if plan.io.report is not None:
        write_report(plan.io.report, _json_report(program, inst.backend, gathered, ran))


def _json_report(program: Program, backend: str, gathered: list[Any], ran: _Ran) -> dict[str, Any]:
    """``--report``'s content: what the Python API's ``RunResult`` is made of."""
    ops: Counter[str] = Counter()
    for g in gathered:
        ops.update(g[1])
    violations = ran.violations if ran.repeated is None else list(ran.repeated.violations)
    return {
        "program": program.name, "ranks": len(gathered), "backend": backend, "exit_code": ran.code,
        "seconds": [g[0] for g in gathered], "ops": dict(ops),
        "races": [r.describe() for r in ran.races], "invariants": [v.describe() for v in violations],
        "mismatches": [m.describe() for g in gathered for m in g[4]],
    }


def race_summary(reports: Sequence[Any], total: int | None = None, signals: bool = True) -> str:
    """The race detector's verdict as printed under the report (every report kept, one per line;
    ``total``: how many there were, when only the first ones were kept; ``signals``: whether the
    program has a signal buffer, i.e. whether a notify -> wait can have ordered anything)."""
    if not reports and not signals:
        return ("  races: none (no two conflicting window accesses by different ranks were unordered; the program "
                "has no signals, so no notify -> wait ordered any)")
    if not reports:
        return "  races: none (every pair of conflicting window accesses was ordered by a notify -> wait)"
    total = len(reports) if total is None else total
    lines = [f"  races: {total} report(s)" + (f", the first {len(reports)}:" if total > len(reports) else "")]
    lines += [f"    {r.describe()}" for r in reports]
    return "\n".join(lines)


def invariant_summary(violations: Sequence[Any], cell_check: bool = True) -> str:
    """The invariant checker's verdict on one run (``--invariants`` without ``--iters``)."""
    if not violations:
        rest = ", every signal cell 0 at rest" if cell_check else "; signal cells at rest not checked: --no-cell-check"
        return f"  invariants: none broken (no negative cell, no cell written by both Set and AtomicAdd{rest})"
    return "\n".join([f"  invariants: {len(violations)} violation(s)", *(f"    {v.describe()}" for v in violations)])


def repeat_summary(result: Any) -> str:
    """The block checks' verdict of ``--iters`` K > 1, printed under the report."""
    if not result.cell_check:
        cells = "  signal cells at rest: not checked (--no-cell-check)"
    elif result.cells_nonzero:
        cells = (f"  signal cells at rest: {result.cells_nonzero} non-zero over {len(result.rows)} block ends "
                 "(each rank printed its first; --no-cell-check if the program leaves cells non-zero on purpose)")
    else:
        cells = f"  signal cells at rest: all 0 at every one of {len(result.rows)} block ends"
    lines = [cells]
    if result.violations:
        n = result.invariant_violations
        lines.append(f"  invariants: {n} violation(s)"
                     + (f", the first {len(result.violations)}:" if n > len(result.violations) else ""))
        lines += [f"    {v.describe()}" for v in result.violations]
    return "\n".join(lines)


def _summary(a: np.ndarray) -> str:
    crc = zlib.crc32(np.ascontiguousarray(a).tobytes())
    if a.size == 0:
        return f"empty crc32={crc:08x}"
    if is_float_dtype(a.dtype):
        nan = int(np.isnan(a).sum())
        finite = a[~np.isnan(a)]
        if finite.size == 0:
            return f"all {a.size} NaN (poison: never written?) crc32={crc:08x}"
        total = float(finite.astype(np.float64).sum())
        return (f"sum={total:.6g} min={float(finite.min()):.6g} max={float(finite.max()):.6g} "
                f"nan={nan} crc32={crc:08x}")
    values = a.astype(np.int64)
    return f"sum={int(values.sum())} min={int(values.min())} max={int(values.max())} crc32={crc:08x}"


def _dump(root: Path, me: int, inst: Any, program: Program) -> None:
    from pldemu.ir import format_program

    folder = root / f"rank{me}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in inst.buffer_names():
        a = np.array(inst.local(name), copy=True)
        if a.dtype == DType.BF16.np:  # .npy has no bfloat16: store the bit patterns, named so
            np.save(folder / f"{name}{BF16_DUMP}.npy", a.view(np.uint16))
        else:
            np.save(folder / f"{name}.npy", a)
    if me == 0:
        (root / "program.pld").write_text(format_program(program))


def _report(program: Program, source: str, lowered: bool, backend: str, options: RuntimeOptions,
            gathered: list[Any], iters: int = 1) -> str:
    n = len(gathered)
    seconds = [g[0] for g in gathered]
    calls = "" if iters == 1 else f" over {iters} calls"
    ops: Counter[str] = Counter()
    for g in gathered:
        ops.update(g[1])
    lines = [
        f"pldemu run: program {program.name} ({source}{', lowered' if lowered else ''})",
        f"  ranks {n}, windows {backend}, wait timeout {options.timeout:g}s, seed {options.seed}",
        f"  wall time {max(seconds) * 1e3:.2f} ms{calls} (slowest rank; fastest {min(seconds) * 1e3:.2f} ms)",
        "  ops executed (all ranks): " + (", ".join(f"{op} {k}" for op, k in sorted(ops.items())) or "none"),
        "  buffers (final contents per rank):",
    ]
    for decl in program.buffers:
        name = decl.var.name
        lines.append(f"    {decl.kind.value} {name}")
        for r, g in enumerate(gathered):
            lines.append(f"      rank {r}: {g[2][name]}")
    return "\n".join(lines)


__all__ = ["RunPlan", "add_arguments", "child_argv", "load_program", "race_summary", "repeat_summary", "run",
           "run_in_job"]
