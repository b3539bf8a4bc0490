"""Passive-target RMA back end: ``MPI_Win_allocate`` + ``Put``/``Get``/``Flush``.

This is what runs across nodes.  The window is locked once (``Lock_all``) at
creation and unlocked at free; every data op is flushed to its target before
returning, which is what makes a later ``notify`` (even on another window)
ordered after it.  N-D regions travel as one operation with a cached derived
target datatype (see ``Window._target``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from mpi4py import MPI

from .base import SIGNAL_DTYPE, BackendName, RegionPlan, Window, segment_array


class RmaWindow(Window):
    """Window reached through MPI one-sided operations only."""

    backend: ClassVar[BackendName] = "rma"

    _poll_buf: np.ndarray

    @staticmethod
    def allocate_mpi(comm: MPI.Intracomm, nbytes: int, disp_unit: int) -> MPI.Win:
        return MPI.Win.Allocate(nbytes, disp_unit, MPI.INFO_NULL, comm)

    def _create_win(self, nbytes: int) -> tuple[MPI.Win, np.ndarray]:
        win = self.allocate_mpi(self._comm, nbytes, self._dtype.itemsize)
        try:
            win.Set_name(self._name[:120])
            local = segment_array(win.tomemory(), self._dtype, self._numel)
        except BaseException:
            win.Free()
            raise
        # [0] is the (ignored) NO_OP origin, [1] the fetched value: MPI wants
        # origin and result buffers disjoint.
        self._poll_buf = np.zeros(2, dtype=SIGNAL_DTYPE)
        self._wakes = self._wake_batch  # notifies complete at the end of a burst (Window._cell_atomic)
        return win, local

    def _store(self, peer: int, plan: RegionPlan, data: np.ndarray) -> None:
        win = self._win
        assert win is not None  # callers checked liveness
        # ``data`` is referenced by this frame until Flush returns: mpi4py
        # would not keep the origin buffer alive for us.
        win.Put(self._origin(data, plan), peer, self._target(plan))
        win.Flush(peer)

    def _load(self, peer: int, plan: RegionPlan) -> np.ndarray:
        win = self._win
        assert win is not None
        out = np.empty(plan.shape, dtype=self._dtype)
        win.Get(self._origin(out, plan), peer, self._target(plan))
        win.Flush(peer)
        return out

    def _load_into(self, peer: int, plan: RegionPlan, out: np.ndarray) -> None:
        win = self._win
        assert win is not None
        if peer == self._rank or out.dtype != self._dtype or not out.flags.c_contiguous:
            out[...] = self._load(peer, plan)  # own window (may overlap), a cast, or a strided target
            return
        win.Get(self._origin(out, plan), peer, self._target(plan))
        win.Flush(peer)

    def _poll_cell(self, cell: int, polls: int) -> int:
        win = self._win
        assert win is not None
        # An atomic read (NO_OP fetch) through MPI, flushed: this both reads
        # consistently with concurrent accumulates and drives progress, so
        # remote writes keep landing while we wait.
        buf = self._poll_buf
        win.Fetch_and_op([buf[0:1], 1, MPI.INT32_T], [buf[1:2], 1, MPI.INT32_T], self._rank, cell, MPI.NO_OP)
        win.Flush(self._rank)
        return int(buf[1])
