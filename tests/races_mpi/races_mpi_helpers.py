"""A small iteration harness with race detection and a report formatter (unique module name: test
directories share sys.path).

``race_harness`` drives a collective the way ``pldemu.harness.check.run_check`` does (inputs restaged
into the windows before every call, the result consumed after it, the consume fence for the
collectives that need one, an all-rank checkpoint per block) and tells the detector about every
host-side access and every all-rank barrier, so that a usage race (a root rewriting its window while
a peer still reads it) is visible too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from pldemu.collectives import CollectiveProgram
from pldemu.ir import Program
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.instrument.races import RaceReport

CONSUME_FENCE = frozenset({"allgather", "all_to_all", "broadcast"})
"""As the check harness: these need an all-rank barrier once the result is consumed."""

RESTAGED = frozenset({"allreduce", "reduce_scatter", "broadcast"})
"""Collectives whose target window is also their input (rewritten before every call)."""


@dataclass
class HarnessResult:
    reports: list[RaceReport]
    seconds: float


def race_harness(comm: MPI.Intracomm, cp: CollectiveProgram, iters: int, lower: Callable[[Program], Program],
                 *, fence: bool = True, block: int = 4, options: RuntimeOptions | None = None) -> HarnessResult:
    """Run ``cp`` ``iters`` times back to back with race detection; every rank gets every report."""
    opts = options if options is not None else RuntimeOptions(race_detect=True, timeout=120)
    rng = np.random.default_rng(1000 + comm.Get_rank())
    name = cp.spec.name
    reports: list[RaceReport] = []
    start = MPI.Wtime()
    with ProgramInstance(lower(cp.program), comm, opts) as inst:
        det = inst.races
        for it in range(iters):
            for role in ("target", "local_data", "input", "send_counts"):
                buf = getattr(cp, role)
                if buf is None or (role == "target" and name not in RESTAGED):
                    continue
                arr = inst.local(buf)
                if role == "send_counts":
                    arr[...] = rng.integers(0, cp.spec.max_recv + 1, arr.shape)
                else:
                    arr[...] = rng.random(arr.shape)
                if det is not None:
                    det.host_access(buf, write=True, where=f"restage {role}")
            inst.run()
            if cp.target is not None:
                np.array(inst.local(cp.target), copy=True)
                if det is not None:
                    det.host_access(cp.target, write=False, where="consume result")
            if fence and name in CONSUME_FENCE:
                comm.Barrier()
                if det is not None:
                    det.join()
            if (it + 1) % block == 0 or it + 1 == iters:
                comm.Barrier()
                if det is not None:
                    reports += det.check()
    return HarnessResult(reports, MPI.Wtime() - start)


def describe(reports: list[RaceReport], limit: int = 5) -> str:
    return "\n".join(r.describe() for r in reports[:limit]) or "no reports"
