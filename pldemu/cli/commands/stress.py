"""``pldemu stress``: hunt for races: run a collective or a user's program under perturbed schedules until
the first failure.

    pldemu stress allreduce --iters 2000 --jitter 50 --visibility deferred -n 4
    pldemu stress my.pld --iters 500 --jitter 50 -n 4    # a user's program (.pld, lowered here)
    pldemu stress --mutant wait-eq --seed 3 -n 4          # one catalogue mutant
    pldemu stress --all-mutants -n 4 [--seeds 5]          # the catalogue, as a table

The launching process validates the arguments, then runs the job
(``mpiexec -n N python -m mpi4py -m pldemu stress ... --result-file F``); every rank runs
:func:`pldemu.harness.stress.stress`. The job writes a small JSON outcome (kind, iteration, detail),
which this process reads back, so it can report a deadlock even though the job aborted. On failure
it prints the kind, the iteration and the exact command that replays it (same seed, same flags).

A user's program (the positional argument ends in ``.pld`` or names an existing file) is parsed,
lowered (unless ``--no-lower``) and verified here first, so bad input exits 2 before any mpiexec; the
job then runs :func:`pldemu.harness.repeat.run_program_iterations` through the same
:func:`pldemu.harness.stress.stress`. A program has no oracle: its failure kinds are invariant,
deadlock, race and error, never wrong-data.

``--all-mutants`` runs every mutant of ``pldemu.mutants.MUTANTS`` as its own run (each seed too), in
warm jobs on this machine (:mod:`pldemu.pool`: a mutant caught by its checks keeps the job, one that
deadlocks ends it, and the next gets a new one), with the mutant's recommended iteration budget unless
``--iters`` is given, and prints one row per mutant and seed. A control (``must_pass``) must survive.

Exit codes: 0 no failure (``--all-mutants``: every mutant caught with an expected kind and every
control passed); 1 a failure was found (``--all-mutants``: a mutant survived or was caught only by an
unexpected kind, or a control failed); 2 bad arguments; 3 a deadlock or crash; 124 the job outlived
``--job-timeout`` while still progressing (reported with the iterations it completed, not as a deadlock).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shlex
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pldemu.cli import common
from pldemu.cli.args import (
    FLAGS,
    add_collective_arguments,
    call_request,
    check_applies,
    collective_argv,
    flag,
)
from pldemu.collectives import COLLECTIVE_NAMES
from pldemu.harness import injob
from pldemu.ir import DType
from pldemu.job import exits, flags
from pldemu.job.argtypes import positive_int
from pldemu.job.exits import EXIT_ERROR, EXIT_FAIL, EXIT_JOB_TIMEOUT, EXIT_OK, EXIT_USAGE, UsageError
from pldemu.job.launch import LOCAL
from pldemu.job.load import load_program
from pldemu.job.prelaunch import add_force_argument, check_before_launch
from pldemu.pool.client import JobPool
from pldemu.runtime.options import RuntimeOptions

EXIT_FOUND = EXIT_FAIL
"""A failure was found (``--all-mutants``: a mutant survived, or a control failed)."""

DEFAULT_RANKS = 4
DEFAULT_ITERS = 1000
DEFAULT_SIZE = 64
DEFAULT_BLOCK = 10
DEFAULT_JITTER = 50.0
DEFAULT_TIMEOUT = 3.0
"""Seconds a wait may block before it is a deadlock: small, because a stress run wants to see a hang
quickly; a legitimate wait at 4 oversubscribed ranks takes milliseconds."""
DEFAULT_JOB_TIMEOUT = 1800.0
MUTANT_JOB_TIMEOUT = 300.0


EPILOG = """\
schedules (all seeded by --seed and the rank: the same seed draws the same delays):
  --jitter US        sleep U[0, US) microseconds before every put/get/remote_load/notify/wait
  --straggler R:US   rank R sleeps US more before every primitive
  --skew US          every call starts after U[0, US) microseconds (ranks out of step)
  --visibility deferred
                     a put or window store lands only at the issuing rank's next notify, or at a
                     seeded random later point; peers may read the value from before it

failure kinds:
  wrong-data  a result element differs from the oracle (first index, expected, seen)
  invariant   a signal cell went negative, Set mixed with AtomicAdd on a cell, a cell not 0 at rest,
              or a rank more than one call ahead
  deadlock    a wait timed out (--timeout): the wait-for report of every rank is printed
  race        the happens-before race detector found two unordered accesses to window elements

