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
import sys
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pldemu.cli.argtypes import nonneg_int, positive_float, positive_int
from pldemu.cli.schedule_args import add_schedule_arguments, schedule_argv, schedule_options
from pldemu.ir import DType, Program
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.launch import abort_job

EXIT_OK = 0
EXIT_CHECK = 1
"""``--iters`` K > 1: a signal cell was not 0 at rest, or an invariant broke."""
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_RACES = 4
DEFAULT_RANKS = 4
DEFAULT_JOB_TIMEOUT = 3600.0
ABORT_GRACE = 0.5
"""Seconds between a failing rank's message and its MPI_Abort (see ``_abort``)."""
NONPRIMARY_GRACE = 2.0
"""Seconds a rank that timed out after a lower rank did waits before aborting, so the lower rank's
wait-for report gets printed before the abort tears the job down."""


class InputError(Exception):
    """The program file or an option is unusable (reported without a traceback, exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="the program to run: .pld text, or a Python file that builds it "
                        "(module-level `program` or `build_program()`)")
    parser.add_argument("-n", "--ranks", type=positive_int, default=None, metavar="N",
                        help=f"number of MPI ranks (default {DEFAULT_RANKS}; inside an MPI job: the job's size)")
    parser.add_argument("--windows", choices=["auto", "shared", "rma"], default="auto",
                        help="RMA window back end (default auto: shared memory when all ranks share a node)")
    parser.add_argument("--timeout", type=positive_float, default=30.0, metavar="S",
                        help="seconds one wait may block before the deadlock report (default 30)")
    parser.add_argument("--seed", type=nonneg_int, default=0, help="seed recorded for randomised runtime knobs")
    parser.add_argument("--no-lower", action="store_true",
                        help="run the program as written (it must already be lowered)")
    parser.add_argument("--dump", metavar="DIR", default=None,
                        help="write every rank's buffers (DIR/rankR/NAME.npy) and the executed program")
    parser.add_argument("--job-timeout", type=positive_float, default=DEFAULT_JOB_TIMEOUT, metavar="S",
                        help=f"seconds the whole mpiexec job may take (default {DEFAULT_JOB_TIMEOUT:g})")
    parser.add_argument("--races", action="store_true",
                        help=f"detect data races on windows (happens-before); exit {EXIT_RACES} if any")
    parser.add_argument("--trace", metavar="FILE.json", default=None,
                        help="write a Chrome/Perfetto trace of every rank's ops (see pldemu trace-plot); a rank "
                             "whose run fails writes its own part to FILE.rankR.json")
    parser.add_argument("--stage-pieces", action="store_true",
                        help="move every put/get one stage-sized piece at a time (a peer can see a partly "
                             "landed transfer, as on the hardware)")
    it = parser.add_argument_group("repeated calls (--iters K > 1)")
    it.add_argument("--iters", type=positive_int, default=1, metavar="K",
                    help="run the entry function K times back to back on the same windows (default 1); with "
                         f"K > 1 check every block: signal cells 0 at rest, invariants, races (exit {EXIT_CHECK} "
                         "on non-zero cells or invariant violations)")
    it.add_argument("--block", type=positive_int, default=None, metavar="B",
                    help="calls between all-rank checkpoints (default: about 8 blocks)")
    it.add_argument("--no-cell-check", action="store_true",
                    help="do not require every signal cell to be 0 at each block end (a program that leaves "
                         "cells non-zero on purpose)")
    add_schedule_arguments(parser)


def load_program(path: str, lower: bool = True) -> Program:
    """Read (``.pld`` text or a Python builder file, see ``pldemu.ir.source``), lower unless ``lower`` is
    False, and verify ``path``; every problem is an InputError."""
    from pldemu.ir import VerifyError, verify
    from pldemu.ir.source import SourceError, load_source

    try:
        program = load_source(path)
    except SourceError as err:
        raise InputError(str(err)) from None
    if lower:
        from pldemu.lowering import lower_composite_ops

        try:
            program = lower_composite_ops(program)
        except ValueError as err:  # LoweringError and the IR's own type errors
            raise InputError(f"{path}: cannot lower: {err}") from None
    else:
        from pldemu.lowering import composite_calls

        composite = next(iter(composite_calls(program)), None)
        if composite is not None:
            raise InputError(f"{path}: --no-lower, but the program still calls the composite collective "
                             f"{composite.op.text}: drop --no-lower (or lower it first: pldemu lower --after-only)")
    try:
        verify(program)
    except VerifyError as err:
        raise InputError(f"{path}: {err}") from None
    return program


def _options(args: argparse.Namespace) -> Any:
    from pldemu.runtime.options import RuntimeOptions

    if args.iters == 1:
        for flag, given in (("--block", args.block is not None), ("--no-cell-check", args.no_cell_check)):
            if given:
                raise InputError(f"{flag} applies to repeated calls: give --iters K with K > 1")
    try:
        trace = str(Path(args.trace).resolve()) if args.trace else None
        return RuntimeOptions(timeout=args.timeout, windows=args.windows, seed=args.seed,
                              stage_pieces=args.stage_pieces, race_detect=args.races, trace=trace,
                              invariants=args.invariants, **schedule_options(args))
    except ValueError as err:
        raise InputError(str(err)) from None


LOCATION_HINT = ("(locations are FUNC:LINE in the executed program as printed; "
                 "--dump DIR writes it to DIR/program.pld)")


def _say(text: str) -> None:
    """One write per message, so that ranks' messages do not interleave mid-line."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _abort(comm: Any, text: str) -> None:
    """Print ``text`` (if any), give the process manager a moment to forward it, end the whole job.

    ``MPI_Abort`` kills every rank at once, including output still sitting in a pipe between this
    rank and mpiexec: without the pause a one-rank failure could end the job without its message.
    MPICH's Abort may return; the caller returns its exit code then.
    """
    if text:
        _say(text)
    time.sleep(ABORT_GRACE)
    abort_job(comm, EXIT_ERROR)


