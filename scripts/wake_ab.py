"""Batched against immediate futex wake-ups, and the kernel-sleep threshold, alternating in one MPI job.

    mpiexec -n 4 python -m mpi4py scripts/wake_ab.py [--iters K] [--policies S:Y:B,...]

Times the self-clearing barrier recipe (credit every peer, wait for every peer, retire) written on
``pldemu.windows`` directly, ``ROUNDS`` rounds back to back, in a ``WindowSet`` that batches the
wake-ups of a burst of credits (``batch_wakes=True``, the default) and in one that wakes at every
credit, each with the poll policies of ``--policies`` (spins, yields, seconds of timed sleeps before the
kernel sleeps), together with the raw MPI signal round and the
two-process futex ping-pong hop of ``pldemu bench signals`` (the floor), all alternating inside
every iteration (``time_alternating``: max over ranks, median over iterations). Prints each
figure and its ratio to the raw round in the same run.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np
from mpi4py import MPI

from pldemu.bench.common import Contender, barrier_instance, bounded, repeated, time_alternating
from pldemu.bench.signals import FLOOR_HOPS, FutexPingPong, RawSignals, windows_barrier
from pldemu.mpi import DEFAULT_POLICY, PollPolicy
from pldemu.runtime import RuntimeOptions
from pldemu.windows import NotifyOp, WaitCmp, Window, WindowSet

ROUNDS = 50
"""Barrier rounds per timed sample."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--policies", default="16:8:0.001,16:8:0",
                        help="comma-separated SPINS:YIELDS:BLOCK_AFTER poll policies (BLOCK_AFTER in seconds, inf: "
                             "timed sleeps only)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    policies = [_policy(spec) for spec in args.policies.split(",")]
    raw = RawSignals(comm, "shared")
    floor = FutexPingPong.create(comm, "shared")
    cpu: dict[str, float] = {}
    with WindowSet(comm, backend="shared") as batched, WindowSet(comm, backend="shared", batch_wakes=False) as eager, \
            barrier_instance(comm, RuntimeOptions(windows="shared")) as inst:
        sets = {"batched": batched.allocate("ab.b", n, np.int32, signal=True),
                "eager": eager.allocate("ab.e", n, np.int32, signal=True)}
        contenders = [Contender("raw MPI round", lambda: raw.barrier_rounds(ROUNDS), per_call=ROUNDS),
                      Contender("pld.tensor.barrier (interpreter)", repeated(inst.run, ROUNDS), per_call=ROUNDS)]
        for p in policies:
            for kind, sig in sets.items():
                contenders.append(Contender(f"{kind} {p.spin_polls}:{p.yield_polls}:{p.block_after * 1e6:g}us",
                                            lambda s=sig, q=p: windows_barrier(s, ROUNDS, q), per_call=ROUNDS))
        for p in policies:
            contenders.append(Contender(f"recipe order {p.spin_polls}:{p.yield_polls}:{p.block_after * 1e6:g}us",
                                        lambda q=p: _recipe_order(sets["batched"], ROUNDS, q), per_call=ROUNDS))
        if floor is not None:
            contenders.append(Contender("futex hop (floor)", floor.hops, per_call=FLOOR_HOPS))
        contenders = [_cpu_timed(c, cpu) for c in contenders]
        times = time_alternating(comm, contenders, args.warmup, args.iters)
        samples = args.warmup + args.iters
        bc = bounded(comm)
        cpu_max = {k: float(bc.allreduce([v / samples], MPI.MAX, "cpu")[0]) for k, v in sorted(cpu.items())}
    if floor is not None:
        floor.free()
    raw.free()
    if comm.Get_rank() == 0:
        base = times[0].median
        print(f"# {n} ranks, {args.iters} iterations (median of max over ranks), per barrier round / per hop")
        print(f"# {'what':<36} {'time(us)':>10} {'/ raw':>7} {'CPU(us)':>9}  (CPU: max over ranks, mean)")
        for t in times:
            print(f"  {t.name:<36} {t.median * 1e6:>10.1f} {t.median / base:>7.2f} {cpu_max[t.name] * 1e6:>9.1f}")
    return 0


def _recipe_order(sig: Window, rounds: int, policy: PollPolicy) -> None:
    """``windows_barrier`` in the lowered recipe's order: every rank credits and waits for ranks
    0, 1, ... in turn (``windows_barrier`` starts at its right neighbour, like the raw round)."""
    me, n = sig.rank, sig.size
    for _ in range(rounds):
        for peer in range(n):
            if peer != me:
                sig.notify(peer, me, 1, NotifyOp.AtomicAdd)
        for src in range(n):
            if src != me:
                sig.wait(src, 1, WaitCmp.Ge, timeout=60.0, policy=policy)
        for src in range(n):
            if src != me:
                sig.notify(me, src, -1, NotifyOp.AtomicAdd)


def _cpu_timed(c: Contender, cpu: dict[str, float]) -> Contender:
    """``c``, also adding this rank's CPU seconds per round to ``cpu[c.name]``."""
    fn = c.run

    def run() -> None:
        c0 = time.process_time()
        fn()
        cpu[c.name] = cpu.get(c.name, 0.0) + (time.process_time() - c0) / c.per_call

    return Contender(c.name, run, per_call=c.per_call)


def _policy(spec: str) -> PollPolicy:
    spins, yields, after = spec.split(":")
    policy = replace(DEFAULT_POLICY, spin_polls=int(spins), yield_polls=int(yields))
    if math.isinf(float(after)):
        return replace(policy, block=False)
    return replace(policy, block_after=float(after))


if __name__ == "__main__":
    raise SystemExit(main())
