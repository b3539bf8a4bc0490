"""``pldemu lower``: print a program before and after LowerCompositeOps, with one summary line per call.

    pldemu lower PROGRAM.pld                      # or a Python file that builds the program
    pldemu lower --collective allreduce --mode ring --dtype fp16 --size 17 --ranks 4 --reduce max

Errors (unreadable file, parse error, a collective breaking its contract) go to stderr with exit 2.
"""

from __future__ import annotations

import argparse
import sys

from pldemu.cli.args import (
    REDUCES,
    add_backend_argument,
    add_collective_arguments,
    backend_of,
    check_applies,
    flag,
    given,
)
from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AllreduceMode
from pldemu.ir.nodes import Assign, Eval, Program, Stmt
from pldemu.ir.printer import format_program
from pldemu.ir.source import load_source
from pldemu.ir.verifier import verify
from pldemu.job.argtypes import any_int
from pldemu.job.exits import EXIT_OK, UsageError, usage_error
from pldemu.lowering import insert_fences, lower_composite_ops_with_report

EPILOG = """\
summary line per lowered call:
  OP [attrs] in func > stmt N: SOURCE: primitive sites by kind; barriers per cell (credits the
  epilogue retires; ring: on each row); chunks (subchunks per round for ring); stage tile shape.
  Expressions are in NR; --ranks pins NR and adds the value.
  A tile composite (tile.sin, tile.cos, tile.select) names what it became instead, e.g.
  "TSELS, scratch fp32[1, 128]" (the scratch --backend planned) or "FP32 Cody-Waite + Horner".

--fences: a system.fence / system.cacheinvalid placed by InsertCommFence after a window write, put
  or wait, and a system.bar_all (the MTE drain PTOAS emits before every tnotify, PTOAS#718) before
  every notify, each commented "FILE:LINE, placed by PASS" (the line it belongs to).

exit status: 0 ok, 2 bad arguments, unreadable/invalid program or a contract violation.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu lower`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("program", nargs="?", metavar="PROGRAM", help="a program: .pld text, or a Python file that builds it")
    parser.add_argument("--collective", choices=COLLECTIVE_NAMES, help="build one call of this collective instead")
    add_collective_arguments(parser, default_size=1024, dtypes=[d.value for d in DType])
    parser.add_argument("--ranks", type=any_int, default=None, metavar="N", help="pin NR in the program")
    parser.add_argument("--after-only", action="store_true", help="print only the lowered program")
    parser.add_argument("--fences", action="store_true",
                        help="run InsertCommFence and the toolchain's drains after LowerCompositeOps (what "
                             "--visibility fenced runs); each marker's comment says which placed it, after which line")
    add_backend_argument(parser)


def _spec(args: argparse.Namespace) -> CollectiveSpec:
    """The CollectiveSpec of the --collective options (ValueError on a bad combination)."""
    name: str = args.collective
    check_applies(name, args)
    kwargs: dict[str, object] = {"name": name, "dtype": DType.parse(args.dtype)}
    if args.mode is not None:
        kwargs["mode"] = AllreduceMode[args.mode]
    if args.reduce is not None:
        kwargs["reduce"] = REDUCES[args.reduce]
    for field, value in (("size", args.size), ("shape", args.shape), ("valid_shape", args.valid_shape),
                         ("root", args.root), ("max_recv", args.max_recv), ("nranks", args.ranks)):
        if value is not None:
            kwargs[field] = value
    return CollectiveSpec(**kwargs)  # type: ignore[arg-type]


def _program(args: argparse.Namespace) -> Program:
    if (args.program is None) == (args.collective is None):
        raise UsageError("give either PROGRAM (.pld or .py) or --collective NAME")
    if args.collective is not None:
        return collective_program(_spec(args)).program
    builder_only = [flag(dest) for dest in given(args)]
    if builder_only:
        raise UsageError(f"{', '.join(builder_only)} only apply with --collective")
    program = load_source(args.program)
    if args.ranks is not None:
        if program.nranks is not None and program.nranks != args.ranks:
            raise UsageError(f"the program pins nranks={program.nranks}, not --ranks {args.ranks}")
        program = Program(program.name, program.buffers, program.functions, program.entry, args.ranks)
    return program


def _placed(s: Stmt) -> str:
    """The comment on a marker a pass placed: its origin, which names the pass (``placed by ...``)."""
    origin = s.origin if isinstance(s, Assign | Eval) else None
    return str(origin) if origin is not None and origin.placed_by else ""


def run(args: argparse.Namespace) -> int:
    """Print before/after and the summary; 0 on success, 2 on any error (message on stderr)."""
    try:
        program = verify(_program(args))
        report = lower_composite_ops_with_report(program, backend=backend_of(args))
        verify(report.program)
        lowered = verify(insert_fences(report.program)) if args.fences else report.program
    except (ValueError, OSError) as err:
        return usage_error("lower", str(err))
    out = sys.stdout
    if not args.after_only:
        out.write("# before LowerCompositeOps\n")
        out.write(format_program(program))
        out.write("\n# after LowerCompositeOps" + (" and InsertCommFence, with the toolchain's drains"
                                                     if args.fences else "") + "\n")
    out.write(format_program(lowered, _placed if args.fences else None))
    if report.calls:
        out.write("\n")
    for call in report.calls:
        out.write(f"# {call.summary(program.nranks)}\n")
    if not report.calls:
        out.write("# no collectives: the program is unchanged\n")
    return EXIT_OK


__all__ = ["add_arguments", "run"]