def _error(message: str) -> int:
    print(f"pldemu run: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def child_argv(args: argparse.Namespace, n: int) -> list[str]:
    """The ``pldemu run`` arguments every rank of the spawned job gets (explicit, absolute paths)."""
    argv = ["run", str(Path(args.program).resolve()), "-n", str(n), "--windows", args.windows,
            "--timeout", repr(args.timeout), "--seed", str(args.seed), "--job-timeout", repr(args.job_timeout)]
    if args.no_lower:
        argv.append("--no-lower")
    if args.dump is not None:
        argv += ["--dump", str(Path(args.dump).resolve())]
    if args.races:
        argv.append("--races")
    if args.trace:
        argv += ["--trace", str(Path(args.trace).resolve())]
    if args.stage_pieces:
        argv.append("--stage-pieces")
    if args.iters != 1:
        argv += ["--iters", str(args.iters)]
    if args.block is not None:
        argv += ["--block", str(args.block)]
    if args.no_cell_check:
        argv.append("--no-cell-check")
    return argv + schedule_argv(args)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu run``."""
    from pldemu.runtime.launch import in_mpi_job, job_rank, spawn

    inside = in_mpi_job()
    try:
        options = _options(args)
        program = load_program(args.program, lower=not args.no_lower)
    except InputError as err:
        # Inside a job every rank reaches the same verdict before touching MPI; one prints it.
        return _error(str(err)) if not inside or job_rank() in (0, None) else EXIT_USAGE
    if inside:
        return run_in_job(program, options, source=args.program, ranks=args.ranks, dump=args.dump,
                          lowered=not args.no_lower, iters=args.iters, block=args.block,
                          cell_check=not args.no_cell_check)
    n = args.ranks if args.ranks is not None else DEFAULT_RANKS
    return spawn(n, child_argv(args, n), args.job_timeout)


def run_in_job(program: Program, options: Any, *, source: str = "", ranks: int | None = None,
               dump: str | None = None, lowered: bool = True,
               listeners: Sequence[Callable[[Any], None]] = (), iters: int = 1, block: int | None = None,
               cell_check: bool = True) -> int:
    """Run ``program`` ``iters`` times on every rank of COMM_WORLD and report (rank 0). Returns the exit
    code; a rank whose run fails prints its error and aborts the whole job (exit 3). ``listeners`` are
    attached to the instance besides the op counter (traces, extra checks). With ``iters`` > 1 the
    calls run back to back and every ``block`` of them is checked
    (:func:`pldemu.runtime.repeat.run_program_iterations`; ``cell_check=False`` skips the at-rest check
    of the signal cells)."""
    from mpi4py import MPI

    from pldemu.runtime.errors import DeadlockError, ProgramError
    from pldemu.runtime.harness import CheckError
    from pldemu.runtime.interpreter import OpCounter, ProgramInstance
    from pldemu.runtime.repeat import RepeatResult, run_program_iterations
    from pldemu.windows import WindowError

    comm = MPI.COMM_WORLD
    me, size = comm.Get_rank(), comm.Get_size()
    try:
        if ranks is not None and ranks != size:
            raise ProgramError(f"-n {ranks} but this MPI job has {size} ranks")
        inst = ProgramInstance(program, comm, options)
    except ProgramError as err:
        # Raised identically on every rank before any window exists: end cleanly (MPI_Finalize
        # also removes MPI's shared-memory segments, which an abort would leave behind).
        if me == 0:
            _error(str(err))
        MPI.Finalize()
        return EXIT_USAGE
    counter = OpCounter()
    inst.add_listener(counter)
    for fn in listeners:
        inst.add_listener(fn)
    comm.Barrier()
    repeated: RepeatResult | None = None
    try:
        if iters == 1:
            seconds = inst.run().seconds
        else:
            repeated = run_program_iterations(comm, inst, iters, options, block, cell_check=cell_check)
            seconds = repeated.seconds
    except DeadlockError as err:
        if err.primary:
            _abort(comm, f"pldemu run: rank {me}: {err}\n{LOCATION_HINT}")
        else:
            _say(f"pldemu run: rank {me}: {str(err).splitlines()[0]} (the wait-for report comes from a "
                 f"lower rank)")
            time.sleep(NONPRIMARY_GRACE)
            _abort(comm, "")
        return EXIT_ERROR
    except (ProgramError, WindowError, CheckError) as err:
        # CheckError: a block-end synchronisation timed out (a peer is stuck or gone).
        _abort(comm, f"pldemu run: rank {me}: {type(err).__name__}: {err}\n{LOCATION_HINT}")
        return EXIT_ERROR
    except Exception as err:  # not the program's fault: say so, with the traceback, and end the job
        trace = "".join(traceback.format_exception(err)).rstrip()
        _abort(comm, f"pldemu run: rank {me}: internal error: {type(err).__name__}: {err}\n{trace}")
        return EXIT_ERROR
    violations: list[Any] = []
    if repeated is None:
        races = inst.races.check() if inst.races is not None else []  # collective
        if inst.invariants is not None:  # collective; --iters K > 1 checks at every block end instead
            violations = inst.invariants.checkpoint(comm, max(60.0, 4.0 * float(options.timeout)))
    else:
        races = list(repeated.race_reports)  # checked at every block end
    summaries = {name: _summary(inst.local(name)) for name in inst.buffer_names()}
    mine = (seconds, {op.text: n for op, n in counter.counts.items()}, summaries)
    if dump is not None:
        _dump(Path(dump), me, inst, program)
    gathered = comm.gather(mine, root=0)
    if me == 0:
        assert gathered is not None
        print(_report(program, source, lowered, inst.backend, options, gathered, iters), flush=True)
        if repeated is not None:
            print(repeat_summary(repeated), flush=True)
        elif options.invariants:
            print(invariant_summary(violations), flush=True)
        if options.race_detect:
            print(race_summary(races, repeated.races if repeated is not None else None), flush=True)
    inst.close()  # collective; rank 0 writes the trace
    if me == 0 and options.trace:
        print(f"  trace: {options.trace} (draw it: pldemu trace-plot {options.trace} -o FILE.png)", flush=True)
    # Every rank got the same verdict: end MPI cleanly so that a non-zero exit is not an abort.
    if violations or (repeated is not None and (repeated.cells_nonzero or repeated.invariant_violations)):
        MPI.Finalize()
        return EXIT_CHECK
    if races:
        MPI.Finalize()
        return EXIT_RACES
    return EXIT_OK


def race_summary(reports: Sequence[Any], total: int | None = None) -> str:
    """The race detector's verdict as printed under the report (every report kept, one per line;
    ``total``: how many there were, when only the first ones were kept)."""
    if not reports:
        return "  races: none (every pair of conflicting window accesses was ordered by a notify -> wait)"
    total = len(reports) if total is None else total
    lines = [f"  races: {total} report(s)" + (f", the first {len(reports)}:" if total > len(reports) else "")]
    lines += [f"    {r.describe()}" for r in reports]
    return "\n".join(lines)


def invariant_summary(violations: Sequence[Any]) -> str:
    """The invariant checker's verdict on one run (``--invariants`` without ``--iters``)."""
    if not violations:
        return "  invariants: none broken (no negative cell, no cell written by both Set and AtomicAdd)"
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
            np.save(folder / f"{name}.bf16.npy", a.view(np.uint16))
        else:
            np.save(folder / f"{name}.npy", a)
    if me == 0:
        (root / "program.pld").write_text(format_program(program))


def _report(program: Program, source: str, lowered: bool, backend: str, options: Any,
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


__all__ = ["EXIT_CHECK", "EXIT_ERROR", "EXIT_OK", "EXIT_RACES", "EXIT_USAGE", "InputError", "add_arguments",
           "child_argv", "load_program", "race_summary", "repeat_summary", "run", "run_in_job"]
