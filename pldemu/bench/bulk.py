"""Bulk data movement: one large ``put`` / ``get`` / ``remote_load`` against a plain memcpy.

Every rank moves ``E = bytes // itemsize`` elements at once, to or from its right neighbour, through
a one-op ``.pld`` function run by the interpreter (so the figure includes everything a recipe pays
for one transfer). The reference is ``numpy.copyto`` between two private arrays of the same size on
every rank at the same time (the memcpy an optimal single-copy transfer would be).

* put: ``pld.tile.put(win, right, src, ...)`` -- local array into the neighbour's window;
* get: ``pld.tile.get(dst, right, win, ...)`` -- the neighbour's window into a local array;
* remote_load: ``pld.tile.remote_load(win, right, ...)`` -- the neighbour's window into a fresh
  tile, returned by the function (a fresh tile is a fresh array: that allocation is part of the op).

Across hosts (the job's ranks on several shared-memory nodes, e.g. ``--sim-hosts 2x2``) two more rows
time one whole-window ``Window.put`` (the windows layer, no interpreter) to a rank of this rank's own
host (``put intra``: shared memory under the hybrid back end) and to the rank at the same position on
the next host (``put inter``: MPI RMA over the network), in the same iterations as the memcpy.

#wrong: after each timed call the moved data is compared with the sender's (recomputable) values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.bench.common import BenchError, Contender, Timing, gbps, time_alternating
from pldemu.harness.data import values
from pldemu.harness.oracle import count_wrong
from pldemu.ir import DType, parse_program
from pldemu.windows import HostLayout, Window

BULK_OPS = ("put", "get", "remote_load")
"""The transfers measured, in order."""

_STAGE_MAX = 4096
"""Stage tile width (only used with ``stage_pieces``; a transfer is one window op otherwise)."""

_RIGHT_NEIGHBOUR = """\
    ctx = pld.system.get_comm_ctx(win)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    right = (me + 1) % nr
"""
"""Every transfer's prologue: the peer is the right neighbour on the ring of ranks."""

_BULK_PROGRAM = """\
program bench_bulk {{
  local src: {dt}[1, {n}]
  local dst: {dt}[1, {n}]
  window win: {dt}[1, {n}]

  func main() {{
{right}    stage = tile.create([1, {stage}], dtype={dt}, mem=Vec)
    pld.tile.put(win, right, src, stage, [0, 0], [0, 0], [1, {n}], atomic=None)
  }}

  func get() {{
{right}    stage = tile.create([1, {stage}], dtype={dt}, mem=Vec)
    pld.tile.get(dst, right, win, stage, [0, 0], [0, 0], [1, {n}])
  }}

  func remote_load() {{
{right}    t = pld.tile.remote_load(win, right, [0, 0], [1, {n}], [1, {n}])
    return t
  }}
}}
"""


def bulk_program(elems: int, dtype: DType) -> Any:
    """The three one-transfer functions on ``[1, elems]`` buffers (``main`` is the put)."""
    text = _BULK_PROGRAM.format(dt=dtype.value, n=elems, stage=min(elems, _STAGE_MAX), right=_RIGHT_NEIGHBOUR)
    return parse_program(text, "<bench bulk>")


@dataclass(frozen=True)
class BulkRow:
    """One transfer at one size: pldemu against memcpy."""

    op: str
    nbytes: int
    pldemu: Timing
    memcpy: Timing

    @property
    def pldemu_gbps(self) -> float:
        """pldemu bandwidth (GB/s) from the median time."""
        return gbps(self.nbytes, self.pldemu.median)

    @property
    def memcpy_gbps(self) -> float:
        """memcpy bandwidth (GB/s) from the median time."""
        return gbps(self.nbytes, self.memcpy.median)

    @property
    def fraction(self) -> float:
        """pldemu bandwidth / memcpy bandwidth."""
        m = self.memcpy_gbps
        return self.pldemu_gbps / m if m > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "op": self.op,
            "bytes": self.nbytes,
            "pldemu_us": self.pldemu.median * 1e6,
            "memcpy_us": self.memcpy.median * 1e6,
            "pldemu_gbps": self.pldemu_gbps,
            "memcpy_gbps": self.memcpy_gbps,
            "fraction": self.fraction,
            "wrong": self.pldemu.wrong,
        }


