"""``pldemu mutants``: the catalogue of known-broken recipe variants (``pldemu.mutants``).

    pldemu mutants                   # one row per mutant: name, collective, expected, description, models
    pldemu mutants --tsv             # every field, tab-separated, one line per mutant (for scripts)
    pldemu mutants NAME              # one mutant in full: spec, variant, run budget, conditions
    pldemu mutants NAME --show       # ... plus a unified diff of its lowered program against the correct one
    pldemu mutants NAME --show --full  # ... plus the whole lowered mutant program

An unknown NAME (or --show without NAME) is an error: message on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import TextIO

from pldemu.collectives import CollectiveSpec
from pldemu.ir.printer import format_program
from pldemu.job.exits import EXIT_OK, usage_error
from pldemu.mutants import CONDITIONS, MUTANTS, Mutant

EPILOG = """\
expected failure kinds:
  wrong-data  a result differs from the collective's definition
  invariant   a signal cell is not 0 once all ranks retired their calls (or negative at any time)
  deadlock    a wait never completes (needs bounded waits)
  race        a race detector flags a window written while a peer may still read it
  "must pass" marks a fixed recipe that has to survive the same conditions as its mutants.

exit status: 0 ok, 2 unknown mutant or bad arguments.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu mutants`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("name", nargs="?", metavar="NAME", help="one mutant of the catalogue")
    parser.add_argument("--show", action="store_true",
                        help="print the unified diff of NAME's lowered program against the correct recipe")
    parser.add_argument("--full", action="store_true", help="with --show, also print the whole lowered mutant")
    parser.add_argument("--tsv", action="store_true", help="list every field tab-separated (no NAME)")


def run(args: argparse.Namespace) -> int:
    """List the catalogue or describe one mutant; 0 on success, 2 on a bad NAME or option."""
    error = _usage_error(args)
    if error is not None:
        return usage_error("mutants", error)
    out = sys.stdout
    if args.name is None:
        (_write_tsv if args.tsv else _write_table)(out, list(MUTANTS.values()))
        return EXIT_OK
    mutant = MUTANTS[args.name]
    _write_details(out, mutant)
    if args.show:
        _write_diff(out, mutant)
        if args.full:
            out.write(f"\n# lowered program of {mutant.name}\n")
            out.write(format_program(mutant.lower()))
    return EXIT_OK


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.name is not None and args.name not in MUTANTS:
        return f"unknown mutant {args.name!r}; known: {', '.join(MUTANTS)}"
    if args.show and args.name is None:
        return "--show needs a mutant NAME"
    if args.full and not args.show:
        return "--full applies with --show"
    if args.tsv and args.name is not None:
        return "--tsv lists the whole catalogue; give no NAME"
    return None


def _expected(m: Mutant) -> str:
    return "must pass" if m.must_pass else ",".join(m.expected)


def _write_table(out: TextIO, mutants: Sequence[Mutant]) -> None:
    """One row per mutant; the models column comes last because it is the longest."""
    head = ("NAME", "COLLECTIVE", "EXPECTED", "DESCRIPTION", "MODELS")
    rows = [(m.name, m.collective, _expected(m), m.description, m.models) for m in mutants]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for row in [head, *rows]:
        cells = [text.ljust(w) for text, w in zip(row, widths, strict=False)]
        out.write("  ".join([*cells, row[-1]]).rstrip() + "\n")


def _write_tsv(out: TextIO, mutants: Sequence[Mutant]) -> None:
    fields = ("name", "collective", "expected", "must_pass", "consume_fence", "iterations", "ranks",
              "conditions", "straggler", "variant", "drop", "description", "models")
    out.write("\t".join(fields) + "\n")
    for m in mutants:
        values = (m.name, m.collective, ",".join(m.expected), str(m.must_pass).lower(),
                  str(m.consume_fence).lower(), str(m.iterations), str(m.ranks), ",".join(m.conditions),
                  "" if m.straggler is None else f"{m.straggler[0]}:{m.straggler[1]:g}",
                  ",".join(m.variant.deviations()), "" if m.drop is None else str(m.drop), m.description, m.models)
        out.write("\t".join(values) + "\n")


def _spec_text(spec: CollectiveSpec) -> str:
    """The spec fields that matter for its collective, as ``key=value`` words."""
    words = [spec.name]
    if spec.name == "allreduce":
        words.append(f"mode={spec.mode.name}")
    words.append(f"dtype={spec.dtype.value}")
    if spec.name != "barrier":
        words.append(f"size={spec.size}")
    if spec.name in ("allreduce", "reduce_scatter"):
        words.append(f"op={spec.reduce.name}")
    if spec.name == "broadcast":
        words.append(f"root={spec.root}")
    if spec.name == "all_to_all_v":
        words.append(f"max_recv={spec.max_recv}")
    return " ".join(words)


def _write_details(out: TextIO, m: Mutant) -> None:
    fence = "harness default" if m.consume_fence else "none (never fence between calls)"
    usage = "its fences" if m.drop is not None else "the usage"
    variant = ", ".join(m.variant.deviations()) or f"the specified recipe (the mutant is {usage})"
    out.write(f"# {'control' if m.must_pass else 'mutant'} {m.name}: {m.description}\n")
    out.write(f"# models:     {m.models}\n")
    out.write(f"# call:       {_spec_text(m.spec)}\n")
    out.write(f"# variant:    {variant}\n")
    out.write(f"# expected:   {_expected(m)}\n")
    out.write(f"# run:        {m.ranks} ranks, {m.iterations} back-to-back calls, consume fence: {fence}\n")
    if m.straggler is not None:
        out.write(f"# schedule:   --straggler {m.straggler[0]}:{m.straggler[1]:g} (unless the run names its own)\n")
    if m.drop is not None:
        out.write(f"# fences:     InsertCommFence without {m.drop}; runs with --visibility fenced --no-insert-fences\n")
    for i, key in enumerate(m.conditions):
        out.write(f"# {'conditions:' if i == 0 else '':<11} {key}: {CONDITIONS[key]}\n")


def _write_diff(out: TextIO, m: Mutant) -> None:
    correct, mutant = format_program(m.lower_correct()), format_program(m.lower())
    if correct == mutant:
        out.write("\n# the lowered program is identical to the correct recipe: this mutant is about usage "
                  f"(consume_fence={m.consume_fence})\n")
        return
    out.write("\n")
    out.writelines(difflib.unified_diff(correct.splitlines(keepends=True), mutant.splitlines(keepends=True),
                                        f"{m.spec.name} (correct recipe)", f"{m.spec.name} (mutant {m.name})"))


__all__ = ["add_arguments", "run"]
