"""Hybrid back end: shared memory among the ranks of one host, MPI RMA to the other hosts.

Each window is two MPI windows over the same memory:

* a :class:`~pldemu.windows.shared.SharedWindow` on the host's communicator
  (``Split_type(COMM_TYPE_SHARED)``), which owns the memory and maps every host peer's segment;
* an MPI window over the whole communicator created (``MPI_Win_create``) on this rank's shared
  segment, reached with passive-target ``Put``/``Get``/``Accumulate``/``Flush`` exactly as the
  ``rma`` back end does (this class *is* an :class:`~pldemu.windows.rma.RmaWindow` for it).

Data moves per peer: a put, get or remote_load to a rank of this host is a numpy copy through the
shared mapping (the shared back end's primitives, memory barrier included); to a rank of another
host it is MPI RMA, flushed before returning (the origin buffer stays referenced until then).

Atomics never take the shared-memory path.  A signal cell may be notified by a rank of its own host
and by a rank of another host; MPI guarantees atomicity only among its own accumulates on one
window, so a CPU atomic from a host peer racing an ``MPI_Accumulate`` that the target's progress
engine applies would lose updates.  Every notify, fetch_notify, atomic_add put, word-atomic
store/load (the race detector's clocks) and every poll is therefore an MPI operation on the
whole-communicator window, whoever the peer is.  Polls are ``Fetch_and_op(NO_OP)`` + ``Flush`` of
this rank, which also drives MPI progress, so remote puts and accumulates keep landing while a
rank waits (over TCP they land only while the target makes MPI calls).

Ordering (the contract in ``base.py``) holds across the boundary: a host-local put ends with a
memory barrier and a remote one with a flush, both before the notify's accumulate is issued; a
satisfied wait ends with ``MPI_Win_sync``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

import numpy as np
from mpi4py import MPI

from .base import SIGNAL_DTYPE, BackendName, RegionPlan, segment_array
from .rma import RmaWindow
from .shared import SharedWindow


def host_ranks(comm: MPI.Intracomm, host: MPI.Intracomm) -> list[int]:
    """For every rank of ``comm``, its rank in ``host`` (this rank's host communicator), -1 for a
    rank of another host."""
    found = MPI.Group.Translate_ranks(comm.Get_group(), list(range(comm.Get_size())), host.Get_group())
    return [-1 if r == MPI.UNDEFINED else int(r) for r in found]


@dataclass(frozen=True)
class HostLayout:
    """Where the ranks of a communicator live: ``names[r]`` is rank r's processor name (its host's
    hostname) and ``groups`` the ``MPI.COMM_TYPE_SHARED`` groups (ranks that share memory), each
    sorted, in order of their lowest rank."""

    names: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]

    @property
    def spans_hosts(self) -> bool:
        """True when the ranks are on more than one shared-memory node."""
        return len(self.groups) > 1

    @property
    def consistent(self) -> bool:
        """True when the shared-memory groups are exactly the groups of equal processor names (each
        host is one node, and no two hosts share a name)."""
        by_name: dict[str, list[int]] = {}
        for rank, name in enumerate(self.names):
            by_name.setdefault(name, []).append(rank)
        return sorted(tuple(g) for g in by_name.values()) == sorted(self.groups)

    def describe(self) -> str:
        """``2 hosts: pldemu-h1 [0, 1], pldemu-h2 [2, 3]`` (shared-memory groups, named)."""
        parts = [f"{self.names[g[0]]} {list(g)}" for g in self.groups]
        note = "" if self.consistent else " (processor names and shared-memory groups differ)"
        return f"{len(self.groups)} hosts: {', '.join(parts)}{note}"


def host_layout(comm: MPI.Intracomm) -> HostLayout:
    """Every rank's processor name and shared-memory group (collective over ``comm``)."""
    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        leader = host.bcast(comm.Get_rank(), root=0)
    finally:
        host.Free()
    found = comm.allgather((MPI.Get_processor_name(), leader))
    groups: dict[int, list[int]] = {}
    for rank, (_, lead) in enumerate(found):
        groups.setdefault(lead, []).append(rank)
    return HostLayout(tuple(name for name, _ in found), tuple(tuple(g) for _, g in sorted(groups.items())))


class HybridWindow(RmaWindow):
    """Window whose host peers are reached through shared memory and every other peer through MPI RMA
    (signals and atomics always through MPI; see the module docstring)."""

    backend: ClassVar[BackendName] = "hybrid"

    _host: MPI.Intracomm | None = None
    _shm: SharedWindow | None = None
    _host_rank: list[int]

    def _create_win(self, nbytes: int) -> tuple[MPI.Win, np.ndarray]:
        host = cast(MPI.Intracomm, self._comm.Split_type(MPI.COMM_TYPE_SHARED))
        try:
            self._host_rank = host_ranks(self._comm, host)
            # fill=None: the byte pattern fits any dtype; Window.__init__ fills the real value after.
            shm = SharedWindow(host, self._name, self._shape, self._dtype, fill=None, signal=False)
        except BaseException:
            host.Free()
            raise
        try:
            shm_win = shm._live_win("allocate")
            win = MPI.Win.Create(shm_win.tomemory(), self._dtype.itemsize, MPI.INFO_NULL, self._comm)
        except BaseException:
            shm.free()
            host.Free()
            raise
        self._host, self._shm = host, shm
        win.Set_name(self._name[:120])
        self._poll_buf = np.zeros(2, dtype=SIGNAL_DTYPE)  # as RmaWindow's: NO_OP origin, fetched value
        self._wakes = self._wake_batch  # as RmaWindow's: notifies complete at the end of a burst
        return win, segment_array(shm_win.tomemory(), self._dtype, self._numel)

    def _release(self) -> None:
        try:
            super()._release()  # the whole-communicator window first: it lives on the shared segment
        finally:
            shm, host, self._shm, self._host = self._shm, self._host, None, None
            try:
                if shm is not None:
                    shm.free()
            finally:
                if host is not None:
                    host.Free()

    def _local_peer(self, peer: int) -> tuple[SharedWindow | None, int]:
        """The shared window and ``peer``'s rank in it, or (None, -1) for a peer on another host."""
        local = self._host_rank[peer]
        return (self._shm, local) if local >= 0 else (None, -1)

    def _store(self, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        shm, local = self._local_peer(peer)
        if shm is None:
            super()._store(peer, plan, data)
        else:
            shm._store(local, plan, data)

    def _load(self, peer: int, plan: RegionPlan) -> np.ndarray:
        shm, local = self._local_peer(peer)
        return super()._load(peer, plan) if shm is None else shm._load(local, plan)

    def _load_into(self, peer: int, plan: RegionPlan, out: np.ndarray) -> None:
        shm, local = self._local_peer(peer)
        if shm is None:
            super()._load_into(peer, plan, out)
        else:
            shm._load_into(local, plan, out)

    def is_host_peer(self, peer: int) -> bool:
        """True when ``peer`` is on this rank's host (its data moves through shared memory)."""
        return self._host_rank[self._check_peer("is_host_peer", peer)] >= 0
