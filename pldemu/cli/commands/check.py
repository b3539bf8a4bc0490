"""``pldemu check``: run a collective K times back to back on N ranks and check every call.

The launching process validates the arguments (and builds and lowers the program once, so contract
violations are reported before any rank starts), then re-runs itself as
``mpiexec -n N python -m mpi4py -m pldemu check ...``; inside the MPI job every rank runs
:func:`pldemu.harness.check.run_check` on COMM_WORLD.

Exit codes: 0 every check passed; 1 a wrong element, a non-zero signal cell or a native-MPI
disagreement; 2 bad arguments; 3 a timeout, deadlock or crash inside the job.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pldemu.cli import common
from pldemu.cli.args import (
    add_backend_argument,
    add_collective_arguments,
    call_request,
    check_applies,
    collective_argv,
)
from pldemu.cli.check_kinds import CHECK_KINDS, KIND_NAMES
from pldemu.cli.check_kinds.mx import MX_DTYPES, DtypeGate
from pldemu.collectives import COLLECTIVE_NAMES
from pldemu.harness import injob
from pldemu.harness.plan import Planned, build, plan_calls, validate_cases
from pldemu.job import exits, flags
from pldemu.job.argtypes import nonneg_int, positive_int
from pldemu.job.exits import EXIT_FAIL, EXIT_OK, UsageError
from pldemu.job.prelaunch import add_force_argument, check_before_launch
from pldemu.runtime.options import RuntimeOptions

DEFAULT_RANKS = 4
DEFAULT_SIZE = 1024
DEFAULT_ITERS = 20
DEFAULT_TIMEOUT = 30.0
DEFAULT_JOB_TIMEOUT = 3600.0


_COLLECTIVES = COLLECTIVE_NAMES

EPILOG = """\
how it checks:
  Every iteration each rank writes inputs that differ per rank, position and iteration and are exact
  in FP16/FP32 in any reduction order, runs the lowered collective, and compares its result with a
  NumPy oracle. Calls run back to back on ONE signal buffer with no MPI synchronisation between them,
  except a "consume fence" (an MPI barrier after the result has been read) for allgather, all_to_all
  and broadcast: allgather/all_to_all push into the peers' result windows before their first barrier,
  so a fast peer's next call would overwrite a result not yet read, and a broadcast root could
  overwrite its data while a slow peer is still reading it (pypto #2175). At the end of every block
  all ranks meet, every signal cell on every rank must be exactly 0, and the block's last result is
  compared with the native MPI collective (Allreduce, Allgather, Reduce_scatter_block, Bcast,
  Alltoall, Alltoallv; barrier has none). Every call also checks the ordering claim: when a rank's call
  i returns, every peer must be in call i or i+1 (an epoch each rank publishes before each call).

columns:
  iters          iterations done at the end of the block
  size(B)        bytes of the result window per rank
  time/iter(us)  run() time per call, slowest rank
  #wrong         wrong elements in the block, summed over ranks; a peer found out of step (not in
                 the same call or the next one) when a call returned also counts as one
  cells!=0       signal cells not back to 0 after the block, summed over ranks
  native         ok, n/a, or the number of elements where native MPI disagreed

invariants (on unless --no-invariants): every notify is a fetching atomic, so a signal cell that goes
  negative is reported with rank, cell, value and program location; a cell written by both Set and
  AtomicAdd in one run is reported at the block end; a peer out of step and a cell not 0 at rest
  count as invariant failures too.

races (--races): a happens-before race detector watches every window access of the program and of
  the harness (inputs written, results consumed); at each block end it reports conflicting accesses
  that no notify -> wait (or harness barrier) orders, whether or not the data came out wrong.

