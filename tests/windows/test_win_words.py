"""Word-atomic store/load (the race detector's shadow clocks), check_put, and the bare mpi_window."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.windows import WindowAccessError, allocate_window, mpi_window


@pytest.mark.mpi
def test_store_words_lands_in_the_peer_and_load_words_reads_it(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "words", 3 * n, np.int64, backend=backend, fill=0) as w:
        right = (r + 1) % n
        w.store_words(right, 3 * r, np.array([r, 10 * r, -r - 1], dtype=np.int64))
        comm.Barrier()
        left = (r - 1) % n
        mine = w.load_words(r, 3 * left, 3)
        agree(comm, mine.tolist() == [left, 10 * left, -left - 1], f"read {mine.tolist()} from slot of {left}")
        untouched = [int(v) for i, v in enumerate(w.local.reshape(-1)) if i // 3 != left]
        agree(comm, untouched == [0] * (3 * n - 3), f"other slots {untouched}")
        agree(comm, w.load_words(r, 0, 0).size == 0, "an empty load")
        comm.Barrier()


@pytest.mark.mpi
def test_store_words_out_of_bounds_is_refused(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "words-oob", 4, np.int64, backend=backend, fill=0) as w:
        with pytest.raises(WindowAccessError, match=r"store_words: .* dim 0 covers \[3, 5\) outside \[0, 4\)"):
            w.store_words((r + 1) % n, 3, np.zeros(2, dtype=np.int64))
        with pytest.raises(WindowAccessError, match=r"load_words: .*peer"):
            w.load_words(n, 0, 1)
        comm.Barrier()
        agree(comm, (w.local == 0).all(), "a refused store wrote something")


@pytest.mark.mpi
def test_check_put_refuses_what_put_refuses_and_moves_nothing(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "chk", (2, 4), np.float32, backend=backend, fill=0.0) as w:
        peer = (r + 1) % n
        plan = w.check_put(peer, (2, 4), (1, 0), np.ones((1, 4), dtype=np.float32))
        agree(comm, plan.disp == 4 and plan.numel == 4, f"plan {plan}")
        for bad, text in (
            (lambda: w.check_put(peer, (2, 4), (1, 2), np.ones((1, 4), dtype=np.float32)), "dim 1 covers"),
            (lambda: w.check_put(n, (2, 4), (0, 0), np.ones((1, 4), dtype=np.float32)), "out of range"),
            (lambda: w.check_put(peer, (2, 4), (0, 0), np.ones((1, 4), dtype=np.float64)), "does not cast safely"),
        ):
            with pytest.raises(WindowAccessError, match=text):
                bad()
        comm.Barrier()
        agree(comm, (w.local == 0).all() and w.stats.puts == 0, "check_put moved data")
        comm.Barrier()


@pytest.mark.mpi
def test_mpi_window_is_a_bare_window_of_the_back_end(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    win, local = mpi_window(comm, backend, 2, np.int32)
    try:
        local[:] = [r, -r]
        win.Lock_all(MPI.MODE_NOCHECK)
        try:
            win.Sync()
            comm.Barrier()
            got = np.zeros(2, dtype=np.int32)
            win.Get([got, 2, MPI.INT32_T], (r + 1) % n, (0, 2, MPI.INT32_T))
            win.Flush((r + 1) % n)
        finally:
            win.Unlock_all()
        agree(comm, got.tolist() == [(r + 1) % n, -((r + 1) % n)], f"got {got.tolist()}")
    finally:
        win.Free()
    with pytest.raises(ValueError, match="'shared' or 'rma'"):
        mpi_window(comm, "auto", 1, np.int32)
