"""The core every ``pldemu`` subcommand shares: exit codes, the usage error, the job-size check, and one
definition of every runtime flag.

A runtime flag (``--timeout``, ``--windows``, ``--seed``, ``--races``, ``--jitter``, ...) is one
:class:`RuntimeFlag` in :data:`RUNTIME_FLAGS`: how it parses, which ``RuntimeOptions`` field it sets,
and how it is spelled again for the ranks of a spawned job (and for a replay line). The row names the
commands that take the flag; a command adds its flags (:func:`add_runtime_arguments`, with its own
defaults), builds its options with :func:`runtime_options` and forwards them with
:func:`runtime_argv`, so a new runtime knob is one row here (plus its ``RuntimeOptions`` field); no
command lists it again.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from pldemu.cli.argtypes import (
    format_number,
    host_list,
    host_shape,
    microseconds,
    nonneg_int,
    positive_float,
    positive_int,
    straggler,
)
from pldemu.runtime.launch import HOSTS_SCRIPT, LOCAL, TIMED_OUT, Placement, RankFailure, note_failure
from pldemu.runtime.options import (
    DEFAULT_OPTIONS,
    FENCE_POLICIES,
    VISIBILITY_MODES,
    WINDOW_BACKENDS,
    RuntimeOptions,
)

EXIT_OK = 0
"""Everything ran and every check passed."""
EXIT_FAIL = 1
"""A check failed: wrong results, signal cells not 0 at rest, invariant violations, races in ``check``;
``stress``: a failure found, or a mutant survived."""
EXIT_USAGE = 2
"""Bad input, refused on every rank before any MPI traffic."""
EXIT_ERROR = 3
"""A failure inside the job: deadlock, crash, a harness synchronisation that timed out."""
EXIT_RACES = 4
"""``pldemu run --races`` found races."""
EXIT_JOB_TIMEOUT = TIMED_OUT
"""The whole mpiexec job outlived its ``--job-timeout`` (124, the launcher's)."""


class UsageError(ValueError):
    """A bad command line or unusable input: one line ``pldemu CMD: error: ...``, exit 2, no traceback."""


def usage_error(command: str, message: str) -> int:
    """Print ``message`` as ``command``'s one-line error on stderr; return :data:`EXIT_USAGE`."""
    sys.stderr.write(f"pldemu {command}: error: {message}\n")
    sys.stderr.flush()
    return EXIT_USAGE


ABORT_GRACE = 0.5
"""Seconds between a failing rank's message and its MPI_Abort (see :func:`abort_with`)."""
NONPRIMARY_GRACE = 2.0
"""Seconds a rank that timed out after a lower rank did waits before aborting, so the lower rank's
wait-for report gets printed before the abort tears the job down."""


def say(text: str) -> None:
    """One write per message, so that ranks' messages do not interleave mid-line."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def abort_with(comm: Any, text: str, *, head: str = "", key: str = "", hint: str = "",
               full: bool = True) -> NoReturn:
    """End the whole job (exit 3) after this rank's failure ``text`` (empty: nothing to say).

    ``head`` is the command's prefix (``pldemu run: ``); ranks whose failures share ``key`` (default:
    the text) hit the same failure. Under a pldemu launcher the message is left for it, which prints
    each failure once with the ranks that hit it (:func:`pldemu.runtime.launch.failure_report`);
    elsewhere this rank prints ``HEAD rank R: TEXT`` and ``hint``. Then a pause before ``MPI_Abort``:
    peers on other hosts may still read our windows, and ``MPI_Abort`` kills every rank at once,
    including output still in a pipe between this rank and mpiexec."""
    from pldemu.mpi import progress_sleep
    from pldemu.runtime.launch import abort_job

    if text:
        _tell(RankFailure(comm.Get_rank(), text, head, key, hint, full))
    progress_sleep(comm, ABORT_GRACE)  # peers on other hosts may still be reading our windows
    abort_job(comm, EXIT_ERROR)


def _tell(failure: RankFailure) -> None:
    """Leave ``failure`` for the launcher that spawned this job, or print it when there is none."""
    if not note_failure(failure):
        say(failure.line + (f"\n{failure.hint}" if failure.hint else ""))


def abort_on_error(comm: Any, head: str, err: BaseException, hint: str = "") -> NoReturn:
    """End the job after ``err`` (a refused access, a program error): ranks that fail at one program
    location with one error type are one failure (their messages name their own ranks)."""
    from pldemu.runtime.errors import failure_key

    abort_with(comm, f"{type(err).__name__}: {err}", head=head, key=failure_key(err), hint=hint)


DEADLOCK_KEY = "DeadlockError: a wait timed out"
"""What every rank whose wait gave up has in common (the rank that saw it first prints the report)."""


def abort_on_deadlock(comm: Any, head: str, err: Any, hint: str = "") -> NoReturn:
    """End the job after a ``DeadlockError``: the rank that saw the deadlock first gives the whole
    wait-for report, every other rank one line, so the graph is printed once."""
    if err.primary:
        abort_with(comm, str(err), head=head, key=DEADLOCK_KEY, hint=hint)
    from pldemu.mpi import progress_sleep

    _tell(RankFailure(comm.Get_rank(), f"{err.message} (the wait-for report comes from a lower rank)", head,
                      DEADLOCK_KEY, hint, full=False))
    progress_sleep(comm, NONPRIMARY_GRACE)  # the lower rank reads our windows for its report
    abort_with(comm, "")


def check_job_size(requested: int | None, size: int) -> None:
    """Refuse (UsageError) a ``-n`` that disagrees with the MPI job this rank is part of."""
    if requested is not None and requested != size:
        raise UsageError(f"-n {requested} but this MPI job has {size} ranks")


def add_ranks_argument(parser: argparse.ArgumentParser, default: int, *, what: str = "") -> None:
    """``-n/--ranks N``: the job's size (None when not given; inside an MPI job: the job's size), and
    where the ranks run (``--sim-hosts``, ``--hosts``, ``--hostfile``; see :func:`settle_placement`)."""
    parser.add_argument("-n", "--ranks", type=positive_int, default=None, metavar="N",
                        help=f"number of MPI ranks (default {default}{what}, or what the hosts below "
                             "imply; inside an MPI job: its size)")
    group = parser.add_argument_group("hosts (default: every rank on this machine; see docs/multihost.md)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--sim-hosts", type=host_shape, default=None, metavar="HxR",
                       help="H simulated hosts of R ranks each: network namespaces on a private bridge, "
                            "TCP between them (root; scripts/hosts.sh); -n defaults to H*R")
    where.add_argument("--hosts", type=host_list, default=None, metavar="HOST:N,...",
                       help="run on these hosts with N ranks each (mpiexec -hosts); -n defaults to the sum")
    where.add_argument("--hostfile", default=None, metavar="FILE", help="mpiexec's host file (mpiexec -f FILE)")


def settle_placement(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``placement`` (a :class:`~pldemu.runtime.launch.Placement`) and ``ranks`` filled
    in from the host flags of :func:`add_ranks_argument`; a ``-n`` the hosts contradict, or a hostfile
    that cannot be read, is a UsageError. Commands without those flags get ``LOCAL``."""
    if "sim_hosts" not in vars(args):
        return args
    hostfile = args.hostfile
    if hostfile is not None:
        if not Path(hostfile).is_file():
            raise UsageError(f"--hostfile {hostfile}: no such file")
        hostfile = str(Path(hostfile).resolve())
    if args.sim_hosts is not None and not HOSTS_SCRIPT.is_file():
        raise UsageError(f"--sim-hosts needs {HOSTS_SCRIPT} (the scripts/ folder of a pldemu checkout)")
    where = Placement(sim_hosts=args.sim_hosts, hosts=args.hosts or (), hostfile=hostfile)
    implied = where.ranks
    if implied is not None and args.ranks is not None and args.ranks != implied:
        raise UsageError(f"-n {args.ranks} but {where.describe()} run {implied} ranks")
    return argparse.Namespace(**{**vars(args), "placement": where, "ranks": args.ranks or implied})


