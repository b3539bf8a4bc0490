"""Data operations: put/get/remote_load round trips, atomic add, poison fill."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.windows import (
    WindowAccessError,
    WindowSet,
    allocate_window,
    choose_backend,
    poison_value,
    region_layout,
)


@dataclass(frozen=True)
class Case:
    """A window shape, a view of it and two disjoint regions A and B."""

    shape: tuple[int, ...]
    view: tuple[int, ...]
    a_off: tuple[int, ...]
    a_shape: tuple[int, ...]
    b_off: tuple[int, ...]
    b_shape: tuple[int, ...]


CASES = {
    "1d": Case((64,), (64,), (8,), (16,), (40,), (10,)),
    "2d": Case((6, 10), (6, 10), (1, 2), (3, 5), (4, 0), (2, 10)),
    "2d-reshaped-view": Case((6, 10), (3, 20), (0, 3), (2, 4), (2, 0), (1, 20)),
    "3d": Case((4, 5, 6), (4, 5, 6), (1, 1, 2), (2, 3, 3), (3, 0, 0), (1, 5, 6)),
    "3d-column": Case((4, 5, 6), (4, 5, 6), (0, 0, 5), (4, 5, 1), (0, 0, 0), (1, 1, 1)),
}


def pattern(rank: int, shape: tuple[int, ...], dtype: np.dtype, sign: int = 1) -> np.ndarray:
    """Distinct values per rank, so misrouted data is visible."""
    return (sign * (np.arange(math.prod(shape)) + 1000 * rank + 1)).reshape(shape).astype(dtype)


def region(view: np.ndarray, off: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    return view[tuple(slice(o, o + n) for o, n in zip(off, shape, strict=True))]


def is_poison(arr: np.ndarray) -> np.ndarray:
    p = poison_value(arr.dtype)
    return np.isnan(arr) if isinstance(p, float) else arr == p


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float32])
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_put_get_roundtrip(comm: MPI.Intracomm, backend: str, case_id: str, dtype: type) -> None:
    case = CASES[case_id]
    dt = np.dtype(dtype)
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n
    with allocate_window(comm, f"rt-{case_id}", case.shape, dt, backend=backend) as w:
        assert w.backend == backend
        mine_a = pattern(r, case.a_shape, dt)
        mine_b = pattern(r, case.b_shape, dt, sign=-1)
        w.put(peer, case.view, case.a_off, mine_a)  # to the next rank (to myself when n == 1)
        w.put(r, case.view, case.b_off, mine_b)  # peer == me
        comm.Barrier()

        local = w.local_view(case.view)
        got_a = region(local, case.a_off, case.a_shape)
        got_b = region(local, case.b_off, case.b_shape)
        untouched = np.ones(case.view, dtype=bool)
        region(untouched, case.a_off, case.a_shape)[...] = False
        region(untouched, case.b_off, case.b_shape)[...] = False
        ok_local = (
            np.array_equal(got_a, pattern(src, case.a_shape, dt))
            and np.array_equal(got_b, mine_b)
            and bool(is_poison(local[untouched]).all())
        )
        # Read back: my region A at the peer, my region B at me, and the whole
        # peer segment through a flat view.
        back_a = w.get(peer, case.view, case.a_off, case.a_shape)
        back_b = w.remote_load(r, case.view, case.b_off, case.b_shape)
        whole = w.get(peer, (w.numel,), (0,), (w.numel,))
        ok_get = (
            np.array_equal(back_a, mine_a)
            and np.array_equal(back_b, mine_b)
            and np.array_equal(region(whole.reshape(case.view), case.a_off, case.a_shape), mine_a)
            and back_a.dtype == dt
            and back_a.flags.owndata
        )
        agree(comm, ok_local, f"local mismatch in {case_id}: {local!r}")
        agree(comm, ok_get, f"get mismatch in {case_id}: {back_a!r} {back_b!r}")
        comm.Barrier()  # nobody frees while others still read


@pytest.mark.mpi
def test_gets_see_every_peer(comm: MPI.Intracomm, backend: str) -> None:
    """Every rank reads every other rank's locally stored segment."""
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "all-peers", (3, 4), np.int64, backend=backend) as w:
        w.local[...] = pattern(r, (3, 4), w.dtype)
        w.sync()
        comm.Barrier()
        ok = all(
            np.array_equal(w.get(p, (3, 4), (0, 0), (3, 4)), pattern(p, (3, 4), w.dtype)) for p in range(n)
        )
        agree(comm, ok)
        comm.Barrier()


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex128])
def test_atomic_put_add(comm: MPI.Intracomm, backend: str, dtype: type) -> None:
    """All ranks add concurrently into the same region of every rank."""
    r, n = comm.Get_rank(), comm.Get_size()
    reps = 5
    with allocate_window(comm, "acc", (5, 7), dtype, backend=backend, fill=0) as w:
        add: np.ndarray = np.full((3, 4), r + 1, dtype=dtype)
        for _ in range(reps):
            for p in range(n):
                w.put(p, (5, 7), (1, 2), add, atomic_add=True)
        comm.Barrier()
        w.sync()
        total = reps * n * (n + 1) // 2
        expected: np.ndarray = np.zeros((5, 7), dtype=dtype)
        expected[1:4, 2:6] = total
        agree(comm, np.array_equal(w.local, expected), f"got {w.local!r}")
        assert w.stats.atomic_puts == reps * n
        comm.Barrier()


