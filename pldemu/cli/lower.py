"""``pldemu lower``: print a program before and after LowerCompositeOps, with one summary line per call.

    pldemu lower PROGRAM.pld
    pldemu lower --collective allreduce --mode ring --dtype fp16 --size 17 --ranks 4 --reduce max

Errors (unreadable file, parse error, a collective breaking its contract) go to stderr with exit 2.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from pathlib import Path

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AllreduceMode, ReduceOp
from pldemu.ir.nodes import Program
from pldemu.ir.printer import format_program
from pldemu.ir.verifier import verify
from pldemu.lowering import lower_composite_ops_with_report

EPILOG = """\
summary line per lowered call:
  OP [attrs] in func > stmt N: SOURCE: primitive sites by kind; barriers per cell (credits the
  epilogue retires; ring: on each row); chunks (subchunks per round for ring); stage tile shape.
  Expressions are in NR; --ranks pins NR and adds the value.

exit status: 0 ok, 2 bad arguments, unreadable/invalid program or a contract violation.
"""


class UsageError(ValueError):
    """A bad command line."""


def _dims(text: str) -> tuple[int, ...]:
    """``RxC`` (or ``N``, or ``AxBxC``) -> positive ints."""
    try:
        dims = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RxC with positive integers, got {text!r}") from None
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"expected RxC with positive integers, got {text!r}")
    return dims


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu lower`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("program", nargs="?", metavar="PROGRAM.pld", help="a program in the .pld text form")
    parser.add_argument("--collective", choices=COLLECTIVE_NAMES, help="build one call of this collective instead")
    parser.add_argument("--mode", choices=[m.name for m in AllreduceMode], default=None,
                        help="allreduce algorithm (default mesh)")
    parser.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    parser.add_argument("--size", type=_int, default=None, help="SIZE, elements per row (default 1024)")
    parser.add_argument("--shape", type=_dims, default=None, metavar="RxC",
                        help="allreduce/broadcast target shape instead of [1, SIZE]")
    parser.add_argument("--valid-shape", type=_dims, default=None, metavar="RxC",
                        help="allreduce partial-valid target")
    parser.add_argument("--reduce", choices=[r.name.lower() for r in ReduceOp], default=None,
                        help="ReduceOp of allreduce/reduce_scatter (default sum)")
    parser.add_argument("--root", type=_int, default=None, help="broadcast root rank (default 0)")
    parser.add_argument("--max-recv", type=_int, default=None, metavar="M",
                        help="all_to_all_v MAX_RECV rows per sender (default 4)")
    parser.add_argument("--ranks", type=_int, default=None, metavar="N", help="pin NR in the program")
    parser.add_argument("--after-only", action="store_true", help="print only the lowered program")


def _spec(args: argparse.Namespace) -> CollectiveSpec:
    """The CollectiveSpec of the --collective options (ValueError on a bad combination)."""
    name: str = args.collective
    extras = {"--mode": (args.mode, ("allreduce",)), "--reduce": (args.reduce, ("allreduce", "reduce_scatter")),
              "--root": (args.root, ("broadcast",)), "--max-recv": (args.max_recv, ("all_to_all_v",)),
              "--shape": (args.shape, ("allreduce", "broadcast")), "--valid-shape": (args.valid_shape, ("allreduce",))}
    for opt, (value, allowed) in extras.items():
        if value is not None and name not in allowed:
            raise UsageError(f"{opt} applies to {' and '.join(allowed)}, not {name}")
    kwargs: dict[str, object] = {"name": name, "dtype": DType.parse(args.dtype)}
    if args.mode is not None:
        kwargs["mode"] = AllreduceMode[args.mode]
    if args.reduce is not None:
        kwargs["reduce"] = next(r for r in ReduceOp if r.name.lower() == args.reduce)
    for field, value in (("size", args.size), ("shape", args.shape), ("valid_shape", args.valid_shape),
                         ("root", args.root), ("max_recv", args.max_recv), ("nranks", args.ranks)):
        if value is not None:
            kwargs[field] = value
    return CollectiveSpec(**kwargs)  # type: ignore[arg-type]


def _program(args: argparse.Namespace) -> Program:
    if (args.program is None) == (args.collective is None):
        raise UsageError("give either PROGRAM.pld or --collective NAME")
    if args.collective is not None:
        return collective_program(_spec(args)).program
    builder_only = [o for o, v in (("--mode", args.mode), ("--size", args.size), ("--shape", args.shape),
                                   ("--valid-shape", args.valid_shape), ("--reduce", args.reduce),
                                   ("--root", args.root), ("--max-recv", args.max_recv)) if v is not None]
    if builder_only:
        raise UsageError(f"{', '.join(builder_only)} only apply with --collective")
    try:
        parser = import_module("pldemu.ir.parser")
    except ModuleNotFoundError:  # pragma: no cover - the parser ships with pldemu.ir
        raise UsageError("reading .pld files needs pldemu.ir.parser, which is not available") from None
    program: Program = parser.parse_file(Path(args.program))
    if args.ranks is not None:
        if program.nranks is not None and program.nranks != args.ranks:
            raise UsageError(f"the program pins nranks={program.nranks}, not --ranks {args.ranks}")
        program = Program(program.name, program.buffers, program.functions, program.entry, args.ranks)
    return program


def run(args: argparse.Namespace) -> int:
    """Print before/after and the summary; 0 on success, 2 on any error (message on stderr)."""
    try:
        program = verify(_program(args))
        report = lower_composite_ops_with_report(program)
        verify(report.program)
    except (ValueError, OSError) as err:
        print(f"pldemu lower: error: {err}", file=sys.stderr)
        return 2
    out = sys.stdout
    if not args.after_only:
        out.write("# before LowerCompositeOps\n")
        out.write(format_program(program))
        out.write("\n# after LowerCompositeOps\n")
    out.write(format_program(report.program))
    if report.calls:
        out.write("\n")
    for call in report.calls:
        out.write(f"# {call.summary(program.nranks)}\n")
    if not report.calls:
        out.write("# no collectives: the program is unchanged\n")
    return 0


__all__ = ["add_arguments", "run"]
