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
from collections.abc import Callable, Sequence
from importlib import import_module
from types import MappingProxyType
from typing import NoReturn

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
    }
)


class Parser(argparse.ArgumentParser):
    """argparse with pldemu's usage errors: the one-line error and where to look, not the whole usage
    (exit 2, as every bad input)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pldemu", description="Run pld.tensor.* collectives for real on MPI.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, (module, help_text) in SUBCOMMANDS.items():
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


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pldemu`` command. SIGTERM, SIGHUP and Ctrl-C end it with 128 + the signal number after
    killing whatever job it started (:func:`pldemu.job.launch.interruptible`), without a traceback."""
    from pldemu.cli.common import settle_placement
    from pldemu.job.exits import UsageError, usage_error
    from pldemu.job.launch import Interrupted, interruptible

    parser = build_parser()
    args = parser.parse_args(argv)
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
