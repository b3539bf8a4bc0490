"""``pldemu bench``: the lowered recipes executed by pldemu against native MPI, nccl-tests style.

One module per measurement family, all sharing the methodology of ``common`` (alternating
contenders, max over ranks, median over iterations):

* ``collectives`` -- each collective's lowered recipe against the native MPI collective;
* ``signals`` -- the notify -> wait hop and the barrier round against raw MPI-3 atomics;
* ``bulk`` -- one large put / get / remote_load against memcpy;
* ``report`` -- tables, targets, JSON and the busbw plot; ``runner`` -- ``run_bench``.

* ``startup`` -- one job's start-up against bare ``mpiexec`` + Python, run from the launcher (no MPI).

Importing ``common`` and the families initialises MPI (through mpi4py); the names below are imported
on first use, so that ``pldemu bench startup`` (``pldemu.bench.startup``) stays MPI-free.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"BenchError": "common", "format_size": "common", "parse_size": "common", "parse_sizes": "common",
         "BenchReport": "report", "Target": "report",
         "SECTIONS": "runner", "WHATS": "runner", "BenchConfig": "runner", "run_bench": "runner"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pldemu.bench' has no attribute {name!r}")
    return getattr(import_module(f"pldemu.bench.{module}"), name)


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