your own program (pldemu stress PROGRAM [--no-lower] [--no-cell-check] ...):
  runs the entry function back to back on one instance under the same schedules and checkpoints;
  the call flags (--mode, --size, --reduce, --root, --max-recv, --dtype) do not apply. A program
  has no oracle, so its kinds are invariant (cells not 0 at rest, negative cell, Set/AtomicAdd
  mixing), deadlock, race and error: there is no wrong-data. --no-cell-check skips the at-rest
  check for a program that leaves signal cells non-zero on purpose.

exit status: 0 no failure (--all-mutants: every mutant caught, every control passed), 1 failure
found (--all-mutants: a mutant survived), 2 bad arguments, 3 deadlock/crash/job timeout.
"""


def _target(text: str) -> str:
    """A collective's name, or the path of a user's program (``.pld`` or ``.py``, or an existing file)."""
    if text in COLLECTIVE_NAMES or is_program_path(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected a collective ({', '.join(COLLECTIVE_NAMES)}) or a program file (.pld or .py), got {text!r}")


def is_program_path(text: str | None) -> bool:
    """True when the positional argument names a user's program rather than a built-in collective."""
    if text is None or text in COLLECTIVE_NAMES:
        return False
    return text.endswith((".pld", ".py")) or Path(text).is_file()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu stress`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("collective", nargs="?", metavar="COLLECTIVE|PROGRAM", type=_target,
                        help=f"one of {', '.join(COLLECTIVE_NAMES)}, or a .pld program of yours "
                        "(not with --mutant/--all-mutants)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--mutant", metavar="NAME", default=None, help="run a catalogue mutant (pldemu mutants)")
    what.add_argument("--all-mutants", action="store_true", help="run every catalogue entry; print a table")
    add_collective_arguments(parser, default_size=DEFAULT_SIZE, shapes=False, dtype_default=None)
    common.add_ranks_argument(parser, DEFAULT_RANKS, what="; a mutant's own count")
    add_force_argument(parser)
    parser.add_argument("--iters", type=positive_int, default=None, metavar="K",
                        help=f"iterations at most (default {DEFAULT_ITERS}; a mutant's recommended budget)")
    parser.add_argument("--block", type=positive_int, default=DEFAULT_BLOCK, metavar="B",
                        help=f"iterations between all-rank checkpoints (cells at rest, invariants, races; "
                        f"default {DEFAULT_BLOCK})")
    parser.add_argument("--seeds", type=positive_int, default=1, metavar="N",
                        help="with --all-mutants: run each entry with seeds SEED..SEED+N-1 (median reported)")
    parser.add_argument("--no-lower", action="store_true",
                        help="PROGRAM only: run the program as written (it must already be lowered)")
    common.add_job_timeout_argument(parser, None, text=f"{DEFAULT_JOB_TIMEOUT:g}; {MUTANT_JOB_TIMEOUT:g} per mutant with "
                             "--all-mutants")
    flags.add_runtime_arguments(parser, "stress", defaults={"--jitter": DEFAULT_JITTER, "--timeout": DEFAULT_TIMEOUT},
                                 helps={"--no-cell-check": "PROGRAM only: do not require every signal cell to be 0 "
                                        "at each block end"})
    parser.add_argument("--result-file", default=None, help=argparse.SUPPRESS)


# ----------------------------------------------------------------------------------------------
# What to run
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One thing to stress: a collective call (optionally a mutant's lowering and fence policy) or a
    user's program."""

    label: str
    program: Any
    """The ``CollectiveProgram``; for a user's program the lowered, verified ``pldemu.ir.Program``."""
    lower: Any
    """A lowering function (None: the specified recipe)."""
    consume_fence: bool | None
    iters: int
    ranks: int
    source: str | None = None
    """The absolute path of a user's program (None: a collective or a mutant)."""


COLLECTIVE_FLAGS = (*FLAGS, "dtype")
"""The call flags (argparse dests) that describe a collective and mean nothing for a user's program."""


def _call_flags_given(args: argparse.Namespace) -> list[str]:
    """The call flags the command line set, as typed (``--max-recv``), ``--dtype`` included."""
    return [flag(dest) for dest in COLLECTIVE_FLAGS if getattr(args, dest, None) is not None]


def resolve_program(args: argparse.Namespace) -> Target:
    """The user's program the positional argument names, parsed, lowered (unless ``--no-lower``) and
    verified; raises UsageError (a parse, lowering or verification error, a flag that does not apply)."""
    if args.mutant is not None:
        raise UsageError("give either a PROGRAM or --mutant, not both")
    if call_flags := _call_flags_given(args):
        raise UsageError(f"{call_flags[0]} describes a built-in collective's call; it does not "
                         f"apply to a program ({args.collective})")
    ranks = args.ranks or DEFAULT_RANKS
    program = load_program(args.collective, lower=not args.no_lower, nranks=ranks,
                           options=flags.runtime_options(args), force=args.force)
    source = str(Path(args.collective).resolve())
    label = f"program {program.name} ({source}{'' if args.no_lower else ', lowered'})"
    return Target(label, program, None, None, args.iters or DEFAULT_ITERS, ranks, source)


def resolve(args: argparse.Namespace) -> Target:
    """The collective or mutant the arguments name; raises UsageError."""
    from pldemu.collectives import collective_program
    from pldemu.harness.plan import build, plan_calls, validate_cases
    from pldemu.job.resources import check_copies
    from pldemu.lowering import lower_composite_ops
    from pldemu.mutants import MUTANTS

    if is_program_path(args.collective):
        return resolve_program(args)
    for program_flag, set_ in (("--no-lower", args.no_lower), ("--no-cell-check", args.no_cell_check)):
        if set_:
            raise UsageError(f"{program_flag} applies to a PROGRAM, not to a built-in collective or a mutant")
    if args.mutant is not None:
        if args.collective is not None:
            raise UsageError("give either COLLECTIVE or --mutant, not both")
        m = MUTANTS.get(args.mutant)
        if m is None:
            raise UsageError(f"unknown mutant {args.mutant!r}; known: {', '.join(MUTANTS)}")
        if call_flags := _call_flags_given(args):
            raise UsageError(f"{call_flags[0]} does not apply to a mutant: its call is fixed")
        return Target(m.name, collective_program(m.spec), m.lowering(), None if m.consume_fence else False,
                      args.iters or m.iterations, args.ranks or m.ranks)
    if args.collective is None:
        raise UsageError("name a COLLECTIVE, a PROGRAM (.pld or .py), --mutant NAME or --all-mutants")
    ranks = args.ranks or DEFAULT_RANKS
    dtype = args.dtype or "fp32"
    request = dataclasses.replace(call_request(args), dtype=DType.parse(dtype), size=args.size or DEFAULT_SIZE)
    if request.collective != "all":
        try:
            check_applies(request.collective, args)
        except ValueError as err:
            raise UsageError(str(err)) from None
    (planned,) = validate_cases(plan_calls(request, ranks, DEFAULT_SIZE), ranks)
    cp = build(planned)
    check_before_launch([(lower_composite_ops(cp.program), cp.program)], ranks, flags.runtime_options(args),
                        force=args.force, copies=check_copies(ranks))
    label = args.collective + (f"/{args.mode}" if args.mode else "") + f" size={request.size} {dtype}"
    return Target(label, cp, None, None, args.iters or DEFAULT_ITERS, ranks)


def with_mutant_schedule(args: argparse.Namespace, mutant: str | None = None,
                         nranks: int | None = None) -> argparse.Namespace:
    """``args`` with the catalogue entry's schedule applied: its straggler, unless the user gave
    ``--straggler``, and for an entry of the fenced model (``Mutant.drop``) ``--visibility fenced
    --no-insert-fences`` whatever the flags say.

    A mutant whose bug needs one rank to be late at a precise point carries that schedule; running it
    without would make catching it a matter of luck (machine load). On fewer ranks than the entry's
    straggler rank, the last rank straggles. A dropped fence marker is a bug only where a notify
    releases nothing, and the runtime's InsertCommFence would put the marker back."""
    from pldemu.mutants import MUTANTS

    name = mutant if mutant is not None else args.mutant
    m = MUTANTS.get(name) if name is not None else None
    if m is None:
        return args
    changes: dict[str, Any] = {}
    if m.drop is not None:
        changes.update(visibility="fenced", no_insert_fences=True)
    if m.straggler is not None and args.straggler is None:
        ranks = nranks or args.ranks or m.ranks
        rank, us = m.straggler
        changes["straggler"] = (min(rank, ranks - 1), us)
    return argparse.Namespace(**{**vars(args), **changes}) if changes else args


def child_argv(args: argparse.Namespace, *, mutant: str | None = None, seed: int | None = None,
               iters: int | None = None, result_file: str | None = None) -> list[str]:
    """``stress ...`` arguments that run (or replay) this configuration, every option explicit."""
    argv = ["stress"]
    name = mutant if mutant is not None else args.mutant
    if name is not None:
        argv += ["--mutant", name]
    elif is_program_path(args.collective):
        # Absolute, so that the replay command works from any directory.
        argv.append(str(Path(args.collective).resolve()))
        if args.no_lower:
            argv.append("--no-lower")
    else:
        argv += [args.collective, *collective_argv(args)]
        if args.dtype is not None and args.dtype != "fp32":
            argv += ["--dtype", args.dtype]
    n = iters if iters is not None else args.iters
    if n is not None:
        argv += ["--iters", str(n)]
    argv += flags.runtime_argv(args, seed=args.seed if seed is None else seed)
    if args.block != DEFAULT_BLOCK:
        argv += ["--block", str(args.block)]
    if args.ranks is not None:
        argv += ["-n", str(args.ranks)]
    if result_file is not None:
        argv += ["--result-file", result_file]
    return argv


def replay_command(argv: Sequence[str], ranks: int) -> str:
    """The shell command that replays a run started with ``argv`` (``child_argv`` without a result file)."""
    words = list(argv)
    if "--result-file" in words:
        i = words.index("--result-file")
        del words[i : i + 2]
    if "-n" not in words:
        words += ["-n", str(ranks)]
    return shlex.join(["pldemu", *words])


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu stress``."""
    from pldemu.job.launch import in_mpi_job

    if in_mpi_job():
        from mpi4py import MPI

        return _run_in_job(with_mutant_schedule(args, nranks=MPI.COMM_WORLD.Get_size()))
    if args.all_mutants:
        if args.collective is not None:
            return exits.usage_error("stress", "--all-mutants runs the catalogue; give no COLLECTIVE")
        return run_all_mutants(args)
    if args.seeds != 1:
        return exits.usage_error("stress", "--seeds applies to --all-mutants")
    args = with_mutant_schedule(args)
    try:
        target = resolve(args)
    except UsageError as err:
        return exits.usage_error("stress", str(err))
    outcome, rc = _spawn_one(args, target.ranks, child_argv(args), _job_timeout(args, DEFAULT_JOB_TIMEOUT), None)
    replay = replay_command(child_argv(args), target.ranks)
    if outcome is None and rc == EXIT_USAGE:
        return EXIT_USAGE  # refused inside the job (e.g. a program pinned to another rank count), said there
    if outcome is None:
        print(f"# the job ended (exit {rc}) without a result; replay: {replay}", flush=True)
        return EXIT_ERROR
    print(outcome.describe(), flush=True)
    if outcome.caught:
        print(f"# replay: {replay}", flush=True)
    if outcome.kind == "timeout":
        return EXIT_JOB_TIMEOUT
    if outcome.kind in ("deadlock", "error"):
        return EXIT_ERROR
    return EXIT_FOUND if outcome.caught else EXIT_OK


def _job_timeout(args: argparse.Namespace, default: float) -> float:
    return float(args.job_timeout) if args.job_timeout is not None else default


def _spawn_one(args: argparse.Namespace, ranks: int, argv: list[str], job_timeout: float,
               log: Any, pool: JobPool | None = None) -> tuple[Any, int]:
    """Run one stress job (in ``pool``'s warm job of ``ranks`` when given); return its outcome (None if
    it left none) and exit code."""
    from pldemu.job.launch import TIMED_OUT, pldemu_argv, run_job
    from pldemu.job.outcome import StressOutcome, read_outcome, read_progress

    with tempfile.TemporaryDirectory(prefix="pldemu-stress-") as tmp:
        path = str(Path(tmp) / "outcome.json")
        start = time.monotonic()
        child = [*argv, "--result-file", path]
        if pool is not None:
            rc = pool.run(ranks, child, job_timeout, stdout=log, stderr=log)
        else:
            rc = run_job(ranks, pldemu_argv(child), job_timeout, stdout=log, stderr=log,
                         placement=common.placement(args))
        outcome = read_outcome(path)
        if outcome is None and rc == TIMED_OUT:
            # No rank reported a deadlock (each wait has its own deadline): the run was slow, not stuck.
            done = read_progress(path)
            outcome = StressOutcome("timeout", None, done, -1,
                                    f"the job outlived --job-timeout {job_timeout:g} s after {done} completed "
                                    "iterations, with no failure and no wait past its deadline; give it more time "
                                    "or fewer --iters", time.monotonic() - start)
    return outcome, rc


def _run_in_job(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from pldemu.harness.stress import StressJob, stress

    comm = MPI.COMM_WORLD
    me, nranks = comm.Get_rank(), comm.Get_size()
    try:
        if args.all_mutants:
            raise UsageError("--all-mutants runs from the launching process, not inside an MPI job")
        target = resolve(args)
        injob.check_job_size(args.ranks, nranks)
        if args.straggler is not None and args.straggler[0] >= nranks:
            raise UsageError(f"--straggler rank {args.straggler[0]} is not a rank of {nranks}")
        options = flags.runtime_options(args)
    except UsageError as err:
        return injob.refuse(comm, "stress", err)
    inst = _user_instance(comm, target, options) if target.source is not None else None
    if target.source is not None and inst is None:
        return EXIT_USAGE
    replay = replay_command(child_argv(args), nranks)
    if me == 0:
        print(f"# pldemu stress: {target.label}, {nranks} ranks, up to {target.iters} iterations, seed {args.seed}, "
              f"jitter {args.jitter:g} us, "
              + ("" if args.straggler is None else f"straggler {args.straggler[0]}:{args.straggler[1]:g} us, ")
              + f"visibility {args.visibility}", flush=True)
    job = StressJob(inst if inst is not None else target.program, target.iters, args.block, target.lower,
                    target.consume_fence, options.cell_check, args.result_file, replay)
    outcome = stress(comm, job, options)
    if inst is not None:
        inst.close()  # collective: stress returned on every rank (a failing rank ends the job instead)
    if args.result_file is not None:
        # The launcher reads the verdict from the result file. A zero exit keeps mpi4py's runner from
        # aborting the job (it calls MPI_Abort on a non-zero exit), which would only add noise.
        return EXIT_OK
    if me == 0:  # run directly under mpiexec: print the verdict here
        print(outcome.describe(), flush=True)
        if outcome.caught:
            print(f"# replay: {replay}", flush=True)
    return EXIT_FOUND if outcome.caught else EXIT_OK


def _user_instance(comm: Any, target: Target, options: RuntimeOptions) -> Any:
    """The instance of a user's program, or None after a usage error: raised alike on every rank before
    any window exists (e.g. the program pins another rank count); finalizing keeps mpi4py's runner
    from turning exit 2 into an abort."""
    from mpi4py import MPI

    from pldemu.runtime.errors import ProgramError
    from pldemu.runtime.interpreter import ProgramInstance

    try:
        return ProgramInstance(target.program, comm, options)
    except ProgramError as err:
        if comm.Get_rank() == 0:
            exits.usage_error("stress", str(err))
        MPI.Finalize()
        return None


# ----------------------------------------------------------------------------------------------
# --all-mutants
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MutantRow:
    """One mutant's results over the seeds."""

    name: str
    must_pass: bool
    expected: tuple[str, ...]
    outcomes: tuple[Any, ...]
    seconds: tuple[float, ...]

    @property
    def caught(self) -> int:
        return sum(1 for o in self.outcomes if o is not None and o.caught)

    @property
    def ok(self) -> bool:
        if self.must_pass:
            return all(o is not None and not o.caught for o in self.outcomes)
        return all(o is not None and o.kind in self.expected for o in self.outcomes)

    def kinds(self) -> str:
        ks = sorted({o.kind for o in self.outcomes if o is not None and o.kind is not None})
        return ",".join(ks) if ks else "-"

    def median_iterations(self) -> float | None:
        its = [(o.caught_at if o.caught_at is not None else o.iterations - 1) + 1
               for o in self.outcomes if o is not None and o.caught]
        return statistics.median(its) if its else None

    def format(self) -> str:
        n = len(self.outcomes)
        if self.must_pass:
            caught = "passed" if self.ok else f"FAILED {self.caught}/{n}"
        else:
            caught = f"yes {self.caught}/{n}" if self.caught == n else f"NO {self.caught}/{n}"
        med = self.median_iterations()
        iters = "-" if med is None else f"{med:g}"
        verdict = "ok" if self.ok else "UNEXPECTED"
        return (f"{self.name:<38} {caught:>10} {self.kinds():<24} {iters:>9} "
                f"{statistics.median(self.seconds):>8.1f}  {verdict}")


TABLE_HEAD = f"{'mutant':<38} {'caught':>10} {'kind':<24} {'med.iters':>9} {'med.s':>8}  result"


def _mutant_row(args: argparse.Namespace, name: str, m: Any, seeds: range, job_timeout: float, logdir: Path,
                pool: JobPool | None) -> MutantRow:
    """One catalogue entry, each seed its own run (printed as it ends)."""
    outcomes, secs = [], []
    ranks = args.ranks or m.ranks
    margs = with_mutant_schedule(args, name)
    for seed in seeds:
        argv = child_argv(margs, mutant=name, seed=seed, iters=args.iters or m.iterations)
        start = time.monotonic()
        with open(logdir / f"{name}.seed{seed}.log", "w") as log:
            outcome, _ = _spawn_one(margs, ranks, argv, job_timeout, log, pool)
        secs.append(time.monotonic() - start)
        outcomes.append(outcome)
        kind = "no result" if outcome is None else (outcome.kind or "passed")
        at = "" if outcome is None or outcome.iteration is None else f" at iteration {outcome.iteration}"
        model = " (fenced model: --visibility fenced --no-insert-fences)" if m.drop is not None else ""
        print(f"#   {name} seed {seed}: {kind}{at} ({secs[-1]:.1f} s){model}", flush=True)
        if outcome is not None and outcome.caught == m.must_pass:
            print(f"#     replay: {replay_command(argv, ranks)}", flush=True)
    return MutantRow(name, m.must_pass, m.expected, tuple(outcomes), tuple(secs))


def run_all_mutants(args: argparse.Namespace) -> int:
    """Run every catalogue entry (each seed its own run) and print the table."""
    from pldemu.mutants import MUTANTS

    if call_flags := _call_flags_given(args):
        return exits.usage_error("stress", f"{call_flags[0]} does not apply to --all-mutants")
    if args.no_lower or args.no_cell_check:
        return exits.usage_error("stress", "--no-lower and --no-cell-check apply to a PROGRAM, not to --all-mutants")
    seeds = range(args.seed, args.seed + args.seeds)
    job_timeout = _job_timeout(args, MUTANT_JOB_TIMEOUT)
    print(f"# pldemu stress --all-mutants: {len(MUTANTS)} entries x {len(seeds)} seeds, jitter {args.jitter:g} us, "
          f"visibility {args.visibility}, wait timeout {args.timeout:g} s", flush=True)
    rows: list[MutantRow] = []
    logdir = Path(tempfile.mkdtemp(prefix="pldemu-mutants-"))
    # The entries' jobs share warm jobs on this machine (pldemu.pool): an entry caught by its checks
    # keeps the job, one that deadlocks ends it with the same report as a job of its own.
    with JobPool() if common.placement(args) == LOCAL else contextlib.nullcontext() as pool:
        for name, m in MUTANTS.items():
            rows.append(_mutant_row(args, name, m, seeds, job_timeout, logdir, pool))
    print(flush=True)
    print(TABLE_HEAD, flush=True)
    for row in rows:
        print(row.format(), flush=True)
    bad = [r.name for r in rows if not r.ok]
    print(f"# {len(rows) - len(bad)} of {len(rows)} entries as expected"
          + (f"; unexpected: {', '.join(bad)} (job logs in {logdir})" if bad else ""), flush=True)
    if not bad:
        for f in logdir.iterdir():
            f.unlink()
        logdir.rmdir()
    return EXIT_OK if not bad else EXIT_FOUND


__all__ = ["COLLECTIVE_FLAGS", "MutantRow", "Target", "add_arguments", "child_argv", "is_program_path",
           "replay_command", "resolve", "resolve_program", "run", "run_all_mutants", "with_mutant_schedule"]
