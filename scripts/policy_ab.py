"""Poll policies against each other through the interpreter, alternating in one MPI job.

    mpiexec -n 4 python -m mpi4py scripts/policy_ab.py ring|mesh|barrier [--size BYTES] [--samples K]
        [--windows shared|rma|hybrid]

One ``ProgramInstance`` of the lowered ``pld.tensor.barrier`` or allreduce (``--size`` bytes of FP32
per rank) runs with each policy of :data:`POLICIES` in turn, ``--samples`` times round (200 barriers
or one allreduce per sample); prints the median wall time (max over ranks) and CPU time (summed over
ranks) per call. The policy is swapped on the instance's machine between samples: it is a property of
the back-off, not a runtime option (docs/benchmarks.md, "Item 4, fifth pass").
"""

from __future__ import annotations

import argparse
import math
import time

from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode
from pldemu.lowering import lower_composite_ops
from pldemu.mpi import PollPolicy
from pldemu.runtime import ProgramInstance, RuntimeOptions

POLICIES = {
    "old": PollPolicy(spin_polls=16, yield_polls=8, yield_lost=math.inf),
    "no-cut": PollPolicy(yield_lost=math.inf),
    "default": PollPolicy(),
}
"""The defaults before issue 23's fifth pass, today's without the late-yield cut, and today's."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("ring", "mesh", "barrier"))
    parser.add_argument("--size", type=int, default=16 << 20, help="allreduce bytes per rank (FP32)")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--windows", choices=("shared", "rma", "hybrid"), default="shared", help="window back end")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    if args.what == "barrier":
        spec, calls = CollectiveSpec("barrier", nranks=n), 200
    else:
        spec, calls = CollectiveSpec("allreduce", nranks=n, size=args.size // 4, mode=AllreduceMode[args.what]), 1
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in POLICIES}
    with ProgramInstance(lower_composite_ops(collective_program(spec).program), comm,
                         RuntimeOptions(windows=args.windows)) as inst:
        inst.run()
        for _ in range(args.samples):
            for name, policy in POLICIES.items():
                inst._machine.wait_policy = policy  # what every wait of the next run backs off with
                comm.Barrier()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    inst.run()
                sample = ((time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls)
                samples = comm.gather(sample)
                if samples is not None:
                    got[name].append((max(w for w, _ in samples), sum(c for _, c in samples)))
    if comm.Get_rank() == 0:
        unit, scale = ("us", 1e6) if args.what == "barrier" else ("ms", 1e3)
        for name, rows in got.items():
            wall = sorted(w for w, _ in rows)[len(rows) // 2]
            cpu = sorted(c for _, c in rows)[len(rows) // 2]
            print(f"{args.what} {name:8s} wall {wall * scale:9.2f} {unit}  CPU (sum) {cpu * scale:9.2f} {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
