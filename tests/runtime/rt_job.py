"""MPI program for the launcher tests of tests/runtime/test_rt_jobs.py (not a test module).

``python -m mpi4py rt_job.py CASE [TIMEOUT]`` builds the CASE program with the builder and runs it through
the same rank-side code as ``pldemu run`` (``pldemu.cli.commands.run.run_in_job``). Before that, every rank prints
the named /dev/shm segments it maps (``SHM <path>``) so the test can check none outlives the job.

Cases: ``ok`` (a hand-written credit barrier in a loop), ``oob`` (rank 1 puts out of bounds while the
others wait at the next barrier), ``raise`` (a listener raises a plain Python error on rank 1),
``deadlock`` (every rank waits for a credit from its right neighbour that nobody posts).
"""

from __future__ import annotations

import sys

from mpi4py import MPI

from pldemu.cli.commands.run import run_in_job
from pldemu.ir import NR, Program, ProgramBuilder
from pldemu.runtime import OpEvent, RuntimeOptions
from pldemu.runtime.shm import mapped_segments


def build(case: str) -> Program:
    pb = ProgramBuilder(f"rt_job_{case}")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [NR, 4])
    src = pb.local("src", "fp32", [1, 4])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    stage = pld.tile.create([1, 4], "fp32")
    pld.tile.store(pld.tile.full([1, 4], 1.0, "fp32"), [0, 0], src)
    if case == "deadlock":
        pld.system.wait(sig, [(me + 1) % nr, 0], 1)
        return pb.build()
    epochs = 3
    with fb.for_range(0, epochs) as epoch:
        with fb.for_range(1, nr) as k:
            pld.system.notify(sig, (me + k) % nr, [me, 0], 1)
        with fb.for_range(1, nr) as k:
            pld.system.wait(sig, [(me + k) % nr, 0], epoch + 1)
        with fb.if_(epoch.eq(1)), fb.if_(me.eq(1)):
            if case == "oob":
                pld.tile.put(data, (me + 1) % nr, src, stage, [me, 3], [0, 0], [1, 4])
        pld.tile.put(data, (me + 1) % nr, src, stage, [me, 0], [0, 0], [1, 4])
    with fb.for_range(1, nr) as k:
        pld.system.notify(sig, me, [(me + k) % nr, 0], -epochs)
    return pb.build()


def main() -> int:
    case = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    comm = MPI.COMM_WORLD
    comm.Barrier()  # every rank has mapped MPI's segments
    for path in mapped_segments():
        print("SHM", path, flush=True)
    program = build(case)
    options = RuntimeOptions(timeout=timeout)
    ops = [0]

    def boom(event: OpEvent) -> None:
        # A failure that is not the program's (raised by a listener, on one rank): the job must
        # still end at once with its message while the other ranks wait in the next barrier.
        ops[0] += 1
        if case == "raise" and event.rank == 1 and ops[0] == 12:
            raise RuntimeError(f"boom on rank 1 at {event.location}")

    return run_in_job(program, options, source=f"rt_job.py {case}", listeners=[boom])


if __name__ == "__main__":
    sys.exit(main())
