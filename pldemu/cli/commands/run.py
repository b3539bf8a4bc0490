"""``pldemu run PROGRAM -n N``: read (``.pld`` or a Python builder file), lower, verify and execute a program on N MPI ranks.

Outside an MPI job the command checks its input, then launches itself under
``mpiexec -n N python -m mpi4py -m pldemu run ...``, handing its ranks the program it loaded, lowered
and verified (:func:`pldemu.job.load.hand_over`; launched by hand under ``mpiexec``, every rank parses and
lowers the file itself, with no MPI traffic before it is known to be good); every rank instantiates it,
runs the entry function
once, and rank 0 prints a report: ranks, back end, wall time, ops executed by kind, and per buffer a
checksum of every rank's final contents. ``--dump DIR`` also writes every rank's buffers as ``.npy``
plus the executed (lowered) program, whose line numbers the error locations refer to.
``--races`` runs the happens-before race detector (``pldemu.runtime.instrument.races``) and lists its reports;
``--trace FILE.json`` writes a Chrome/Perfetto trace (``pldemu trace-plot FILE.json -o FILE.png``).

``--iters K`` (K > 1) runs the entry function K times back to back on the same windows
(:func:`pldemu.harness.repeat.run_program_iterations`) and checks at every block end (``--block B``
calls; default about 8 blocks): all ranks meet at a barrier, every SIGNAL cell on every rank must be 0
(the self-clearing credit protocol; ``--no-cell-check`` skips this for a program that leaves cells
non-zero on purpose), and the ``--invariants`` checker and the ``--races`` detector get their
checkpoint; rank 0 prints one row per block, then the usual report (ops over all calls, final buffers).

Exit codes: 0 ran (and with ``--iters`` K > 1 every block was clean), 1 signal cells not 0 at rest or
invariant violations (``--iters`` K > 1), or a ``tdiv`` / ``trem`` whose value differed from floor semantics
(unless ``--truncation-warn``), 2 bad input (missing file, parse/lowering/verification error,
bad options), 3 the program failed while running (deadlock, refused access, program error), 4 ran but
``--races`` found races, 124 job timeout.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pldemu.cli import common
from pldemu.job import exits, flags
from pldemu.job.argtypes import format_number, positive_int
from pldemu.job.exits import EXIT_FAIL, EXIT_OK, EXIT_RACES, EXIT_USAGE, UsageError
from pldemu.job.load import hand_over, handed_program, load_program
from pldemu.job.outputs import OutputPathError, output_dir
from pldemu.job.prelaunch import add_force_argument
from pldemu.job.run_io import (
    NO_IO,
    JobIO,
    add_io_arguments,
    io_argv,
    job_io,
    write_report,
)
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from pldemu.harness.run import RunPlan
    from pldemu.ir import Program
    from pldemu.runtime.sites import OpEvent

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
    flags.add_runtime_arguments(parser, "run", helps={
        "--seed": "seed of every randomised schedule (default %(default)s)",
        "--races": f"detect data races on windows (happens-before); exit {EXIT_RACES} if any",
        "--trace": "write a Chrome/Perfetto trace of every rank's ops (see pldemu trace-plot); a rank whose run "
                   "fails writes its own part to FILE.rankR.json",
    })
    add_io_arguments(parser)
    parser.add_argument("--lowered", metavar="FILE", default=None, help=argparse.SUPPRESS)  # see hand_over


def _options(args: argparse.Namespace) -> RuntimeOptions:
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
    return flags.runtime_options(args)


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
    return argv + flags.runtime_argv(args) + io_argv(args)


def plan_of(args: argparse.Namespace, io: JobIO | None = None) -> RunPlan:
    """The :class:`~pldemu.harness.run.RunPlan` the parsed command line describes."""
    from pldemu.harness.run import RunPlan

    return RunPlan(args.ranks, args.dump, not args.no_lower, args.iters, args.block, io if io is not None else NO_IO)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu run``."""
    from pldemu.job.buffer_io import BufferFileError
    from pldemu.job.launch import in_mpi_job, job_rank, job_size, spawn, startup_mark

    inside = in_mpi_job()
    n = args.ranks or (job_size() if inside else None) or DEFAULT_RANKS
    try:
        options = _options(args)
        if inside and args.lowered is not None:
            program = handed_program(args.lowered)
        else:
            # Inside, the peers' own memory is already in use: the launcher judged it.
            program = load_program(args.program, lower=not args.no_lower, nranks=n, options=options,
                                   force=args.force or inside)
        io = job_io(args, program, n)
    except (UsageError, BufferFileError, OutputPathError) as err:
        # Inside a job every rank reaches the same verdict before touching MPI; one prints it.
        return exits.usage_error("run", str(err)) if not inside or job_rank() in (0, None) else EXIT_USAGE
    startup_mark("checked")
    if inside:
        return run_in_job(program, options, source=args.program, plan=plan_of(args, io))
    import tempfile

    placement = common.placement(args)
    with tempfile.TemporaryDirectory(prefix="pldemu-job-") as work:
        argv = child_argv(args, n)
        if not (placement.hosts or placement.hostfile):  # the ranks see this machine's files
            argv += ["--lowered", str(hand_over(program, Path(work)))]
        code = spawn(n, argv, args.job_timeout, placement=placement)
    startup_mark("job-done")
    return code


def run_in_job(program: Program, options: RuntimeOptions, *, source: str = "",
               listeners: Sequence[Callable[[OpEvent], None]] = (), plan: RunPlan | None = None) -> int:
    """The in-job half of ``pldemu run``: :func:`pldemu.harness.run.run_once` on COMM_WORLD, then rank 0
    prints the report (and writes ``--report``). Returns the exit code, the same on every rank."""
    from mpi4py import MPI

    from pldemu.harness.report import format_report, json_report
    from pldemu.harness.run import RunPlan, run_once
    from pldemu.job.launch import serves_pool

    plan = plan if plan is not None else RunPlan()
    comm = MPI.COMM_WORLD
    ran = run_once(comm, program, options, plan, listeners)
    if ran is None:
        return EXIT_USAGE
    if comm.Get_rank() == 0:
        print(format_report(program, source, options, plan, ran), flush=True)
        if plan.io.report is not None:
            write_report(plan.io.report, json_report(program, ran))
        if options.trace:
            print(f"  trace: {options.trace} (draw it: pldemu trace-plot {options.trace} -o FILE.png)", flush=True)
    # Every rank got the same verdict: end MPI cleanly so that a non-zero exit is not an abort (a pool
    # job's ranks carry on with the next run instead: pldemu.pool).
    if ran.code != EXIT_OK and not serves_pool():
        MPI.Finalize()
    return ran.code


__all__ = ["add_arguments", "child_argv", "plan_of", "run", "run_in_job"]