exit status: 0 pass, 1 wrong results / non-zero cells / races, 2 bad arguments, 3 timeout/deadlock/crash.
"""


def _root(text: str) -> int | str:
    if text == "all":
        return "all"
    return nonneg_int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu check`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "\n".join([EPILOG, *(kind.epilog for kind in CHECK_KINDS.values())])
    parser.add_argument(
        "collective",
        metavar="COLLECTIVE",
        choices=[*_COLLECTIVES, *KIND_NAMES, "all"],
        action=DtypeGate,
        help=f"one of {', '.join(_COLLECTIVES)}, the tile checks {', '.join(KIND_NAMES)}, or 'all' (every "
        "collective and both allreduce modes, then a summary table, then the tile checks)",
    )
    add_backend_argument(parser)
    add_force_argument(parser)
    for kind in CHECK_KINDS.values():
        kind.add_arguments(parser)
    add_collective_arguments(parser, default_size=DEFAULT_SIZE, root_type=_root, dtypes=MX_DTYPES, dtype_action=DtypeGate,
                             root_help="broadcast root (default 0); 'all' runs from every root in turn")
    common.add_ranks_argument(parser, DEFAULT_RANKS)
    parser.add_argument("--iters", type=positive_int, default=DEFAULT_ITERS, metavar="K",
                        help=f"back-to-back calls per case (default {DEFAULT_ITERS})")
    parser.add_argument("--block", type=positive_int, default=None, metavar="B",
                        help="iterations per progress row (default: about 8 rows)")
    common.add_job_timeout_argument(parser, DEFAULT_JOB_TIMEOUT)
    flags.add_runtime_arguments(parser, "check", defaults={"--timeout": DEFAULT_TIMEOUT}, helps={
        "--seed": "data seed, and the seed of every randomised schedule (default %(default)s)",
        "--races": "detect data races on windows (happens-before, checked at every block end); a race fails "
                   "the check (exit 1)",
        "--trace": "write a Chrome/Perfetto trace of every rank's ops (with 'all': FILE.CASE.json per case); "
                   "draw it with pldemu trace-plot",
    })


# ----------------------------------------------------------------------------------------------
# Planning: which collective specs the command runs
# ----------------------------------------------------------------------------------------------


def plan(args: argparse.Namespace, nranks: int) -> list[Planned]:
    """The cases the command line asks for on ``nranks`` ranks; raises UsageError on bad combinations."""
    name: str = args.collective
    for kind in CHECK_KINDS.values():
        refusal = kind.refusal(args)
        if refusal is not None:
            raise UsageError(refusal)
    if name in KIND_NAMES:
        return []  # a check kind plans nothing collective (pldemu.cli.check_kinds)
    if name != "all":
        try:
            check_applies(name, args)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return plan_calls(call_request(args), nranks, DEFAULT_SIZE)


def validate(args: argparse.Namespace, nranks: int) -> list[Planned]:
    """Plan, then build and lower every case once, so contract violations surface as usage errors."""
    return validate_cases(plan(args, nranks), nranks)


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def child_argv(args: argparse.Namespace) -> list[str]:
    """The ``pldemu check ...`` arguments each rank of the spawned job gets (same options, explicit)."""
    argv = ["check", args.collective, "--dtype", args.dtype, "--iters", str(args.iters), "--job-timeout",
            repr(args.job_timeout), "--backend", args.backend, *collective_argv(args),
            *(w for kind in CHECK_KINDS.values() for w in kind.argv(args))]
    for flag, value in (("--block", args.block), ("-n", args.ranks)):
        if value is not None:
            argv += [flag, str(value)]
    return argv + flags.runtime_argv(args)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu check``."""
    from pldemu.job.launch import in_mpi_job, spawn
    from pldemu.job.resources import check_copies
    from pldemu.lowering import lower_composite_ops

    if in_mpi_job():
        return _run_in_job(args)
    nranks = args.ranks or DEFAULT_RANKS
    try:
        cases = validate(args, nranks)
        options = flags.runtime_options(args)
        programs = [(lower_composite_ops(src), src) for src in (build(p).program for p in cases)]
        check_before_launch(programs, nranks, options, force=args.force, copies=check_copies(nranks))
    except UsageError as err:
        return exits.usage_error("check", str(err))
    return spawn(nranks, child_argv(args), args.job_timeout, placement=common.placement(args))


def _run_in_job(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from pldemu.harness.check import CheckResult, run_check
    from pldemu.runtime.errors import DeadlockError

    comm = MPI.COMM_WORLD
    nranks, me = comm.Get_size(), comm.Get_rank()
    try:
        injob.check_job_size(args.ranks, nranks)
        cases = validate(args, nranks)
        options = flags.runtime_options(args)
    except UsageError as err:
        return injob.refuse(comm, "check", err)
    results: list[CheckResult] = []
    try:
        for i, p in enumerate(cases):
            if i and me == 0:
                print(flush=True)
            results.append(run_check(comm, build(p), args.iters, _case_options(options, p, len(cases)), args.block))
    except DeadlockError as err:
        injob.abort_on_deadlock(comm, "# ", err)
    except Exception as err:  # any failure inside the job ends it with exit 3
        # A rank that failed alone would leave its peers waiting; end the whole job now.
        injob.abort_on_error(comm, "# ", err)
    if len(results) > 1 and me == 0:
        print(flush=True)
        print(summary_table(results), flush=True)
    try:
        tiles_ok = all(kind.run(comm, args, options) for kind in CHECK_KINDS.values())
    except Exception as err:
        injob.abort_on_error(comm, "# ", err)
    return EXIT_OK if all(r.ok for r in results) and tiles_ok else EXIT_FAIL


def _case_options(options: RuntimeOptions, planned: Planned, ncases: int) -> RuntimeOptions:
    """``options`` for one case: with several cases each gets its own trace file (``FILE.LABEL.json``),
    because every case is its own program instance."""
    import dataclasses

    if not options.trace or ncases == 1:
        return options
    kw = planned.kwargs()
    label = kw["name"] + (f"-{kw['mode'].name}" if kw["name"] == "allreduce" and "mode" in kw else "")
    path = Path(options.trace)
    return dataclasses.replace(options, trace=str(path.with_name(f"{path.name.removesuffix('.json')}.{label}.json")))


def summary_table(results: Sequence[Any]) -> str:
    """The ``all`` summary: one line per case."""
    head = f"{'case':<44} {'iters':>5} {'size(B)':>9} {'us/iter':>10} {'#wrong':>7} {'cells!=0':>8} {'native':>7}  result"
    lines = ["# summary", "# " + head]
    for r in results:
        native = r.native_wrong
        nat = "n/a" if native is None else ("ok" if native == 0 else str(native))
        lines.append(
            f"  {r.case.label:<44} {r.iters:>5} {r.case.target_bytes:>9} {r.time_us:>10.1f} {r.wrong:>7} "
            f"{r.cells_nonzero:>8} {nat:>7}  {'PASS' if r.ok else 'FAIL'}"
        )
    failed = sum(not r.ok for r in results)
    lines.append(f"# {len(results) - failed} of {len(results)} cases passed")
    return "\n".join(lines)
