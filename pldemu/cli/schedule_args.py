"""The adversarial-schedule flags shared by every command that runs programs (run, check, stress).

One definition of ``--jitter``, ``--straggler``, ``--skew`` and ``--visibility`` (plus ``run``'s
opt-in ``--invariants``): how they parse, how they become ``RuntimeOptions`` fields, and how they are
forwarded to the ranks of a spawned job, so a user's program gets exactly the schedules a built-in
collective gets. ``check`` and ``stress`` check the invariants by default (``--no-invariants``), so they
add the schedule flags without ``--invariants``; ``stress`` jitters by default.
"""

from __future__ import annotations

import argparse
from typing import Any

from pldemu.cli.argtypes import format_number, microseconds, straggler


def add_schedule_arguments(parser: argparse.ArgumentParser, *, jitter: float = 0.0,
                           invariants_flag: bool = True) -> None:
    """Add the schedule flags (off by default; ``jitter``: the default of ``--jitter``), and
    ``--invariants`` unless ``invariants_flag`` is False."""
    g = parser.add_argument_group("adversarial schedules (seeded by --seed and the rank; replayable)")
    g.add_argument("--jitter", type=microseconds, default=jitter, metavar="US",
                   help=f"random delay U[0, US) microseconds before every put/get/remote_load/notify/wait "
                        f"(default {jitter:g}: {'off' if not jitter else 'on'})")
    g.add_argument("--straggler", type=straggler, default=None, metavar="R:US",
                   help="rank R sleeps US microseconds more before every primitive")
    g.add_argument("--skew", type=microseconds, default=0.0, metavar="US",
                   help="random delay U[0, US) microseconds before every run of the program")
    g.add_argument("--visibility", choices=["eager", "deferred"], default="eager",
                   help="deferred: puts and window stores land at the issuing rank's next notify or a seeded "
                        "later point (see docs/races.md)")
    if invariants_flag:
        g.add_argument("--invariants", action="store_true",
                       help="check the protocol invariants (no negative cell, no Set/AtomicAdd mixing)")


def schedule_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``RuntimeOptions`` schedule fields the flags set (not ``invariants``: each command decides)."""
    return {"jitter_us": args.jitter, "straggler": args.straggler, "skew_us": args.skew,
            "visibility": args.visibility}


def schedule_argv(args: argparse.Namespace) -> list[str]:
    """The flags again, for the ranks of a spawned job (``--jitter`` always, the others when set)."""
    argv: list[str] = ["--jitter", format_number(args.jitter)]
    if args.straggler is not None:
        argv += ["--straggler", f"{args.straggler[0]}:{format_number(args.straggler[1])}"]
    if args.skew:
        argv += ["--skew", format_number(args.skew)]
    if args.visibility != "eager":
        argv += ["--visibility", args.visibility]
    if getattr(args, "invariants", False):
        argv.append("--invariants")
    return argv
