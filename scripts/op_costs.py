"""What the interpreter's hot ops cost: per handler call on one process, per recipe call in a job.

    python scripts/op_costs.py handlers
    mpiexec -n 4 python -m mpi4py scripts/op_costs.py recipes [SAMPLES] [--pin]

``handlers``: one process (COMM_SELF), the handlers a mesh allreduce chunk runs, called directly
with a 16 KiB FP32 chunk's arguments (best of 7 repeats of 20,000 calls, ns per call), the chunk's
op mix at 4 ranks (1 load, 3 remote_loads, 3 adds, 1 store, 3 notifies, 3 satisfied waits) and the
numpy floors under them. Only this process's CPU: the figure the machine's other load moves least.

``recipes``: ``pld.tensor.barrier`` (200 calls a sample), mesh and ring allreduce of 16 MiB FP32 at
the job's rank count (one call a sample): wall time (max over ranks) and CPU per rank (mean), median
over SAMPLES (default 5); ``--pin`` binds rank ``i`` to core ``i % cores`` first, as ``pldemu bench``
does (``pldemu.job.launch.PIN_VAR``), done here by hand so that any version of pldemu can be timed. Run it with ``pldemu.job.launch.MPICH_OVERSUBSCRIBED``'s variables when the
ranks outnumber the cores, as pldemu's launcher does (docs/benchmarks.md, issue 23, "Item 4, sixth
pass").
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import timeit
from typing import Any

from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, Op
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.ops import HANDLERS
from pldemu.runtime.values import buffer_tensor

SIZE = 1 << 22
"""FP32 elements of the allreduces (16 MiB)."""


def _instance(spec: CollectiveSpec, comm: MPI.Intracomm) -> ProgramInstance:
    return ProgramInstance(lower_composite_ops(collective_program(spec).program), comm, RuntimeOptions(windows="shared"))


def handlers() -> None:
    spec = CollectiveSpec("allreduce", nranks=1, size=SIZE, mode=AllreduceMode.mesh)
    with _instance(spec, MPI.COMM_SELF) as inst:
        inst.run()
        m = inst._machine  # the handlers take the machine: this script calls them as compiled code does
        sites = {s.op: s for s in m.sites}
        bufs = {b.name: b for b in m.buffers}
        target, sig = buffer_tensor(bufs["target"]), buffer_tensor(bufs["signal"])
        view = HANDLERS[Op.TENSOR_VIEW](m, sites[Op.TENSOR_VIEW], (target, (1, SIZE)))
        chunk = ((0, 8192), (1, 4096), (1, 4096))
        acc = HANDLERS[Op.TILE_LOAD](m, sites[Op.TILE_LOAD], (view, *chunk))
        env: dict[str, Any] = {"H": HANDLERS, "S": sites, "m": m, "Op": Op, "view": view, "acc": acc, "sig": sig,
                               "a": acc.data, "b": acc.data.copy()}
        rows = [("tile.load", "H[Op.TILE_LOAD](m, S[Op.TILE_LOAD], (view, (0, 8192), (1, 4096), (1, 4096)))", 1),
                ("pld.tile.remote_load", "H[Op.REMOTE_LOAD](m, S[Op.REMOTE_LOAD], "
                 "(view, 0, (0, 8192), (1, 4096), (1, 4096)))", 3),
                ("tile.add", "H[Op.TILE_ADD](m, S[Op.TILE_ADD], (acc, acc))", 3),
                ("tile.store", "H[Op.TILE_STORE](m, S[Op.TILE_STORE], (acc, (0, 8192), view))", 1),
                ("pld.system.notify", "H[Op.NOTIFY](m, S[Op.NOTIFY], (sig, 0, (0, 0), 0))", 3),
                ("pld.system.wait (satisfied)", "H[Op.WAIT](m, S[Op.WAIT], (sig, (0, 0), 0))", 3)]
        total = 0.0
        for name, stmt, per_chunk in rows:
            ns = _ns(stmt, env)
            total += per_chunk * ns
            print(f"  {name:32s} {ns:8.0f} ns")
        print(f"  {'mesh chunk at 4 ranks (the mix)':32s} {total:8.0f} ns")
        for name, stmt in (("np.add, 16 KiB (floor)", "np.add(a, b)"), ("ndarray.copy, 16 KiB (floor)", "a.copy()")):
            print(f"  {name:32s} {_ns(stmt, {**env, 'np': __import__('numpy')}):8.0f} ns")


def _ns(stmt: str, env: dict[str, Any], number: int = 20000) -> float:
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=7)) / number * 1e9


def recipes(samples: int, pin: bool) -> None:
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    if pin:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[comm.Get_rank() % len(cores)]})
    cases = [("barrier", CollectiveSpec("barrier", nranks=n), 200),
             ("mesh allreduce 16 MiB", CollectiveSpec("allreduce", nranks=n, size=SIZE, mode=AllreduceMode.mesh), 1),
             ("ring allreduce 16 MiB", CollectiveSpec("allreduce", nranks=n, size=SIZE, mode=AllreduceMode.ring), 1)]
    for name, spec, calls in cases:
        with _instance(spec, comm) as inst:
            inst.run()
            walls, cpus = [], []
            for _ in range(samples):
                comm.Barrier()
                t, c = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    inst.run()
                t, c = time.perf_counter() - t, time.process_time() - c
                walls.append(max(comm.allgather(t)) / calls)
                cpus.append(sum(comm.allgather(c)) / n / calls)
            if comm.Get_rank() == 0:
                print(f"  {name:24s} wall {statistics.median(walls) * 1e6:10.1f} us   "
                      f"CPU per rank {statistics.median(cpus) * 1e6:10.1f} us", flush=True)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("handlers", "recipes"):
        print(__doc__)
        return 2
    if sys.argv[1] == "handlers":
        handlers()
    else:
        rest = [a for a in sys.argv[2:] if a != "--pin"]
        recipes(int(rest[0]) if rest else 5, "--pin" in sys.argv[2:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
