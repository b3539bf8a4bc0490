"""MPI program for ``test_no_dev_shm_leftovers_after_job``: allocate and free
windows on both back ends, then print every /dev/shm path this rank mapped.

Not a test module (no ``test_`` prefix): run it under ``mpiexec``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from pldemu.windows import NotifyOp, WaitCmp, WindowSet


def shm_mappings() -> set[str]:
    """Paths under /dev/shm mapped into this process (``(deleted)`` stripped); test_win_lifecycle uses it too."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                found.add(parts[5].strip().removesuffix(" (deleted)"))
    return found


def main() -> None:
    comm = MPI.COMM_WORLD
    seen = shm_mappings()
    for backend in ("shared", "rma"):
        with WindowSet(comm, backend=backend) as ws:
            data = ws.allocate("probe", (128, 128), np.float32)
            sig = ws.allocate("probe-sig", 4, np.int32, signal=True)
            peer = (comm.Get_rank() + 1) % comm.Get_size()
            data.put(peer, (128, 128), (0, 0), np.ones((2, 2), np.float32))
            sig.notify(peer, 0, 1, NotifyOp.AtomicAdd)
            sig.wait(0, 1, WaitCmp.Ge, timeout=60.0)
            seen |= shm_mappings()
    seen |= shm_mappings()
    for path in sorted(seen):
        print("SHM", path, flush=True)


if __name__ == "__main__":
    main()
