"""``pldemu casts FILE``: run NeuronEliminateCasts on a Neuron kernel (``.nki`` text) and show what it did.

    pldemu casts pldemu/examples/neuron/canonical.nki --run --stats
    pldemu casts pldemu/examples/neuron/canonical.nki --gate3 docstring --run

Prints the kernel before and after the pass, one line per candidate cast (eliminated, with the producers
re-typed and the bytes counted; or kept, with the gate or bail that refused it), with ``--stats`` the
statistics registry, and with ``--run`` each output's max abs / relative error against a float64
execution, before and after, and whether the result after equals the fp32 reference bit for bit.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from pldemu.ir.parser import ParseError
from pldemu.job.argtypes import nonneg_int
from pldemu.job.exits import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from pldemu.neuron.eliminate_casts import DOCSTRING_GATES, GATES, NeuronEliminateCasts, PassResult
from pldemu.neuron.evaluate import OutputComparison, compare
from pldemu.neuron.ir import Function, IRError
from pldemu.neuron.stats import Statistics
from pldemu.neuron.text import format_function, parse_file
from pldemu.neuron.verifier import VerifyError, verify

GATE3_READINGS = {"contract": GATES, "docstring": DOCSTRING_GATES}

EPILOG = f"""\
--gate3 contract (default) is gate 3 as the spec's contract gives it: refuse a producer whose src dtype
already equals the target. --gate3 docstring is the reading the spec's canonical example needs.

exit status: {EXIT_OK} ok, {EXIT_FAIL} the kernel after the pass does not verify (a producer flagged
canMutateDstTy has a reader that needs its old dtype) or, with --run, a result after the pass is less
precise than before, {EXIT_USAGE} bad arguments or an unreadable / invalid kernel (file:line:col: message).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu casts`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("file", metavar="FILE", help="a Neuron kernel in the .nki text form")
    parser.add_argument("--run", action="store_true", help="execute before and after against float64 and fp32 references")
    parser.add_argument("--stats", action="store_true", help="print the statistics registry")
    parser.add_argument("--gate3", choices=sorted(GATE3_READINGS), default="contract",
                        help="which reading of gate 3 (default: contract)")
    parser.add_argument("--seed", type=nonneg_int, default=0, help="seed of the --run input values (default 0)")


def _load(path: str) -> Function:
    try:
        return verify(parse_file(path))
    except OSError as err:
        raise IRError(f"cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise IRError(f"not text: {err}") from None


def _print_verdicts(out: TextIO, result: PassResult) -> None:
    n = len(result.verdicts)
    out.write(f"\n# casts: {n} candidate{'s' * (n != 1)}, {len(result.eliminated)} eliminated\n")
    for verdict in result.verdicts:
        out.write(f"#   {verdict.describe()}\n")


def _print_run(out: TextIO, rows: tuple[OutputComparison, ...], seed: int) -> None:
    out.write(f"\n# run (seed {seed}): error against float64; fp32 ref = on-chip values held in fp32\n")
    out.write("#   output      before: max abs   max rel  |  after: max abs   max rel  | after == fp32 ref\n")
    for r in rows:
        out.write(f"#   {r.tensor:<10} {r.before.max_abs:>14.3e} {r.before.max_rel:>9.3e}  | "
                  f"{r.after.max_abs:>14.3e} {r.after.max_rel:>9.3e}  | {'yes' if r.after_equals_fp32 else 'no'}\n")


def run(args: argparse.Namespace) -> int:
    """Print before/after, the verdicts, optionally statistics and errors; the exit status."""
    try:
        before = _load(args.file)
    except (ParseError, IRError) as err:
        text = err.located(args.file) if isinstance(err, VerifyError) else (
            str(err) if isinstance(err, ParseError) else f"{args.file}: {err}")
        print(f"pldemu casts: error: {text}", file=sys.stderr)
        return EXIT_USAGE
    stats = Statistics()
    result = NeuronEliminateCasts(stats=stats, gates=GATE3_READINGS[args.gate3]).transformStmts(before)
    out = sys.stdout
    try:
        verify(result.after)
    except VerifyError as err:
        # canMutateDstTy promised a re-typable producer, but another reader needs the old dtype
        print(f"pldemu casts: error: after the pass: {err.located(args.file)}", file=sys.stderr)
        return EXIT_FAIL
    out.write(f"# before NeuronEliminateCasts (gate 3: {args.gate3})\n{format_function(before)}")
    out.write(f"\n# after NeuronEliminateCasts\n{format_function(result.after)}")
    _print_verdicts(out, result)
    if args.stats:
        out.write("\n# statistics\n" + "".join(f"#   {line}\n" for line in stats.format().splitlines()))
    if not args.run:
        return EXIT_OK
    rows = compare(before, result.after, args.seed)
    _print_run(out, rows, args.seed)
    worse = [r.tensor for r in rows if not r.never_less_precise]
    if worse:
        out.write(f"# FAIL: less precise after the pass: {', '.join(worse)}\n")
        return EXIT_FAIL
    return EXIT_OK


__all__ = ["add_arguments", "run"]
