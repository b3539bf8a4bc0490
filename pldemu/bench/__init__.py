"""``pldemu bench``: the lowered recipes executed by pldemu against native MPI, nccl-tests style.

One module per measurement family, all sharing the methodology of ``common`` (alternating
contenders, max over ranks, median over iterations):

* ``collectives`` -- each collective's lowered recipe against the native MPI collective;
* ``signals`` -- the notify -> wait hop and the barrier round against raw MPI-3 atomics;
* ``bulk`` -- one large put / get / remote_load against memcpy;
* ``report`` -- tables, targets, JSON and the busbw plot; ``runner`` -- ``run_bench``.

Importing this package initialises MPI (through mpi4py); the CLI imports it inside the job only.
"""

from pldemu.bench.common import BenchError, format_size, parse_size, parse_sizes
from pldemu.bench.report import BenchReport, Target
from pldemu.bench.runner import SECTIONS, WHATS, BenchConfig, run_bench

__all__ = [
    "SECTIONS",
    "WHATS",
    "BenchConfig",
    "BenchError",
    "BenchReport",
    "Target",
    "format_size",
    "parse_size",
    "parse_sizes",
    "run_bench",
]
