"""``pldemu check tquant_mx``: MXFP8 quantisation on every rank against an independent oracle.

``--group-axis 0|1`` (default: both), ``--shape MxK`` (default 128x256), ``--dtype fp32|fp16|bf16``.
The work is in ``pldemu.harness.mxcheck``; rank 0 prints one row per case. A mismatching byte fails
(exit 1); a shape or dtype tile.tquant_mx refuses is a usage error (exit 2) raised before any MPI traffic.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.runtime.options import RuntimeOptions


MX_CHECKS = ("tquant_mx",)
DEFAULT_SHAPE = (128, 256)
MX_DTYPES = ("fp32", "fp16", "bf16")

EPILOG = """\
tquant_mx check (--group-axis 0|1, --shape MxK, --dtype fp32|fp16|bf16):
  every rank quantises the boundary pattern, all-zero groups, random groups over the dtype's exponent
  range, uniform(-2,2) and pypto's goldens (128x64 seeds 19 and 42, the power-of-two matmul pattern)
  through the lowered tile.tquant_mx; FP8 data and E8M0 scale bytes are compared with an independent
  NumPy + ml_dtypes oracle (#wrong bytes), and the dequantised values give max relative error and SQNR.
"""


class DtypeGate(argparse.Action):
    """Stores the collective / ``--dtype`` and refuses bf16 for anything but tquant_mx, whichever comes last
    on the command line (an argparse error: exit 2 before any MPI)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        collective, dtype = getattr(namespace, "collective", None), getattr(namespace, "dtype", None)
        if dtype == "bf16" and collective is not None and collective not in MX_CHECKS:
            parser.error(f"argument --dtype: invalid choice: 'bf16' for {collective} (bf16 is for the tquant_mx "
                         "check only; choose from fp16, fp32)")


def add_mx_arguments(parser: argparse.ArgumentParser) -> None:
    """The one definition of ``--group-axis``."""
    parser.add_argument("--group-axis", type=int, choices=(0, 1), default=None, dest="group_axis",
                        help="tquant_mx: the MX group axis (default: both)")


def mx_argv(args: argparse.Namespace) -> list[str]:
    """``--group-axis`` spelled again for the spawned job."""
    return [] if args.group_axis is None else ["--group-axis", str(args.group_axis)]


def mx_names(name: str) -> tuple[str, ...]:
    return MX_CHECKS if name in ("all", *MX_CHECKS) else ()


def _axes(args: argparse.Namespace) -> tuple[int, ...]:
    return (0, 1) if args.group_axis is None else (args.group_axis,)


def _shape(args: argparse.Namespace) -> tuple[int, int]:
    if args.shape is not None and args.collective in MX_CHECKS:
        return int(args.shape[0]), int(args.shape[1])
    return DEFAULT_SHAPE


def mx_usage_error(args: argparse.Namespace) -> str | None:
    """The refusal of the tquant_mx part of the command line (lowering it once), or None."""
    if args.collective not in MX_CHECKS:
        return "--dtype bf16 is for the tquant_mx check only" if args.dtype == "bf16" else None
    from pldemu.harness.mxcheck import tquant_program  # numpy and ml_dtypes: only for an MX check

    if args.shape is not None and len(args.shape) != 2:
        return f"--shape must be MxK (2-D), got {'x'.join(map(str, args.shape))}"
    for axis in _axes(args):
        try:
            tquant_program(axis, args.dtype, _shape(args))
        except ValueError as err:
            return f"tquant_mx: {err}"
    return None


def run_mx_checks(comm: MPI.Intracomm, args: argparse.Namespace, options: RuntimeOptions) -> bool:
    """Run the tquant_mx check(s) ``args`` ask for on ``comm``; rank 0 prints the rows."""
    from pldemu.harness import mxcheck as mc

    if not mx_names(args.collective):
        return True
    dtype = args.dtype
    ok = True
    for axis in _axes(args):
        shape = _shape(args)
        results = mc.run_mx_check(comm, axis, dtype, shape, options)
        passed = all(r.ok for r in results)
        ok = ok and passed
        if comm.Get_rank() == 0:
            rows = [f"# tquant_mx group_axis={axis} {dtype} [{shape[0]}, {shape[1]}] on {comm.Get_size()} ranks "
                    "vs the independent NumPy + ml_dtypes oracle", mc.MX_HEADER,
                    *(mc.mx_row(r, axis, dtype) for r in results),
                    f"# tquant_mx axis {axis}: {sum(r.ok for r in results)} of {len(results)} cases bit-exact: "
                    f"{'PASS' if passed else 'FAIL'}"]
            print("\n".join(rows), flush=True)
    return ok


__all__ = ["EPILOG", "MX_CHECKS", "DtypeGate", "add_mx_arguments", "mx_argv", "mx_usage_error", "run_mx_checks"]
