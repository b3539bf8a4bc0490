"""The native MPI reference of every collective: one table, two calling disciplines.

:data:`NATIVE` maps a collective to the builder of its native MPI call on this rank's inputs. A
builder allocates the send and receive buffers once and returns a :class:`NativeCall` holding both
forms of the same call: ``start`` (non-blocking; the check harness completes it against a deadline,
so a deadlocked peer ends in a timeout) and ``blocking`` (the benchmark times it). Which form runs,
and what the filled buffer is compared with, stays with the caller. Barrier has no entry: it has no
data to compare (the benchmark times ``comm.Barrier`` directly).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from mpi4py import MPI

from pldemu.harness.data import CheckCase, RankInputs, clamp_rows, send_counts
from pldemu.harness.oracle import reduced_region
from pldemu.ir import ReduceOp

MPI_OP: Mapping[ReduceOp, MPI.Op] = MappingProxyType(
    {
        ReduceOp.Sum: MPI.SUM,
        ReduceOp.Max: MPI.MAX,
        ReduceOp.Min: MPI.MIN,
        ReduceOp.Prod: MPI.PROD,
    }
)
"""The MPI reduction of each pldemu reduction."""


@dataclass(frozen=True)
class NativeCall:
    """One native MPI collective on fixed buffers, in both calling disciplines."""

    start: Callable[[], MPI.Request]
    """Start the non-blocking form; the caller completes the request."""
    blocking: Callable[[], object]
    """Run the blocking form to completion."""
    out: np.ndarray
    """The buffer the call fills (this rank's result)."""
    send: np.ndarray
    """The buffer the call reads (held so it stays alive while a request is in flight)."""


@dataclass(frozen=True)
class AlltoallvRows:
    """Rows all_to_all_v sends to / receives from each peer (None in :func:`native_call`: every count is
    ``max_recv``, so all rows move)."""

    out_rows: Sequence[int]
    in_rows: Sequence[int]


Builder = Callable[[MPI.Comm, CheckCase, RankInputs, "AlltoallvRows | None"], NativeCall]


def _allreduce(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    """Allreduce of the region the recipe reduces (``out`` holds just that region)."""
    assert own.target is not None
    region = reduced_region(case)
    if region is None:
        send = np.ascontiguousarray(own.target)
    elif isinstance(region, int):
        send = np.ascontiguousarray(own.target.reshape(-1)[:region])
    else:
        send = np.ascontiguousarray(own.target[region])
    recv = np.empty_like(send)
    op = MPI_OP[case.reduce]
    return NativeCall(lambda: comm.Iallreduce(send, recv, op), lambda: comm.Allreduce(send, recv, op), recv, send)


def _reduce_scatter(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    assert own.target is not None
    send = np.ascontiguousarray(own.target)
    recv = np.empty(case.size, dtype=case.dtype)
    op = MPI_OP[case.reduce]
    return NativeCall(lambda: comm.Ireduce_scatter_block(send, recv, op),
                      lambda: comm.Reduce_scatter_block(send, recv, op), recv, send)


def _broadcast(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    """In place: the root's buffer (its own target) is never written by Bcast."""
    assert own.target is not None
    buf = np.ascontiguousarray(own.target.copy())
    return NativeCall(lambda: comm.Ibcast(buf, root=case.root), lambda: comm.Bcast(buf, root=case.root), buf, buf)


def _allgather(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    assert own.local_data is not None
    send = np.ascontiguousarray(own.local_data.reshape(-1))
    recv = np.empty((case.nranks, case.size), dtype=case.dtype)
    return NativeCall(lambda: comm.Iallgather(send, recv), lambda: comm.Allgather(send, recv), recv, send)


def _all_to_all(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    assert own.input is not None
    send = np.ascontiguousarray(own.input)
    recv = np.empty((case.nranks, case.size), dtype=case.dtype)
    return NativeCall(lambda: comm.Ialltoall(send, recv), lambda: comm.Alltoall(send, recv), recv, send)


def _all_to_all_v(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None) -> NativeCall:
    """Row ``s * max_recv + j`` of ``out`` is row j from sender s; rows not received stay NaN."""
    assert own.input is not None
    nr, size, m = case.nranks, case.size, case.max_recv
    if rows is None:
        rows = AlltoallvRows([m] * nr, [m] * nr)
    displs = [d * m * size for d in range(nr)]
    send = np.ascontiguousarray(own.input)
    recv = np.full((nr * m, size), np.nan, dtype=case.dtype)
    sends = [send, ([int(r) * size for r in rows.out_rows], displs)]
    recvs = [recv, ([int(r) * size for r in rows.in_rows], displs)]
    return NativeCall(lambda: comm.Ialltoallv(sends, recvs), lambda: comm.Alltoallv(sends, recvs), recv, send)


NATIVE: Mapping[str, Builder] = MappingProxyType({
    "allreduce": _allreduce,
    "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast,
    "allgather": _allgather,
    "all_to_all": _all_to_all,
    "all_to_all_v": _all_to_all_v,
})
"""The native MPI collective of every collective with data (barrier has none)."""


def native_call(comm: MPI.Comm, case: CheckCase, own: RankInputs, rows: AlltoallvRows | None = None) -> NativeCall:
    """The native MPI call of ``case`` on this rank's inputs ``own`` (KeyError: no native reference)."""
    return NATIVE[case.name](comm, case, own, rows)


def alltoallv_rows(case: CheckCase, me: int, iteration: int, own: RankInputs) -> AlltoallvRows:
    """The rows all_to_all_v moves in call ``iteration``: this rank's clamped send counts out, every
    sender's clamped count for this rank in."""
    assert own.send_counts is not None
    nr, m = case.nranks, case.max_recv
    out_rows = [int(r) for r in clamp_rows(own.send_counts, m)]
    in_rows = [int(clamp_rows(send_counts(case.seed, s, iteration, nr, m)[me], m)) for s in range(nr)]
    return AlltoallvRows(out_rows, in_rows)


__all__ = ["MPI_OP", "NATIVE", "AlltoallvRows", "NativeCall", "alltoallv_rows", "native_call"]
