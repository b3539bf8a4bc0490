"""Kernel-sleep waits against the timed back-off, alternating in one MPI job (same minutes, same load).

    mpiexec -n 4 python -m mpi4py scripts/wait_ab.py [--iters K] [--size BYTES]

Times ``pld.tensor.barrier`` (rounds of back-to-back calls) and a mesh allreduce of ``--size`` bytes
per rank, each once with ``RuntimeOptions(blocking_waits=True)`` and once with ``False``, alternating
inside every iteration (``pldemu.bench``'s ``time_alternating``: max over ranks, median over
iterations), and prints the CPU seconds every rank spent per call beside the wall time. Results are
not checked here (``pldemu check`` does that); this only compares the two ways of waiting.
"""

from __future__ import annotations

import argparse
import time

from mpi4py import MPI

from pldemu.bench.common import Contender, barrier_instance, bounded, repeated, time_alternating
from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import ProgramInstance, RuntimeOptions

ROUNDS = 50
"""Barrier calls per timed sample."""


def _cpu_timed(name: str, fn: object, per_call: int, cpu: dict[str, float]) -> Contender:
    """A contender that also adds this rank's CPU seconds per call to ``cpu[name]``."""
    assert callable(fn)

    def run() -> None:
        c0 = time.process_time()
        fn()
        cpu[name] = cpu.get(name, 0.0) + (time.process_time() - c0) / per_call

    return Contender(name, run, per_call=per_call)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--size", type=int, default=1 << 20)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    on, off = RuntimeOptions(windows="shared"), RuntimeOptions(windows="shared", blocking_waits=False)
    spec = CollectiveSpec("allreduce", dtype=DType.FP32, size=args.size // 4, nranks=n, mode=AllreduceMode.mesh)
    program = lower_composite_ops(collective_program(spec).program)
    cpu: dict[str, float] = {}
    with barrier_instance(comm, on) as b_on, barrier_instance(comm, off) as b_off, \
            ProgramInstance(program, comm, on) as a_on, ProgramInstance(program, comm, off) as a_off:
        contenders = [
            _cpu_timed("barrier, kernel sleeps", repeated(b_on.run, ROUNDS), ROUNDS, cpu),
            _cpu_timed("barrier, timed sleeps", repeated(b_off.run, ROUNDS), ROUNDS, cpu),
            _cpu_timed(f"mesh {args.size} B, kernel sleeps", a_on.run, 1, cpu),
            _cpu_timed(f"mesh {args.size} B, timed sleeps", a_off.run, 1, cpu),
        ]
        times = time_alternating(comm, contenders, args.warmup, args.iters)
        bc = bounded(comm)
        samples = args.warmup + args.iters
        cpu_max = {k: float(bc.allreduce([v / samples], MPI.MAX, "cpu")[0]) for k, v in sorted(cpu.items())}
    if comm.Get_rank() == 0:
        print(f"# {n} ranks, {args.iters} iterations (median of max over ranks); CPU: max over ranks, mean per call")
        print(f"# {'what':<36} {'time(us)':>11} {'CPU(us)':>10}")
        for t in times:
            print(f"  {t.name:<36} {t.median * 1e6:>11.1f} {cpu_max[t.name] * 1e6:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
