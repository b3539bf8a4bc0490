"""``pldemu run PROGRAM.pld -n N``: parse, lower, verify and execute a program on N MPI ranks.

Outside an MPI job the command checks its input, then launches itself under
``mpiexec -n N python -m mpi4py -m pldemu run ...``; inside the job every rank parses and lowers the
program again (no MPI traffic before it is known to be good), instantiates it, runs the entry function
once, and rank 0 prints a report: ranks, back end, wall time, ops executed by kind, and per buffer a
checksum of every rank's final contents. ``--dump DIR`` also writes every rank's buffers as ``.npy``
plus the executed (lowered) program, whose line numbers the error locations refer to.
``--races`` runs the happens-before race detector (``pldemu.runtime.races``) and lists its reports;
``--trace FILE.json`` writes a Chrome/Perfetto trace (``pldemu trace-plot FILE.json -o FILE.png``).

Exit codes: 0 ran, 2 bad input (missing file, parse/lowering/verification error, bad options),
3 the program failed while running (deadlock, refused access, program error), 4 ran but ``--races``
found races, 124 job timeout.
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

from pldemu.cli.schedule_args import add_schedule_arguments, schedule_argv, schedule_options
from pldemu.ir import Program

EXIT_OK = 0
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
    parser.add_argument("program", help="the .pld program to run")
    parser.add_argument("-n", "--ranks", type=int, default=None, metavar="N",
                        help=f"number of MPI ranks (default {DEFAULT_RANKS}; inside an MPI job: the job's size)")
    parser.add_argument("--windows", choices=["auto", "shared", "rma"], default="auto",
                        help="RMA window back end (default auto: shared memory when all ranks share a node)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S",
                        help="seconds one wait may block before the deadlock report (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="seed recorded for randomised runtime knobs")
    parser.add_argument("--no-lower", action="store_true",
                        help="run the program as written (it must already be lowered)")
    parser.add_argument("--dump", metavar="DIR", default=None,
                        help="write every rank's buffers (DIR/rankR/NAME.npy) and the executed program")
    parser.add_argument("--job-timeout", type=float, default=DEFAULT_JOB_TIMEOUT, metavar="S",
                        help=f"seconds the whole mpiexec job may take (default {DEFAULT_JOB_TIMEOUT:g})")
    parser.add_argument("--races", action="store_true",
                        help=f"detect data races on windows (happens-before); exit {EXIT_RACES} if any")
    parser.add_argument("--trace", metavar="FILE.json", default=None,
                        help="write a Chrome/Perfetto trace of every rank's ops (see pldemu trace-plot); a rank "
                             "whose run fails writes its own part to FILE.rankR.json")
    add_schedule_arguments(parser)


def load_program(path: str, lower: bool = True) -> Program:
    """Parse (and unless ``lower`` is False, lower) and verify ``path``; every problem is an InputError."""
    from pldemu.ir import ParseError, VerifyError, parse_file, verify

    file = Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such file")
    try:
        program = parse_file(file)
    except ParseError as err:
        raise InputError(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: {err}") from None
    if lower:
        from pldemu.lowering import lower_composite_ops

        try:
            program = lower_composite_ops(program)
        except ValueError as err:  # LoweringError and the IR's own type errors
            raise InputError(f"{path}: cannot lower: {err}") from None
    try:
        verify(program)
    except VerifyError as err:
        raise InputError(f"{path}: {err}") from None
    return program


def _options(args: argparse.Namespace) -> Any:
    from pldemu.runtime.options import RuntimeOptions

    if args.ranks is not None and args.ranks < 1:
        raise InputError(f"-n must be at least 1, got {args.ranks}")
    if not args.job_timeout > 0:
        raise InputError(f"--job-timeout must be positive, got {args.job_timeout}")
    try:
        trace = str(Path(args.trace).resolve()) if args.trace else None
        return RuntimeOptions(timeout=args.timeout, windows=args.windows, seed=args.seed,
                              race_detect=args.races, trace=trace, **schedule_options(args))
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
    comm.Abort(EXIT_ERROR)


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
                          lowered=not args.no_lower)
    n = args.ranks if args.ranks is not None else DEFAULT_RANKS
    rc = spawn(n, child_argv(args, n), args.job_timeout)
    return rc if 0 <= rc <= 255 else EXIT_ERROR


def run_in_job(program: Program, options: Any, *, source: str = "", ranks: int | None = None,
               dump: str | None = None, lowered: bool = True,
               listeners: Sequence[Callable[[Any], None]] = ()) -> int:
    """Run ``program`` once on every rank of COMM_WORLD and report (rank 0). Returns the exit code; a
    rank whose run fails prints its error and aborts the whole job (exit 3). ``listeners`` are
    attached to the instance besides the op counter (traces, extra checks)."""
    from mpi4py import MPI

    from pldemu.runtime.errors import DeadlockError, ProgramError
    from pldemu.runtime.interpreter import OpCounter, ProgramInstance
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
    try:
        stats = inst.run()
    except DeadlockError as err:
        if err.primary:
            _abort(comm, f"pldemu run: rank {me}: {err}\n{LOCATION_HINT}")
        else:
            _say(f"pldemu run: rank {me}: {str(err).splitlines()[0]} (the wait-for report comes from a "
                 f"lower rank)")
            time.sleep(NONPRIMARY_GRACE)
            _abort(comm, "")
        return EXIT_ERROR
    except (ProgramError, WindowError) as err:
        _abort(comm, f"pldemu run: rank {me}: {type(err).__name__}: {err}\n{LOCATION_HINT}")
        return EXIT_ERROR
    except Exception as err:  # not the program's fault: say so, with the traceback, and end the job
        trace = "".join(traceback.format_exception(err)).rstrip()
        _abort(comm, f"pldemu run: rank {me}: internal error: {type(err).__name__}: {err}\n{trace}")
        return EXIT_ERROR
    races = inst.races.check() if inst.races is not None else []  # collective
    summaries = {name: _summary(inst.local(name)) for name in inst.buffer_names()}
    mine = (stats.seconds, {op.text: n for op, n in counter.counts.items()}, summaries)
    if dump is not None:
        _dump(Path(dump), me, inst, program)
    gathered = comm.gather(mine, root=0)
    if me == 0:
        assert gathered is not None
        print(_report(program, source, lowered, inst.backend, options, gathered), flush=True)
        if options.race_detect:
            print(race_summary(races), flush=True)
    inst.close()  # collective; rank 0 writes the trace
    if me == 0 and options.trace:
        print(f"  trace: {options.trace} (draw it: pldemu trace-plot {options.trace} -o FILE.png)", flush=True)
    if races:
        # Every rank got the same reports: end MPI cleanly so that the non-zero exit is not an abort.
        MPI.Finalize()
        return EXIT_RACES
    return EXIT_OK


def race_summary(reports: Sequence[Any]) -> str:
    """The race detector's verdict as printed under the report (every report, one per line)."""
    if not reports:
        return "  races: none (every pair of conflicting window accesses was ordered by a notify -> wait)"
    lines = [f"  races: {len(reports)} report(s)"]
    lines += [f"    {r.describe()}" for r in reports]
    return "\n".join(lines)


