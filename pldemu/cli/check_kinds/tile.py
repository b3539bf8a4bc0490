"""The tile half of ``pldemu check``: ``sin``, ``cos`` and ``select`` (and their part of ``check all``).

Runs inside the MPI job on every rank (``pldemu.harness.tilecheck`` does the work); rank 0 prints
nccl-tests style rows. Returns False on any mismatch (exit 1).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pldemu.cli.args import backend_of

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.runtime.options import RuntimeOptions


TILE_CHECKS = ("sin", "cos", "select")

EPILOG = """\
tile checks (sin, cos, select; --backend a2a3|a5|none):
  sin/cos: each rank runs the lowered FP32 recipe on its own slice of a sweep of |x| <= 2*pi*1024
  (--iters tiles of [64, --size]) plus 0, pi/2, pi, 3pi/2, 2pi and a NaN, against NumPy float64:
  max abs error and its x, max ulp error, count over 1e-5, special-point error, NaN propagation.
  select: every cmp_type on the three routes, tails, NaN inputs, FP32/FP16/INT16/BF16-via-FP32, wide
  columns and the clamp idiom, bit for bit against numpy.where inside the valid region ("outside" counts
  elements written outside it); "emitted" is what the backend's lowering became.
"""


def tile_names(name: str) -> tuple[str, ...]:
    """The tile checks ``pldemu check NAME`` runs."""
    return TILE_CHECKS if name == "all" else (name,) if name in TILE_CHECKS else ()


def run_tile_checks(comm: MPI.Intracomm, args: argparse.Namespace, options: RuntimeOptions) -> bool:
    """Run the tile checks of ``args.collective`` on ``comm``; rank 0 prints the rows."""
    from pldemu.harness import tilecheck as tc

    backend = backend_of(args)
    me = comm.Get_rank()
    ok = True
    for name in tile_names(args.collective):
        if name == "select":
            results = tc.run_select_check(comm, backend, options)
            rows = [tc.SELECT_HEADER, *(tc.select_row(r) for r in results)]
            passed = all(r.ok for r in results)
            rows.append(f"# select on backend {backend.name}: {sum(r.ok for r in results)} of {len(results)} "
                        f"cases bit-exact, {comm.Get_size()} ranks")
        else:
            size = args.size if args.size is not None else 1024
            stats = tc.run_trig_check(comm, name, size, args.iters, backend, options)
            rows = [f"# {name}: {comm.Get_size()} ranks x {args.iters} tiles of [{tc.SIN_ROWS}, {size}] FP32, "
                    "|x| <= 2*pi*1024 vs NumPy float64", tc.TRIG_HEADER, tc.trig_row(name, backend, stats)]
            passed = stats.ok
        ok = ok and passed
        if me == 0:
            print("\n".join(rows), flush=True)
    return ok


__all__ = ["EPILOG", "TILE_CHECKS", "run_tile_checks", "tile_names"]
