"""Notify->wait hop latency microbenchmark (not a test).

Run:  mpiexec -n N python tests/windows/hop_latency.py [rounds]

A token (a notify ADD on the next rank's signal cell) goes round the ring of
all N ranks; one hop is one notify observed by the next rank's wait.  With
N == 2 this is a ping-pong.  Prints microseconds per hop for each back end.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from pldemu.windows import NotifyOp, WaitCmp, allocate_window


def ring(backend: str, rounds: int) -> float:
    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    peer = (r + 1) % n
    with allocate_window(comm, "hop", 1, np.int32, backend=backend, signal=True) as sig:
        comm.Barrier()
        start = time.perf_counter()
        for i in range(1, rounds + 1):
            if r == 0:
                sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
                sig.wait(0, i, WaitCmp.Ge, timeout=60.0)
            else:
                sig.wait(0, i, WaitCmp.Ge, timeout=60.0)
                sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
        elapsed = time.perf_counter() - start
        comm.Barrier()
    return elapsed / (rounds * n) * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for backend in ("shared", "rma"):
        ring(backend, rounds // 10)  # warm-up
        us = ring(backend, rounds)
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"{backend:6s} n={MPI.COMM_WORLD.Get_size()} hop {us:8.1f} us", flush=True)


if __name__ == "__main__":
    main()