@pytest.mark.mpi
def test_atomic_add_negative_and_self(comm: MPI.Intracomm, backend: str) -> None:
    r = comm.Get_rank()
    with allocate_window(comm, "acc-neg", 10, np.int64, backend=backend, fill=100) as w:
        w.put(r, 10, 3, np.array([-7, -8], dtype=np.int64), atomic_add=True)
        comm.Barrier()
        expected = np.full(10, 100, dtype=np.int64)
        expected[3:5] = [93, 92]
        agree(comm, np.array_equal(w.local, expected), f"got {w.local!r}")


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("dtype", "check"),
    [
        (np.float64, lambda a: bool(np.isnan(a).all())),
        (np.float32, lambda a: bool(np.isnan(a).all())),
        (np.complex64, lambda a: bool(np.isnan(a.real).all() and np.isnan(a.imag).all())),
        (np.int32, lambda a: bool((a == np.iinfo(np.int32).min).all())),
        (np.int8, lambda a: bool((a == -128).all())),
        (np.uint16, lambda a: bool((a == 0xFFFF).all())),
        (np.bool_, lambda a: bool((a.view(np.uint8) == 0xA5).all())),
    ],
)
def test_poison_fill(comm: MPI.Intracomm, backend: str, dtype: type, check: object) -> None:
    with allocate_window(comm, "poison", (3, 5), dtype, backend=backend) as w:
        peer = (comm.Get_rank() + 1) % comm.Get_size()
        remote = w.get(peer, (15,), (0,), (15,))
        assert callable(check)
        agree(comm, check(w.local) and check(remote), f"local {w.local!r} remote {remote!r}")
        comm.Barrier()


@pytest.mark.mpi
def test_signal_and_custom_fill(comm: MPI.Intracomm, backend: str) -> None:
    with WindowSet(comm, backend=backend) as ws:
        sig = ws.allocate("sig", 6, np.int32, signal=True)
        sig_m1 = ws.allocate("sig-m1", 6, np.int32, signal=True, fill=-1)
        data_i32 = ws.allocate("data-i32", 6, np.int32)
        f = ws.allocate("f", (2, 2), np.float32, fill=3.5)
        assert sig.is_signal and not data_i32.is_signal
        ok = (
            (sig.local == 0).all()
            and (sig_m1.local == -1).all()
            and (data_i32.local == np.iinfo(np.int32).min).all()
            and (f.local == 3.5).all()
        )
        agree(comm, bool(ok))


@pytest.mark.mpi
def test_zero_size_and_empty_regions(comm: MPI.Intracomm, backend: str) -> None:
    peer = (comm.Get_rank() + 1) % comm.Get_size()
    with allocate_window(comm, "empty", (0, 4), np.float64, backend=backend) as w:
        assert w.local.shape == (0, 4)
        assert w.get(peer, (0, 4), (0, 0), (0, 4)).shape == (0, 4)
    with allocate_window(comm, "nonempty", (2, 4), np.float64, backend=backend) as w:
        w.put(peer, (2, 4), (1, 4), np.zeros((1, 0)))  # empty region at the far edge is in bounds
        assert w.get(peer, (2, 4), (2, 0), (0, 4)).shape == (0, 4)
        comm.Barrier()
        agree(comm, bool(np.isnan(w.local).all()))