def placement(args: argparse.Namespace) -> Placement:
    """Where the job of the parsed command line runs (:func:`settle_placement`)."""
    where: Placement = getattr(args, "placement", LOCAL)
    return where


def add_job_timeout_argument(parser: argparse.ArgumentParser, default: float | None, *, text: str = "") -> None:
    """``--job-timeout S``: seconds the whole mpiexec job may take (the launcher's, not a rank's)."""
    parser.add_argument("--job-timeout", type=positive_float, default=default, metavar="S",
                        help=f"seconds the whole mpiexec job may take (default {text or format_number(default or 0)})")


# ----------------------------------------------------------------------------------------------
# Runtime flags
# ----------------------------------------------------------------------------------------------


def _absolute(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else None


def _straggler_text(value: tuple[int, float]) -> str:
    return f"{value[0]}:{format_number(value[1])}"


SCHEDULE_GROUP = "adversarial schedules (seeded by --seed and the rank; replayable)"


@dataclasses.dataclass(frozen=True)
class RuntimeFlag:
    """One command-line flag that sets one ``RuntimeOptions`` field.

    ``type`` parses the text (None: a switch, ``store_true``; ``negated``: the switch turns the field
    off, ``--no-races``). ``convert`` maps the parsed value to the field's (paths become absolute).
    A value is forwarded to a spawned job unless it is the field's ``RuntimeOptions`` default;
    ``always`` flags are forwarded every time (a replay line names them even at their default).
    ``help`` may use ``%(default)s``. ``commands``: the subcommands that take the flag."""

    option: str
    field: str
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    negated: bool = False
    always: bool = False
    text: Callable[[Any], str] = str
    convert: Callable[[Any], Any] | None = None
    group: str | None = None
    commands: frozenset[str] = frozenset()

    @property
    def dest(self) -> str:
        """The argparse dest (``--stage-pieces`` -> ``stage_pieces``)."""
        return self.option[2:].replace("-", "_")

    def add(self, parser: argparse._ActionsContainer, default: Any) -> None:
        """Add the flag to ``parser`` (``default``: the command's; None for a switch or the field's)."""
        if self.type is None and self.choices is None:
            parser.add_argument(self.option, action="store_true", help=self.help)
            return
        parser.add_argument(self.option, type=self.type or str, choices=self.choices, metavar=self.metavar,
                            default=getattr(DEFAULT_OPTIONS, self.field) if default is None else default,
                            help=self.help)

    def value(self, parsed: Any) -> Any:
        """The ``RuntimeOptions`` field value of the parsed argument."""
        if self.negated:
            return not parsed
        return self.convert(parsed) if self.convert is not None else parsed

    def argv(self, parsed: Any) -> list[str]:
        """The flag spelled again for a spawned job (empty when there is nothing to say)."""
        if self.type is None and self.choices is None:
            return [self.option] if parsed else []
        if parsed is None or (not self.always and self.value(parsed) == getattr(DEFAULT_OPTIONS, self.field)):
            return []
        return [self.option, self.text(self.value(parsed))]


RUN_CHECK_STRESS = frozenset({"run", "check", "stress"})
EVERY_RUNNER = frozenset({*RUN_CHECK_STRESS, "demo", "bench"})

_FLAGS = (
    RuntimeFlag("--seed", "seed", "seed of the data and of every randomised schedule (default %(default)s)",
                nonneg_int, always=True, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--jitter", "jitter_us", "random delay U[0, US) microseconds before every put/get/remote_load/"
                "notify/wait (default %(default)g; 0: off)", microseconds, "US", always=True, text=format_number,
                group=SCHEDULE_GROUP, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--straggler", "straggler", "rank R sleeps US microseconds more before every primitive", straggler,
                "R:US", text=_straggler_text, group=SCHEDULE_GROUP, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--skew", "skew_us", "random delay U[0, US) microseconds before every run of the program",
                microseconds, "US", text=format_number, group=SCHEDULE_GROUP, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--visibility", "visibility", "deferred: puts and window stores land at the issuing rank's next "
                "notify or a seeded later point; fenced: only system.fence lands them and scalar window reads "
                "go through a line cache that system.cacheinvalid cleans, InsertCommFence placing both (see "
                "docs/races.md)", choices=VISIBILITY_MODES, group=SCHEDULE_GROUP, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--fence-policy", "fence_policy", "with --visibility fenced: latest (default: a write stays "
                "pending until a system.fence, so a missing fence gives wrong data every call) or random (it may "
                "land at a seeded later point too)", choices=FENCE_POLICIES, group=SCHEDULE_GROUP,
                commands=RUN_CHECK_STRESS),
    RuntimeFlag("--no-insert-fences", "insert_fences", "with --visibility fenced: run the program as written, "
                "without the InsertCommFence pass", negated=True, group=SCHEDULE_GROUP, commands=RUN_CHECK_STRESS),
    RuntimeFlag("--invariants", "invariants", "check the protocol invariants (no negative cell, no Set/AtomicAdd "
                "mixing)", group=SCHEDULE_GROUP, commands=frozenset({"run"})),
    RuntimeFlag("--no-invariants", "invariants", "do not check the protocol invariants as the program runs (no "
                "negative cell, never Set and AtomicAdd on one cell; pldemu.runtime.invariants); the harness's "
                "own checks stay", negated=True, commands=frozenset({"check", "stress"})),
    RuntimeFlag("--no-cell-check", "cell_check", "do not require every signal cell to be 0 at rest (at each block "
                "end, and after a single run checked with --invariants): a program that leaves cells non-zero on "
                "purpose", negated=True, commands=frozenset({"run", "stress"})),
    RuntimeFlag("--races", "race_detect", "detect data races on windows (happens-before; see docs/races.md)",
                commands=frozenset({"run", "check"})),
    RuntimeFlag("--no-races", "race_detect", "do not run the race detector", negated=True,
                commands=frozenset({"stress"})),
    RuntimeFlag("--windows", "windows", "RMA window back end (default auto: shared memory when all ranks share a "
                "node; across nodes hybrid when a node has several ranks, else rma)", choices=WINDOW_BACKENDS, commands=EVERY_RUNNER),
    RuntimeFlag("--timeout", "timeout", "seconds one wait may block before it is a deadlock and the wait-for "
                "report is printed (default %(default)g)", positive_float, "S", always=True, text=format_number,
                commands=EVERY_RUNNER),
    RuntimeFlag("--no-blocking-waits", "blocking_waits", "waits back off with timed sleeps between polls "
                "instead of sleeping in the kernel on the cell until the notify (the fallback where futexes "
                "are unavailable)", negated=True, commands=EVERY_RUNNER),
    RuntimeFlag("--stage-pieces", "stage_pieces", "move every put/get one stage-sized piece at a time (a peer can "
                "see a partly landed transfer, as on the hardware)", commands=frozenset({"run", "check"})),
    RuntimeFlag("--trace", "trace", "write a Chrome/Perfetto trace of every rank's ops (draw it with pldemu "
                "trace-plot)", str, "FILE.json", convert=_absolute, commands=frozenset({"run", "check"})),
)

RUNTIME_FLAGS: Mapping[str, RuntimeFlag] = MappingProxyType({f.option: f for f in _FLAGS})
"""Every runtime flag by its option, in the order a spawned job's command line spells them."""


def add_runtime_arguments(parser: argparse.ArgumentParser, command: str,
                          defaults: Mapping[str, Any] | None = None,
                          helps: Mapping[str, str] | None = None) -> None:
    """Add every runtime flag ``command`` takes (``RuntimeFlag.commands``) to ``parser``.

    ``defaults``: the command's default of a flag (by option; otherwise the ``RuntimeOptions``
    default); ``helps``: a command's own wording of a flag's help (what it means for that command)."""
    groups: dict[str, argparse._ActionsContainer] = {}
    for f in RUNTIME_FLAGS.values():
        if command not in f.commands:
            continue
        where: argparse._ActionsContainer = parser
        if f.group is not None:
            where = groups.setdefault(f.group, parser.add_argument_group(f.group))
        if helps and f.option in helps:
            f = dataclasses.replace(f, help=helps[f.option])
        f.add(where, (defaults or {}).get(f.option))


def options_argv(options: RuntimeOptions, command: str = "run") -> list[str]:
    """``options`` spelled as ``command``'s flags (what :func:`runtime_argv` forwards for parsed
    flags, for options built in Python, e.g. by :func:`pldemu.launch`). A field that differs from
    its default and that no flag of ``command`` sets is a ``ValueError``."""
    argv: list[str] = []
    covered: set[str] = set()
    for f in RUNTIME_FLAGS.values():
        if command not in f.commands:
            continue
        covered.add(f.field)
        value = getattr(options, f.field)
        if f.type is None and f.choices is None:  # a switch: given when it moves the field off its default
            on = value is not f.negated
            argv += [f.option] if on and value != getattr(DEFAULT_OPTIONS, f.field) else []
        elif f.always or value != getattr(DEFAULT_OPTIONS, f.field):
            argv += [f.option, f.text(value)]
    for field in dataclasses.fields(RuntimeOptions):
        if field.name not in covered and getattr(options, field.name) != getattr(DEFAULT_OPTIONS, field.name):
            raise ValueError(f"RuntimeOptions.{field.name} has no flag of pldemu {command}: it cannot be set "
                             "for a launched job")
    return argv


def _given(args: argparse.Namespace) -> list[tuple[RuntimeFlag, Any]]:
    """The runtime flags the command's parser added (their dests are in ``args``), with their values."""
    found = vars(args)
    return [(f, found[f.dest]) for f in RUNTIME_FLAGS.values() if f.dest in found]


def runtime_options(args: argparse.Namespace, **fields: Any) -> RuntimeOptions:
    """The ``RuntimeOptions`` the parsed runtime flags describe (``fields`` override or add fields);
    a value ``RuntimeOptions`` refuses is a UsageError."""
    kwargs = {f.field: f.value(v) for f, v in _given(args)}
    try:
        return RuntimeOptions(**{**kwargs, **fields})
    except ValueError as err:
        raise UsageError(str(err)) from None


def runtime_argv(args: argparse.Namespace, **values: Any) -> list[str]:
    """The parsed runtime flags spelled again for a spawned job (``values``: by dest, replacing the
    parsed ones, e.g. ``seed=3``)."""
    return [w for f, v in _given(args) for w in f.argv(values.get(f.dest, v))]


__all__ = [
    "EXIT_ERROR",
    "EXIT_FAIL",
    "EXIT_JOB_TIMEOUT",
    "EXIT_OK",
    "EXIT_RACES",
    "EXIT_USAGE",
    "RUNTIME_FLAGS",
    "SCHEDULE_GROUP",
    "RuntimeFlag",
    "UsageError",
    "abort_on_deadlock",
    "abort_on_error",
    "abort_with",
    "add_job_timeout_argument",
    "add_ranks_argument",
    "add_runtime_arguments",
    "check_job_size",
    "options_argv",
    "placement",
    "runtime_argv",
    "runtime_options",
    "say",
    "settle_placement",
    "usage_error",
]
