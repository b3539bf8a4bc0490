"""Every refused access names op/rank/peer/window/bounds and writes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.windows import NotifyOp, Window, WindowAccessError, WindowSet

Access = Callable[[Window, Window, int, int], Any]
"""(data window, signal window, my rank, size) -> performs the bad access."""

# (id, op named in the message, peer named (None: my rank), access, fragments of the message)
BAD_ACCESSES: list[tuple[str, str, Any, Access, tuple[str, ...]]] = [
    (
        "put-peer-too-big",
        "put",
        "n",
        lambda d, s, r, n: d.put(n, (4, 6), (0, 0), np.ones((1, 1))),
        ("out of range [0, {n})",),
    ),
    (
        "put-peer-negative",
        "put",
        -1,
        lambda d, s, r, n: d.put(-1, (4, 6), (0, 0), np.ones((1, 1))),
        ("peer -1 out of range",),
    ),
    (
        "put-view-elements",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (5, 5), (0, 0), np.ones((1, 1))),
        ("view shape [5, 5] has 25 elements, window has 24",),
    ),
    (
        "put-partly-outside",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (4, 6), (2, 0), np.ones((3, 6))),
        ("region offsets [2, 0] shape [3, 6] in view [4, 6]", "dim 0 covers [2, 5) outside [0, 4)"),
    ),
    (
        "put-negative-offset",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (4, 6), (0, -1), np.ones((1, 2))),
        ("dim 1 covers [-1, 1) outside [0, 6)",),
    ),
    (
        "put-data-rank-mismatch",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (4, 6), (0, 0), np.ones(6)),
        ("rank mismatch",),
    ),
    (
        "put-data-too-wide",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (4, 6), (1, 1), np.ones((2, 6))),
        ("shape [2, 6]", "dim 1 covers [1, 7) outside [0, 6)"),
    ),
    (
        "put-reshaped-view-outside",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (2, 12), (1, 8), np.ones((1, 5))),
        ("view [2, 12]", "dim 1 covers [8, 13) outside [0, 12)"),
    ),
    (
        "put-unsafe-dtype",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (4, 6), (0, 0), np.ones((1, 1), dtype=np.complex128)),
        ("does not cast safely",),
    ),
    (
        "atomic-put-outside",
        "put",
        "peer",
        lambda d, s, r, n: d.put((r + 1) % n, (24,), (20,), np.ones(5), atomic_add=True),
        ("dim 0 covers [20, 25) outside [0, 24)",),
    ),
    (
        "get-outside",
        "get",
        "peer",
        lambda d, s, r, n: d.get((r + 1) % n, (4, 6), (3, 3), (2, 2)),
        ("dim 0 covers [3, 5) outside [0, 4)",),
    ),
    (
        "get-peer",
        "get",
        "n",
        lambda d, s, r, n: d.get(n, (4, 6), (0, 0), (1, 1)),
        ("out of range",),
    ),
    (
        "remote-load-view",
        "remote_load",
        "peer",
        lambda d, s, r, n: d.remote_load((r + 1) % n, (4, 7), (0, 0), (1, 1)),
        ("view shape [4, 7] has 28 elements",),
    ),
    (
        "remote-load-outside",
        "remote_load",
        "peer",
        lambda d, s, r, n: d.remote_load((r + 1) % n, (24,), (24,), (1,)),
        ("dim 0 covers [24, 25) outside [0, 24)",),
    ),
    (
        "notify-cell",
        "notify",
        "peer",
        lambda d, s, r, n: s.notify((r + 1) % n, 4, 1, NotifyOp.AtomicAdd),
        ("cell 4 out of range [0, 4)",),
    ),
    (
        "notify-cell-negative",
        "notify",
        "peer",
        lambda d, s, r, n: s.notify((r + 1) % n, -1, 1, NotifyOp.Set),
        ("cell -1 out of range [0, 4)",),
    ),
    (
        "notify-peer",
        "notify",
        "n",
        lambda d, s, r, n: s.notify(n, 0, 1, NotifyOp.AtomicAdd),
        ("out of range",),
    ),
    (
        "notify-value",
        "notify",
        "peer",
        lambda d, s, r, n: s.notify((r + 1) % n, 0, 2**31, NotifyOp.AtomicAdd),
        ("outside INT32",),
    ),
    (
        "notify-data-window",
        "notify",
        "peer",
        lambda d, s, r, n: d.notify((r + 1) % n, 0, 1, NotifyOp.AtomicAdd),
        ("need an INT32 window",),
    ),
    (
        "wait-cell",
        "wait",
        None,
        lambda d, s, r, n: s.wait(9, 1, timeout=1.0),
        ("cell 9 out of range [0, 4)",),
    ),
]


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("case_id", "op", "peer_spec", "access", "fragments"), [pytest.param(*c, id=c[0]) for c in BAD_ACCESSES]
)
def test_refused_access(
    comm: MPI.Intracomm,
    backend: str,
    case_id: str,
    op: str,
    peer_spec: Any,
    access: Access,
    fragments: tuple[str, ...],
) -> None:
    r, n = comm.Get_rank(), comm.Get_size()
    peer = {"n": n, "peer": (r + 1) % n, None: r}.get(peer_spec, peer_spec)
    with WindowSet(comm, backend=backend) as ws:
        data = ws.allocate("bounds-data", (4, 6), np.float64)
        sig = ws.allocate("bounds-sig", 4, np.int32, signal=True)
        with pytest.raises(WindowAccessError) as info:
            access(data, sig, r, n)
        msg = str(info.value)
        for needed in (f"{op}:", f"rank {r} ", f"peer {peer}", "window 'bounds-"):
            assert needed in msg, f"{case_id}: {needed!r} missing from {msg!r}"
        for frag in fragments:
            assert frag.format(n=n) in msg, f"{case_id}: {frag!r} missing from {msg!r}"
        assert isinstance(info.value, IndexError)
        comm.Barrier()  # any (wrong) write from any rank has landed by now
        untouched = bool(np.isnan(data.local).all()) and bool((sig.local == 0).all())
        agree(comm, untouched, f"{case_id}: refused access wrote something: {data.local!r} {sig.local!r}")
        assert data.stats.puts == data.stats.atomic_puts == data.stats.gets == sig.stats.notifies == 0


@pytest.mark.mpi
@pytest.mark.parametrize("op", ["get", "remote_load"])
def test_a_planned_region_still_checks_the_peer(comm: MPI.Intracomm, backend: str, op: str) -> None:
    """Region plans are cached per (view, offsets, shape), not per peer: a region read once is still
    refused for a peer outside the job or of the wrong type, and read for an index-like one."""
    r, n = comm.Get_rank(), comm.Get_size()
    with WindowSet(comm, backend=backend) as ws:
        data = ws.allocate("planned", (4, 6), np.float64)
        data.local[...] = float(r)
        read = getattr(data, op)
        comm.Barrier()
        assert read(r, (4, 6), (1, 0), (1, 6)).tolist() == [[float(r)] * 6]  # plans the region
        for bad, fragment in ((n, f"peer {n} out of range [0, {n})"), (-1, "peer -1 out of range"),
                              (1.5, "peer must be an int")):
            with pytest.raises(WindowAccessError, match=re.escape(fragment)) as info:
                read(bad, (4, 6), (1, 0), (1, 6))
            assert f"{op}:" in str(info.value)
        peer = (r + 1) % n
        assert read(np.int64(peer), (4, 6), (1, 0), (1, 6)).tolist() == [[float(peer)] * 6]
        comm.Barrier()
