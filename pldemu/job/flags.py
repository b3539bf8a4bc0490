"""Every runtime flag defined once: how it parses, which ``RuntimeOptions`` field it sets, and how it is
spelled again for the ranks of a spawned job.

A runtime flag (``--timeout``, ``--windows``, ``--seed``, ``--races``, ``--jitter``, ...) is one
:class:`RuntimeFlag` in :data:`RUNTIME_FLAGS`. The row names the commands that take the flag; a
command adds its flags (:func:`add_runtime_arguments`, with its own defaults), builds its options with
:func:`runtime_options` and forwards them with :func:`runtime_argv`; :func:`options_argv` spells
options built in Python (``pldemu.launch``). A new runtime knob is one row here (plus its
``RuntimeOptions`` field); no command lists it again. Launcher side: no MPI.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pldemu.job.argtypes import format_number, microseconds, nonneg_int, positive_float, straggler
from pldemu.job.exits import UsageError
from pldemu.runtime.options import (
    DEFAULT_OPTIONS,
    FENCE_POLICIES,
    TASK_ORDERS,
    VISIBILITY_MODES,
    WINDOW_BACKENDS,
    RuntimeOptions,
)


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
SCHEDULED = frozenset({*RUN_CHECK_STRESS, "python"})
"""The commands that take the seed and the schedule flags (``python``: every compiled call of a pypto script)."""
EVERY_RUNNER = frozenset({*RUN_CHECK_STRESS, "demo", "bench", "python"})

_FLAGS = (
    RuntimeFlag("--seed", "seed", "seed of the data and of every randomised schedule (default %(default)s)",
                nonneg_int, always=True, commands=SCHEDULED),
    RuntimeFlag("--jitter", "jitter_us", "random delay U[0, US) microseconds before every put/get/remote_load/"
                "notify/wait (default %(default)g; 0: off)", microseconds, "US", always=True, text=format_number,
                group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--straggler", "straggler", "rank R sleeps US microseconds more before every primitive", straggler,
                "R:US", text=_straggler_text, group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--skew", "skew_us", "random delay U[0, US) microseconds before every run of the program",
                microseconds, "US", text=format_number, group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--visibility", "visibility", "deferred: puts and window stores land at the issuing rank's next "
                "notify or a seeded later point; fenced: only system.fence lands them and scalar window reads "
                "go through a line cache that system.cacheinvalid cleans, InsertCommFence placing both (see "
                "docs/races.md)", choices=VISIBILITY_MODES, group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--fence-policy", "fence_policy", "with --visibility fenced: latest (default: a write stays "
                "pending until a system.fence, so a missing fence gives wrong data every call) or random (it may "
                "land at a seeded later point too)", choices=FENCE_POLICIES, group=SCHEDULE_GROUP,
                commands=SCHEDULED),
    RuntimeFlag("--no-insert-fences", "insert_fences", "with --visibility fenced: run the program as written, "
                "without the InsertCommFence pass and the toolchain's drain before each notify (PTOAS#718)",
                negated=True, group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--task-order", "task_order", "how one rank's tasks (pl.at, pl.spmd, kernel calls) run: random "
                "(default: concurrently, a scheduler seeded by --seed, the rank and the call choosing among the ready "
                "ones), fifo (concurrently, the Orchestration first, then submission order) or program (each at its "
                "submission; see docs/task-graph.md)", choices=TASK_ORDERS, group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--cores", "cores", "clusters (1 AIC + 2 AIV each) one rank's tasks share (default: the platform's, 8 "
                "for pypto's simulators)", nonneg_int, "N", group=SCHEDULE_GROUP, commands=SCHEDULED),
    RuntimeFlag("--invariants", "invariants", "check the protocol invariants (no negative cell, no Set/AtomicAdd "
                "mixing)", group=SCHEDULE_GROUP, commands=frozenset({"run", "python"})),
    RuntimeFlag("--no-invariants", "invariants", "do not check the protocol invariants as the program runs (no "
                "negative cell, never Set and AtomicAdd on one cell; pldemu.runtime.instrument.invariants); the harness's "
                "own checks stay", negated=True, commands=frozenset({"check", "stress"})),
    RuntimeFlag("--no-cell-check", "cell_check", "do not require every signal cell to be 0 at rest (at each block "
                "end, and after a single run checked with --invariants): a program that leaves cells non-zero on "
                "purpose", negated=True, commands=frozenset({"run", "stress"})),
    RuntimeFlag("--truncation-warn", "truncation_warn", "a tdiv / trem (C's truncating division and remainder, "
                "what pypto's code generators emit for // and %%) whose value differs from floor semantics is a "
                "warning, not a failure (exit 1)", commands=frozenset({"run"})),
    RuntimeFlag("--races", "race_detect", "detect data races on windows (happens-before; see docs/races.md)",
                commands=frozenset({"run", "check"})),
    RuntimeFlag("--no-races", "race_detect", "do not run the race detector", negated=True,
                commands=frozenset({"stress", "python"})),
    RuntimeFlag("--windows", "windows", "RMA window back end (default auto: shared memory when all ranks share a "
                "node; across nodes hybrid when a node has several ranks, else rma)", choices=WINDOW_BACKENDS, commands=EVERY_RUNNER),
    RuntimeFlag("--timeout", "timeout", "seconds one wait may block before it is a deadlock and the wait-for "
                "report is printed (default %(default)g)", positive_float, "S", always=True, text=format_number,
                commands=EVERY_RUNNER),
    RuntimeFlag("--no-blocking-waits", "blocking_waits", "waits back off with timed sleeps between polls "
                "instead of sleeping in the kernel on the cell until the notify (the fallback where futexes "
                "are unavailable)", negated=True, commands=EVERY_RUNNER),
    RuntimeFlag("--stage-pieces", "stage_pieces", "move every put/get one stage-sized piece at a time (a peer can "
                "see a partly landed transfer, as on the hardware)", commands=frozenset({"run", "check", "python"})),
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


def runtime_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ``RuntimeOptions`` fields the parsed runtime flags set, by field name (a flag parsed as None,
    a default the command leaves open, sets nothing)."""
    return {f.field: f.value(v) for f, v in _given(args) if v is not None}


def runtime_options(args: argparse.Namespace, **fields: Any) -> RuntimeOptions:
    """The ``RuntimeOptions`` the parsed runtime flags describe (``fields`` override or add fields);
    a value ``RuntimeOptions`` refuses is a UsageError."""
    try:
        return RuntimeOptions(**{**runtime_fields(args), **fields})
    except ValueError as err:
        raise UsageError(str(err)) from None


def runtime_argv(args: argparse.Namespace, **values: Any) -> list[str]:
    """The parsed runtime flags spelled again for a spawned job (``values``: by dest, replacing the
    parsed ones, e.g. ``seed=3``)."""
    return [w for f, v in _given(args) for w in f.argv(values.get(f.dest, v))]


__all__ = ["EVERY_RUNNER", "RUNTIME_FLAGS", "RUN_CHECK_STRESS", "SCHEDULED", "SCHEDULE_GROUP", "RuntimeFlag",
           "add_runtime_arguments", "options_argv", "runtime_argv", "runtime_fields", "runtime_options"]