def bench_bulk(
    comm: MPI.Intracomm, nbytes: int, dtype: DType, options: Any, warmup: int, iters: int
) -> list[BulkRow]:
    """Time put, get and remote_load of ``nbytes`` per rank against memcpy; collective."""
    from pldemu.runtime.interpreter import ProgramInstance

    elems = nbytes // dtype.itemsize
    if elems < 1:
        raise BenchError(f"bulk: {nbytes} bytes hold no {dtype.value} element")
    me, n = comm.Get_rank(), comm.Get_size()
    left, right = (me - 1) % n, (me + 1) % n
    dt = dtype.np
    mine = values(dt, None, 0, me, 0, elems).reshape(1, elems)
    from_left = values(dt, None, 0, left, 0, elems).reshape(1, elems)
    from_right = values(dt, None, 0, right, 0, elems).reshape(1, elems)
    a = np.array(mine, copy=True)
    b = np.empty_like(a)
    rows: list[BulkRow] = []
    with ProgramInstance(bulk_program(elems, dtype), comm, options) as inst:
        src, dst, win = inst.local("src"), inst.local("dst"), inst.local("win")
        np.copyto(src, mine)
        np.copyto(win, mine)  # what the neighbours get / remote_load
        memcpy = Contender("memcpy", lambda: np.copyto(b, a), check=lambda: count_wrong(mine, b))
        loaded: list[Any] = []

        def run_put() -> None:
            inst.run()

        def put_prepare() -> None:
            win.fill(np.nan)  # the left neighbour's put must land

        def put_check() -> int:
            bad = count_wrong(from_left, win)
            np.copyto(win, mine)  # restore for get / remote_load
            return bad

        def get_prepare() -> None:
            dst.fill(np.nan)

        def run_get() -> None:
            inst.run("get")

        def run_load() -> None:
            loaded[:] = inst.run("remote_load").returned

        def load_check() -> int:
            tile = loaded[0] if loaded else None
            loaded.clear()
            return elems if tile is None else count_wrong(from_right, tile.data)

        contenders = {
            "put": Contender("pldemu put", run_put, put_prepare, put_check),
            "get": Contender("pldemu get", run_get, get_prepare, lambda: count_wrong(from_right, dst)),
            "remote_load": Contender("pldemu remote_load", run_load, None, load_check),
        }
        for op in BULK_OPS:
            t_pl, t_mem = time_alternating(comm, [contenders[op], memcpy], warmup, iters)
            rows.append(BulkRow(op, elems * dt.itemsize, t_pl, t_mem))
        peers = host_peers(inst.hosts, me)
        if peers is not None:
            rows += _host_rows(comm, inst.window("win"), peers, mine, memcpy, warmup, iters)
    return rows


def host_peers(layout: HostLayout, me: int) -> tuple[int, int] | None:
    """(a rank on ``me``'s host, the rank at ``me``'s position on the next host), or None when the
    job does not span hosts or ``me``'s host has no other rank."""
    if not layout.spans_hosts:
        return None
    index = next(i for i, g in enumerate(layout.groups) if me in g)
    group, nxt = layout.groups[index], layout.groups[(index + 1) % len(layout.groups)]
    if len(group) < 2:
        return None
    pos = group.index(me)
    return group[(pos + 1) % len(group)], nxt[pos % len(nxt)]


def _host_rows(comm: MPI.Intracomm, win: Window, peers: tuple[int, int], mine: np.ndarray, memcpy: Contender,
               warmup: int, iters: int) -> list[BulkRow]:
    """``put intra`` / ``put inter`` (see the module docstring); every rank must have ``peers``
    (a layout of equal hosts with several ranks each), which ``bench_bulk`` callers share."""
    me, n = comm.Get_rank(), comm.Get_size()
    # Who writes into me: the peers' peers that name me (the mapping is a permutation on equal hosts).
    senders = comm.allgather(peers)
    rows = []
    for label, k in (("put intra", 0), ("put inter", 1)):
        src = next(r for r in range(n) if senders[r][k] == me)
        want = values(mine.dtype, None, 0, src, 0, mine.size).reshape(mine.shape)
        t_win, t_mem = time_alternating(comm, [_put_to(win, peers[k], mine, want, label), memcpy], warmup, iters)
        rows.append(BulkRow(label, mine.nbytes, t_win, t_mem))
    return rows


def _put_to(win: Window, peer: int, data: np.ndarray, want: np.ndarray, label: str) -> Contender:
    """One whole-window put of ``data`` into ``peer``; checked against what should land here."""

    def put() -> None:
        win.put(peer, data.shape, (0, 0), data)

    def prepare() -> None:
        win.local.fill(np.nan)

    def check() -> int:
        return count_wrong(want, win.local)

    return Contender(f"windows {label}", put, prepare, check)


__all__ = ["BULK_OPS", "BulkRow", "bench_bulk", "bulk_program", "host_peers"]
