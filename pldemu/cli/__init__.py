"""The ``pldemu`` command line: one module per subcommand (``pldemu.cli.commands``), registered in one table.

A command module never imports another. What they share: ``pldemu.cli.common`` (the job size and the
host placement flags, ``--job-timeout``), ``pldemu.cli.args`` (the flags of one collective call,
``--backend``), ``pldemu.cli.check_kinds`` (the tile and MX checks), and below the CLI
``pldemu.job`` (exit codes, ``UsageError``, the runtime-flag table, ``load_program``) and
``pldemu.harness`` (what every rank of a job runs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection, Sequence
from importlib import import_module
from types import MappingProxyType
from typing import NoReturn

from pldemu import __version__

# subcommand -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int.
SUBCOMMANDS = MappingProxyType(
    {
        "lower": ("pldemu.cli.commands.lower", "print a program before and after LowerCompositeOps"),
        "run": ("pldemu.cli.commands.run", "execute a program (.pld or Python builder file) on N MPI ranks"),
        "check": ("pldemu.cli.commands.check", "run a collective K times and check every iteration (nccl-tests style)"),
        "demo": ("pldemu.cli.commands.demo", "the 4-rank demonstration: allreduce + all_to_all_v in a loop, checked"),
        "mutants": ("pldemu.cli.commands.mutants", "list the catalogue of known-broken recipe variants"),
        "stress": ("pldemu.cli.commands.stress", "hunt for races: perturbed schedules until the first failure"),
        "trace-plot": ("pldemu.cli.commands.trace_plot", "draw a trace as per-rank swimlanes (PNG)"),
        "bench": ("pldemu.cli.commands.bench", "benchmark recipes against native MPI (nccl-tests style)"),
        "casts": ("pldemu.cli.commands.casts", "run NeuronEliminateCasts on a Neuron kernel (.nki): verdicts, bytes, errors"),
        "pytest": ("pldemu.cli.commands.pytest_run", "run pytest with the pypto layer: pypto's distributed tests on MPI ranks"),
        "python": ("pldemu.cli.commands.python_run", "run a Python script with the pypto layer: pypto's programs and "
                   "tutorials on MPI ranks"),
    }
)


class Parser(argparse.ArgumentParser):
    """argparse with pldemu's usage errors: the one-line error and where to look, not the whole usage
    (exit 2, as every bad input)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``pldemu`` parser. ``commands``: the subcommands whose modules are imported and whose
    arguments are added (default: all); the others are listed with their help line only, so that
    ``pldemu --help`` and one command's start-up import nothing of the commands not run."""
    parser = Parser(prog="pldemu", description="Run pld.tensor.* collectives for real on MPI.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, (module, help_text) in SUBCOMMANDS.items():
        if commands is not None and name not in commands:
            sub.add_parser(name, help=help_text, description=help_text)
            continue
        try:
            mod = import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue  # subcommand not built yet
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed. A subcommand whose module sets ``VERBATIM = "<dest>"`` (pytest) gets every word
    after its name unparsed in ``args.<dest>``: argparse would misread another program's options."""
    words = list(argv)
    module = SUBCOMMANDS.get(words[0]) if words else None
    dest = getattr(import_module(module[0]), "VERBATIM", None) if module is not None else None
    if dest is None:
        return parser.parse_args(words)
    args = parser.parse_args(words[:1])
    setattr(args, dest, words[1:])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pldemu`` command. SIGTERM, SIGHUP and Ctrl-C end it with 128 + the signal number after
    killing whatever job it started (:func:`pldemu.job.launch.interruptible`), without a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # The first word that is not an option names the command (the top level has no option but -h, --version).
    parser = build_parser([next((word for word in argv if not word.startswith("-")), "")])
    args = parse_command_line(parser, argv)
    from pldemu.cli.common import settle_placement
    from pldemu.job.exits import UsageError, usage_error
    from pldemu.job.launch import Interrupted, interruptible, startup_mark

    startup_mark("parsed")
    try:
        args = settle_placement(args)
    except UsageError as err:
        return usage_error(args.command, str(err))
    runner: Callable[[argparse.Namespace], int] = args._run
    try:
        with interruptible():
            return runner(args)
    except Interrupted as stop:
        print(f"pldemu: {stop}: the job and its processes were killed", file=sys.stderr, flush=True)
        return stop.exit_code


if __name__ == "__main__":
    sys.exit(main())
