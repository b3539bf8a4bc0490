"""Micro: what the interpreter itself costs, on one process (no peer to wait for).

Each figure is the **minimum** over many short repetitions on ``MPI.COMM_SELF`` -- the run least
disturbed by other processes, which is what a before/after comparison of an optimisation needs on a
shared machine (the medians of the multi-rank sections mostly measure the scheduler).

* hop: one notify (to itself) + one wait of the token-ring program, per hop;
* barrier run: one ``run()`` of the lowered ``pld.tensor.barrier`` (no peers: the fixed cost of a
  call -- run bookkeeping, rank queries, three loops);
* mesh chunk: one chunk of the lowered mesh allreduce of 256 KiB (load, store, loop, bookkeeping);
* put 4K: one ``run()`` of a one-put program (the whole per-call overhead of a small transfer);
* get / remote_load 16M against memcpy (numpy.copyto) of the same 16 MiB.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.bench.bulk import bulk_program
from pldemu.bench.signals import hop_program
from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import DType

_HOPS = 100
_MESH_ELEMS = 1 << 16  # 16 chunks of 4096 FP32
_BIG = 4 << 20  # 16 MiB of FP32


@dataclass(frozen=True)
class MicroRow:
    """One micro figure."""

    what: str
    value: float
    unit: str

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"what": self.what, "value": self.value, "unit": self.unit}


def best_of(fn: Callable[[], object], reps: int, inner: int = 1) -> float:
    """Seconds per call: the fastest of ``reps`` timings of ``inner`` calls (after one warm-up)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def bench_micro(options: Any, scale: int = 1) -> list[MicroRow]:
    """The micro figures on this process alone (``MPI.COMM_SELF``); ``scale`` multiplies the
    repetitions."""
    from pldemu.lowering import lower_composite_ops
    from pldemu.runtime.interpreter import ProgramInstance

    comm = MPI.COMM_SELF
    rows: list[MicroRow] = []
    with ProgramInstance(hop_program(_HOPS), comm, options) as inst:
        rows.append(MicroRow("notify->wait hop", best_of(inst.run, 100 * scale) / _HOPS * 1e6, "us"))
    barrier = lower_composite_ops(collective_program(CollectiveSpec("barrier")).program)
    with ProgramInstance(barrier, comm, options) as inst:
        rows.append(MicroRow("barrier run()", best_of(inst.run, 100 * scale, inner=20) * 1e6, "us"))
    mesh = lower_composite_ops(collective_program(CollectiveSpec("allreduce", size=_MESH_ELEMS)).program)
    with ProgramInstance(mesh, comm, options) as inst:
        chunks = _MESH_ELEMS // 4096
        rows.append(MicroRow("mesh allreduce chunk", best_of(inst.run, 50 * scale) / chunks * 1e6, "us"))
    with ProgramInstance(bulk_program(1024, DType.FP32), comm, options) as inst:
        rows.append(MicroRow("put 4K run()", best_of(inst.run, 100 * scale, inner=10) * 1e6, "us"))
    with ProgramInstance(bulk_program(_BIG, DType.FP32), comm, options) as inst:
        rows.append(MicroRow("get 16M", best_of(lambda: inst.run("get"), 10 * scale) * 1e3, "ms"))
        rows.append(MicroRow("remote_load 16M", best_of(lambda: inst.run("remote_load"), 10 * scale) * 1e3,
                             "ms"))
    a = np.ones(_BIG, dtype=np.float32)
    b = np.empty_like(a)
    rows.append(MicroRow("memcpy 16M", best_of(lambda: np.copyto(b, a), 10 * scale) * 1e3, "ms"))
    return rows


__all__ = ["MicroRow", "bench_micro", "best_of"]