def _summary(a: np.ndarray) -> str:
    crc = zlib.crc32(np.ascontiguousarray(a).tobytes())
    if a.size == 0:
        return f"empty crc32={crc:08x}"
    if a.dtype.kind == "f":
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
        np.save(folder / f"{name}.npy", np.array(inst.local(name), copy=True))
    if me == 0:
        (root / "program.pld").write_text(format_program(program))


def _report(program: Program, source: str, lowered: bool, backend: str, options: Any,
            gathered: list[Any]) -> str:
    n = len(gathered)
    seconds = [g[0] for g in gathered]
    ops: Counter[str] = Counter()
    for g in gathered:
        ops.update(g[1])
    lines = [
        f"pldemu run: program {program.name} ({source}{', lowered' if lowered else ''})",
        f"  ranks {n}, windows {backend}, wait timeout {options.timeout:g}s, seed {options.seed}",
        f"  wall time {max(seconds) * 1e3:.2f} ms (slowest rank; fastest {min(seconds) * 1e3:.2f} ms)",
        "  ops executed (all ranks): " + (", ".join(f"{op} {k}" for op, k in sorted(ops.items())) or "none"),
        "  buffers (final contents per rank):",
    ]
    for decl in program.buffers:
        name = decl.var.name
        lines.append(f"    {decl.kind.value} {name}")
        for r, g in enumerate(gathered):
            lines.append(f"      rank {r}: {g[2][name]}")
    return "\n".join(lines)


__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_RACES", "EXIT_USAGE", "InputError", "add_arguments", "load_program", "run",
           "run_in_job"]
