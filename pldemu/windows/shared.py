"""Shared-memory back end: ``MPI_Win_allocate_shared`` + numpy views.

Usable when every rank of the communicator lives on one node.  Each peer's
segment is mapped into this process (``MPI_Win_shared_query``), so plain data
puts and gets are numpy copies into/out of the peer's view, bracketed by
``MPI_Win_sync`` memory barriers.  Atomics (``atomic_add`` puts, ``notify``)
still go through ``MPI_Accumulate`` (see ``base.py``): MPI only guarantees
atomicity among its own accumulate operations, so mixing in CPU atomics of
our own would not be safe.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from mpi4py import MPI

from .base import BackendName, RegionPlan, Window, segment_array

_IPROBE_EVERY = 16
"""A poll calls ``Iprobe`` every this many polls (and always when the count
is 0): ``Win_sync`` alone is a memory barrier, not a progress call, and MPICH
may process accumulates aimed at us in its progress engine."""


class SharedWindow(Window):
    """Window whose peers' segments are numpy views of node-shared memory."""

    backend: ClassVar[BackendName] = "shared"

    _peers: list[np.ndarray]

    def _create_win(self, nbytes: int) -> tuple[MPI.Win, np.ndarray]:
        info = MPI.Info.Create()
        try:
            # Page-aligned per-rank segments: avoids false sharing between
            # neighbours' signal cells and keeps every dtype aligned.
            info.Set("alloc_shared_noncontig", "true")
            win = MPI.Win.Allocate_shared(nbytes, self._dtype.itemsize, info, self._comm)
        finally:
            info.Free()
        try:
            win.Set_name(self._name[:120])
            peers = []
            for r in range(self._size):
                buf, _ = win.Shared_query(r)
                peers.append(segment_array(buf, self._dtype, self._numel))
        except BaseException:
            win.Free()
            raise
        self._peers = peers
        return win, peers[self._rank]

    def _release(self) -> None:
        self._peers = []  # drop our aliases of peer memory before it is unmapped
        super()._release()

    def _store(self, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        self._peers[peer].reshape(plan.view_shape)[plan.slices] = data.reshape(plan.shape)
        # Release barrier: the copy is visible before anything we do next
        # (in particular before a notify's atomic).
        self._sync()

    def _load(self, peer: int, plan: RegionPlan) -> np.ndarray:
        self._sync()  # acquire: see what other ranks stored before
        return self._peers[peer].reshape(plan.view_shape)[plan.slices].copy()

    def _poll_cell(self, cell: int, polls: int) -> int:
        self._sync()
        value = int(self._peers[self._rank][cell])
        if polls % _IPROBE_EVERY == 0:
            self._comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
        return value

    def _sync(self) -> None:
        win = self._win
        assert win is not None  # callers checked liveness
        win.Sync()