@pytest.mark.mpi
def test_introspection_and_stats(comm: MPI.Intracomm, backend: str) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    with allocate_window(comm, "intro", (2, 3), np.float32, backend=backend) as w:
        assert (w.name, w.dtype, w.shape, w.backend) == ("intro", np.dtype(np.float32), (2, 3), backend)
        assert (w.rank, w.size, w.numel, w.nbytes) == (r, n, 6, 24)
        assert w.comm is comm
        w.put(r, (6,), (0,), np.ones(2, dtype=np.float32))
        w.get(r, (6,), (0,), (3,))
        w.remote_load(r, (3, 2), (0, 0), (1, 2))
        s = w.stats.as_dict()
        assert s["puts"] == 1 and s["gets"] == 2 and s["bytes_put"] == 8 and s["bytes_got"] == 20
        assert "intro" in repr(w)
        comm.Barrier()


@pytest.mark.mpi
def test_choose_backend(comm: MPI.Intracomm) -> None:
    # The test jobs run on one host, so auto means shared.
    assert choose_backend(comm, "auto") == "shared"
    assert choose_backend(comm, "rma") == "rma"
    assert choose_backend(comm, "shared") == "shared"
    with pytest.raises(ValueError, match="backend must be"):
        choose_backend(comm, "gpu")
    with allocate_window(comm, "auto", 4, np.float64) as w:
        assert w.backend == "shared"


@pytest.mark.mpi(min_size=2)
def test_mismatched_collective_arguments(comm: MPI.Intracomm, backend: str) -> None:
    """Ranks passing different shapes all get a ValueError instead of a hang."""
    shape = 4 if comm.Get_rank() == 0 else 5
    with pytest.raises(ValueError, match="ranks disagree"):
        allocate_window(comm, "mismatch", shape, np.float64, backend=backend)
    # Equivalent spellings are not a mismatch.
    spelled = (4,) if comm.Get_rank() == 0 else 4
    dt = np.float64 if comm.Get_rank() == 0 else "f8"
    with allocate_window(comm, "match", spelled, dt, backend=backend) as w:
        assert w.shape == (4,)


def test_region_layout() -> None:
    """Contiguous dims merge, unit dims vanish (pure function, no MPI)."""
    assert region_layout((6, 10), (2, 10)) == ((20, 1),)
    assert region_layout((6, 10), (3, 5)) == ((3, 10), (5, 1))
    assert region_layout((4, 5, 6), (4, 5, 1)) == ((20, 6),)
    assert region_layout((4, 5, 6), (1, 1, 1)) == ()
    assert region_layout((4, 5, 6), (2, 5, 6)) == ((60, 1),)
    assert region_layout((4, 5, 6), (2, 1, 3)) == ((2, 30), (3, 1))


@pytest.mark.mpi
@pytest.mark.parametrize(
    "dtype", [np.float16, np.dtype([("a", np.int16), ("b", np.float32)]), np.dtype("V3")]
)
def test_unusual_dtypes_move_intact(comm: MPI.Intracomm, backend: str, dtype: object) -> None:
    """Dtypes without an MPI accumulate type still move as bytes, strided too."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    r, n = comm.Get_rank(), comm.Get_size()
    peer, src = (r + 1) % n, (r - 1) % n

    def block(rank: int) -> np.ndarray:
        raw = (np.arange(6 * dt.itemsize, dtype=np.int64) * 7 + rank).astype(np.uint8)
        return raw.view(dt).reshape(2, 3)

    with allocate_window(comm, "odd", (4, 5), dt, backend=backend) as w:
        w.put(peer, (4, 5), (1, 2), block(r))
        comm.Barrier()
        got_local = w.local[1:3, 2:5].copy()
        got_remote = w.get(peer, (4, 5), (1, 2), (2, 3))
        same = got_local.tobytes() == block(src).tobytes() and got_remote.tobytes() == block(r).tobytes()
        if dt.kind != "f":
            same = same and bool((w.local[0].view(np.uint8) == 0xA5).all())
        agree(comm, same, f"{dt}: {got_local!r} {got_remote!r}")
        if dt.kind not in "iuc" and dt != np.dtype(np.longdouble):  # float16: MPICH sums it wrongly
            with pytest.raises(WindowAccessError, match="atomic_add is not supported"):
                w.put(peer, (4, 5), (0, 0), w.local[:1, :1], atomic_add=True)
        comm.Barrier()
