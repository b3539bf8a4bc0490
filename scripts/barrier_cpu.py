"""What one barrier round costs in CPU: the interpreter against the same recipe on ``pldemu.windows``.

    python scripts/barrier_cpu.py mix interp|windows|raw ROUNDS [REPS]
    mpiexec -n 4 python -m mpi4py scripts/barrier_cpu.py ranks ROUNDS [REPS]

``mix``: on one process, ``ROUNDS`` rounds of a barrier's op mix at 4 ranks (3 credits, 3 waits, 3
retires, every cell this rank's own so no wait blocks) through the interpreter (one ``run()`` per
round), written on ``pldemu.windows``, or as the raw MPI-3 atomics of ``pldemu bench signals`` (3
``Fetch_and_op`` + ``Flush`` credits and 3 polls); prints the best time per round. Under
``valgrind --tool=callgrind`` the difference of two ROUNDS counts gives instructions per round, a
figure the machine's load does not move (docs/benchmarks.md, issue 23, "Barrier round: the
interpreter's CPU").

``ranks``: ``pld.tensor.barrier`` through the interpreter and ``windows_barrier`` alternating,
``REPS`` samples of ``ROUNDS`` rounds each; prints the median wall time and CPU time per round
(max over ranks).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

from pldemu.bench.common import barrier_instance
from pldemu.bench.signals import RawSignals, windows_barrier
from pldemu.ir import parse_program
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.windows import NotifyOp, WaitCmp, Window, WindowSet

MIX = """program barrier_mix {
  signal signal: int32[4, 1]
  func main() {
    ctx = pld.system.get_comm_ctx(signal)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    for peer in range(0, 4, 1) {
      if peer != 3 {
        pld.system.notify(signal, me, [peer, 0], 1, op=AtomicAdd)
      }
    }
    for src in range(0, 4, 1) {
      if src != 3 {
        pld.system.wait(signal, [src, 0], 1, cmp=Ge)
      }
    }
    for src_1 in range(0, 4, 1) {
      if src_1 != 3 {
        pld.system.notify(signal, me, [src_1, 0], -1, op=AtomicAdd)
      }
    }
  }
}
"""
"""The lowered barrier at 4 ranks with every peer replaced by this rank's own cells."""


def _windows_mix(sig: Window, rounds: int) -> None:
    for _ in range(rounds):
        for k in range(3):
            sig.notify(0, k, 1, NotifyOp.AtomicAdd)
        for k in range(3):
            sig.wait(k, 1, WaitCmp.Ge, timeout=60.0)
        for k in range(3):
            sig.notify(0, k, -1, NotifyOp.AtomicAdd)


def _raw_mix(raw: RawSignals, rounds: int) -> None:
    for _ in range(rounds):
        raw.rounds += 1
        for _ in range(3):
            raw.notify(0, 0)
        for _ in range(3):
            raw.wait(0, raw.rounds)


def _best(fn: Callable[[], object], reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def mix(which: str, rounds: int, reps: int) -> None:
    comm = MPI.COMM_SELF
    with ProgramInstance(parse_program(MIX, "<barrier mix>"), comm, RuntimeOptions(windows="shared")) as inst, \
            WindowSet(comm, backend="shared") as ws:
        sig = ws.allocate("mix", (4, 1), np.int32, signal=True)
        raw = RawSignals(comm, "shared")
        runs = {"interp": lambda: [inst.run() for _ in range(rounds)],
                "windows": lambda: _windows_mix(sig, rounds), "raw": lambda: _raw_mix(raw, rounds)}
        print(f"{which}: {_best(runs[which], reps) / rounds * 1e6:.2f} us per round (best of {reps})")
        raw.free()


def ranks(rounds: int, reps: int) -> None:
    comm = MPI.COMM_WORLD
    samples: dict[str, list[tuple[float, float]]] = {}
    with WindowSet(comm, backend="shared") as ws, barrier_instance(comm, RuntimeOptions(windows="shared")) as inst:
        sig = ws.allocate("bar", comm.Get_size(), np.int32, signal=True)
        contenders = {"interpreter": lambda: [inst.run() for _ in range(rounds)],
                      "windows": lambda: windows_barrier(sig, rounds)}
        for _ in range(reps):
            for name, fn in contenders.items():
                comm.Barrier()
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                cpu, wall = (time.process_time() - c0) / rounds, (time.perf_counter() - t0) / rounds
                walls, cpus = comm.gather(wall), comm.gather(cpu)
                if walls is not None and cpus is not None:
                    samples.setdefault(name, []).append((max(walls), max(cpus)))
    for name, got in samples.items():
        wall = sorted(w for w, _ in got)[len(got) // 2]
        cpu = sorted(c for _, c in got)[len(got) // 2]
        print(f"{name:12s} wall {wall * 1e6:7.1f} us  CPU {cpu * 1e6:6.1f} us per round "
              f"(median of {reps} samples of {rounds} rounds, max over ranks)")


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("mix", "ranks"):
        print(__doc__)
        return 2
    if sys.argv[1] == "mix":
        mix(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 5)
    else:
        ranks(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 6)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
