"""``pldemu bench``: time the lowered recipes against native MPI in the same run (nccl-tests style).

The launching process validates the arguments, then re-runs itself as
``mpiexec -n N python -m mpi4py -m pldemu bench ...``; inside the job every rank runs
:func:`pldemu.bench.run_bench` on COMM_WORLD and rank 0 prints the tables (progress goes to stderr)
and writes ``--json`` / ``--plot``.

Exit codes: 0 done and every result right; 1 some result was wrong (pldemu or native); 2 bad
arguments; 3 a failure inside the job (deadlock, timeout, crash).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pldemu.cli import common
from pldemu.collectives import COLLECTIVE_NAMES
from pldemu.harness import injob
from pldemu.job import exits, flags
from pldemu.job.argtypes import nonneg_int, positive_int
from pldemu.job.exits import EXIT_ERROR, EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError
from pldemu.job.launch import in_mpi_job
from pldemu.job.outputs import OutputPathError, output_file

DEFAULT_RANKS = 4
STARTUP_RANKS = 2
DEFAULT_SIZES = "4K,1M"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 3
DEFAULT_TIMEOUT = 60.0
DEFAULT_JOB_TIMEOUT = 3600.0

_SECTIONS = ("signals", "bulk", "micro", "startup")
_WHATS = (*COLLECTIVE_NAMES, *_SECTIONS, "all")

EPILOG = """\
what is measured (every figure: max over ranks per iteration, then the median over iterations;
pldemu and its reference alternate inside every iteration, after warm-up):
  collectives  the lowered recipe run by pldemu vs the native mpi4py collective (Allreduce,
               Allgather, Reduce_scatter_block, Bcast, Alltoall, Alltoallv, Barrier); allreduce runs
               both mesh and ring unless --mode is given
  signals      notify -> wait hop (token ring) vs raw MPI Fetch_and_op + poll; pld.tensor.barrier
               vs a raw all-to-all signal round
  bulk         one put / get / remote_load of SIZE bytes vs memcpy (numpy.copyto)
               (signals and bulk run at least 20 timed iterations, whatever --iters says)
  all          all of the above, plus the allreduce bound and the targets
  micro        (only by name) the interpreter's own costs on one process, best of many runs:
               hop, barrier run(), mesh chunk, small put, 16 MiB get/remote_load vs memcpy
  startup      (only by name; -n default 2) one trivial `pldemu run` job vs bare mpiexec + python +
               numpy + mpi4py, `pldemu --help` vs `python -c "import numpy"`, one `pldemu.launch`
               call; wall time spawn to exit, and where the job's time goes, phase by phase

sizes: bytes per rank of the collective's natural buffer (the result window), binary units:
  allreduce, broadcast [1, SIZE]; allgather, reduce_scatter, all_to_all [NR, SIZE];
  all_to_all_v [NR*4, SIZE]; SIZE = bytes / itemsize / rows.

columns: time(us); algbw = size / time and busbw = algbw x (allreduce 2(n-1)/n; reduce_scatter,
allgather, all_to_all (n-1)/n; broadcast 1), both GB/s; #wrong = wrong elements over ranks and
iterations (exact data, oracle comparison); ratio = pldemu time / native time.

a full run (docs/benchmarks.md): pldemu bench all -n 4 --sizes 4K,1M,16M,64M --iters 10 --json bench.json --plot bench.png

exit status: 0 ok, 1 a wrong result, 2 bad arguments, 3 failure inside the job.
"""


def _sizes(text: str) -> tuple[int, ...]:
    from pldemu.bench.common import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu bench`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("what", metavar="COLLECTIVE", nargs="?", default="all", choices=_WHATS,
                        help=f"one of {', '.join(COLLECTIVE_NAMES)}; signals; bulk; micro; startup; or all (default)")
    common.add_ranks_argument(parser, DEFAULT_RANKS)
    parser.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                        help=f"comma-separated bytes per rank, K/M/G suffixes (default {DEFAULT_SIZES})")
    parser.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32", help="element type (default fp32)")
    parser.add_argument("--mode", choices=["mesh", "ring"], default=None,
                        help="allreduce algorithm (default: both)")
    parser.add_argument("--iters", type=positive_int, default=DEFAULT_ITERS, metavar="K",
                        help=f"timed iterations per measurement (default {DEFAULT_ITERS})")
    parser.add_argument("--warmup", type=nonneg_int, default=DEFAULT_WARMUP, metavar="W",
                        help=f"untimed warm-up iterations (default {DEFAULT_WARMUP})")
    parser.add_argument("--json", metavar="FILE", default=None, help="write every figure as JSON")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="plot busbw against size, pldemu and native (needs matplotlib)")
    flags.add_runtime_arguments(parser, "bench", defaults={"--timeout": DEFAULT_TIMEOUT})
    common.add_job_timeout_argument(parser, DEFAULT_JOB_TIMEOUT)


def validate(args: argparse.Namespace) -> str | None:
    """A usage problem the parser cannot see, or None."""
    if args.mode is not None and args.what not in ("allreduce", "all"):
        return f"--mode applies to allreduce, not {args.what}"
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return "--plot needs matplotlib (pip install matplotlib, or the [plot] extra)"
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            try:
                output_file(path, flag)
            except OutputPathError as err:
                return str(err)
    return None


def child_argv(args: argparse.Namespace, n: int) -> list[str]:
    """The ``pldemu bench`` arguments of every rank of the spawned job (explicit, absolute paths)."""
    from pldemu.bench.common import format_size

    argv = ["bench", args.what, "-n", str(n), "--dtype", args.dtype, "--iters", str(args.iters),
            "--warmup", str(args.warmup), "--job-timeout", repr(args.job_timeout), *flags.runtime_argv(args)]
    if args.sizes is not None:
        argv += ["--sizes", ",".join(format_size(s) for s in args.sizes)]
    if args.mode is not None:
        argv += ["--mode", args.mode]
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            argv += [flag, str(Path(path).resolve())]
    return argv


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu bench``."""
    from pldemu.job.launch import job_rank, pin_env, spawn

    problem = validate(args)
    if problem is not None:
        return exits.usage_error("bench", problem) if not in_mpi_job() or job_rank() in (0, None) else EXIT_USAGE
    if args.what == "startup":
        return _run_startup(args)
    if in_mpi_job():
        return _run_in_job(args)
    n = args.ranks or DEFAULT_RANKS
    placement = common.placement(args)
    # One rank per core in turn where they outnumber the cores: a measurement must not depend on
    # where the scheduler happened to leave them (launch.PIN_VAR).
    return spawn(n, child_argv(args, n), args.job_timeout, env=pin_env(placement.local_ranks(n)), placement=placement)


def _run_startup(args: argparse.Namespace) -> int:
    """``pldemu bench startup``: run from this process (its contenders are jobs of their own)."""
    import json

    from pldemu.bench.startup import StartupConfig, bench_startup

    if in_mpi_job():
        return exits.usage_error("bench", "startup times whole jobs: run it outside mpiexec")
    config = StartupConfig(ranks=args.ranks or STARTUP_RANKS, warmup=args.warmup, iters=args.iters)
    try:
        report = bench_startup(config, lambda line: print(line, file=sys.stderr, flush=True))
    except RuntimeError as err:
        print(f"pldemu bench: {err}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    print("\n".join(report.lines()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"times": report.times, "cpu": report.cpu, "phases": report.phases}, indent=1))
        print(f"# wrote {args.json}", flush=True)
    return EXIT_OK


def _run_in_job(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from pldemu.bench import BenchConfig, run_bench
    from pldemu.bench.common import parse_sizes
    from pldemu.ir import DType

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    try:
        injob.check_job_size(args.ranks, comm.Get_size())
        # Poison stays on (the default): it costs nothing per op, only at allocation.
        options = flags.runtime_options(args)
    except UsageError as err:
        return injob.refuse(comm, "bench", err)
    config = BenchConfig(
        what=args.what,
        sizes=args.sizes if args.sizes is not None else parse_sizes(DEFAULT_SIZES),
        dtype=DType.parse(args.dtype),
        warmup=args.warmup,
        iters=args.iters,
        modes=(args.mode,) if args.mode else ("mesh", "ring"),
    )
    try:
        report = run_bench(comm, config, options)
        if me == 0:
            if args.json:
                report.write_json(args.json)
                print(f"# wrote {args.json}", flush=True)
            if args.plot:
                report.plot(args.plot)
                print(f"# wrote {args.plot}", flush=True)
    except Exception as err:  # any failure inside the job ends it with exit 3
        injob.abort_on_error(comm, "# ", err)  # a rank failing alone would leave its peers waiting
    if report.wrong:
        if me == 0:
            print(f"# {report.wrong} wrong elements", flush=True)
        return EXIT_FAIL
    return EXIT_OK
