"""Collectives: the lowered recipe executed by pldemu against the native MPI collective, same run.

SIZE (elements per row of ``pldemu.collectives.CollectiveSpec``) is derived from the byte size,
which is the bytes **per rank of the collective's natural buffer** -- the result window, which is
also what nccl-tests calls the size (``E = bytes // itemsize``):

==============  =====================  ===============================  ========================
collective      natural buffer         SIZE                             native reference
==============  =====================  ===============================  ========================
allreduce       target [1, SIZE]       E                                ``Allreduce``
broadcast       target [1, SIZE]       E                                ``Bcast``
allgather       target [NR, SIZE]      E // NR                          ``Allgather``
reduce_scatter  target [NR, SIZE]      E // NR                          ``Reduce_scatter_block``
all_to_all      target [NR, SIZE]      E // NR                          ``Alltoall``
all_to_all_v    target [NR*M, SIZE]    E // (NR*M), every count M       ``Alltoallv``
barrier         (none)                 --                               ``Barrier``
==============  =====================  ===============================  ========================

The size printed is the actual buffer (it is below the requested one when E does not divide).
Inputs are the check harness's exact-in-any-order data (``pldemu.harness.data``), so the result of
either implementation is compared with ``==`` against the oracle (``pldemu.harness.oracle``):
#wrong counts wrong elements over ranks and timed iterations. Result windows that are not also inputs
are poisoned (NaN) before every call, so a stale result cannot pass.

**Bounds that do not use pldemu's figures.** Every recipe is timed together with (alternating in
the same iterations, an oversubscribed machine drifts) the raw MPI-3 signal round of ``signals.py``
(``Fetch_and_op`` credits and polls, no pldemu code), a memcpy of the natural buffer, and the futex
ping-pong hop (``signals.FutexPingPong``, the machine floor). From the lowering report (barrier
phases) and one untimed counted run (bytes the busiest rank's data ops write):

* bound = barrier phases x raw MPI signal round + bytes moved / memcpy bandwidth;
* floor = barrier phases x one futex hop + bytes moved / memcpy bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.bench.common import (
    BenchError,
    Contender,
    Timing,
    bounded,
    bus_factor,
    gbps,
    ratio,
    time_alternating,
)
from pldemu.bench.signals import FLOOR_HOPS, FutexPingPong, RawSignals
from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.data import CheckCase, RankInputs, rank_inputs, values
from pldemu.harness.native import NATIVE, native_call
from pldemu.harness.oracle import count_wrong, expected
from pldemu.ir import AllreduceMode, DType, Op, ReduceOp
from pldemu.runtime.sites import OpEvent

BENCH_MAX_RECV = 4
"""all_to_all_v rows per sender (M); every send count is M, so all rows move (like all_to_all)."""

BENCH_SEED = 0
"""Seed of the input data."""

BOUND_ROUNDS = 20
"""Raw MPI signal rounds per timed sample of the round cost behind the bounds."""


@dataclass(frozen=True)
class CollectiveCase:
    """One row of the collectives table: which collective, which algorithm, how many bytes."""

    name: str
    nbytes: int
    """Requested bytes per rank of the natural buffer (see the module docstring)."""
    dtype: DType
    nranks: int
    mode: str = "mesh"
    """allreduce algorithm (mesh or ring); ignored by the other collectives."""
    root: int = 0

    @property
    def rows_per_sender(self) -> int:
        """Rows each sender owns in the natural buffer (M for all_to_all_v, else 1)."""
        return BENCH_MAX_RECV if self.name == "all_to_all_v" else 1

    @property
    def size(self) -> int:
        """SIZE, elements per row (0: the byte size is too small for this many ranks)."""
        elems = self.nbytes // self.dtype.itemsize
        if self.name in ("allreduce", "broadcast"):
            return elems
        if self.name == "barrier":
            return 1
        return elems // (self.nranks * self.rows_per_sender)

    @property
    def actual_bytes(self) -> int:
        """Bytes per rank of the natural buffer as built (0 for barrier)."""
        if self.name == "barrier":
            return 0
        rows = 1 if self.name in ("allreduce", "broadcast") else self.nranks * self.rows_per_sender
        return rows * self.size * self.dtype.itemsize

    @property
    def count(self) -> int:
        """Elements of the natural buffer (nccl-tests' count column)."""
        return self.actual_bytes // self.dtype.itemsize

    @property
    def label(self) -> str:
        """``allreduce mesh``, ``broadcast``, ..."""
        return f"{self.name} {self.mode}" if self.name == "allreduce" else self.name

    def spec(self) -> CollectiveSpec:
        """The program factory's spec of this case."""
        kw: dict[str, Any] = {"dtype": self.dtype, "size": self.size, "nranks": self.nranks}
        if self.name == "allreduce":
            kw["mode"] = AllreduceMode[self.mode]
        if self.name == "broadcast":
            kw["root"] = self.root
        if self.name == "all_to_all_v":
            kw["max_recv"] = BENCH_MAX_RECV
        return CollectiveSpec(self.name, **kw)

    def check_case(self) -> CheckCase:
        """The check harness's view of this case (inputs and oracle)."""
        return CheckCase(
            name=self.name,
            nranks=self.nranks,
            dtype=self.dtype.np,
            size=self.size,
            shape=(1, self.size),
            mode=self.mode,
            reduce=ReduceOp.Sum,
            root=self.root,
            max_recv=BENCH_MAX_RECV,
            seed=BENCH_SEED,
        )


@dataclass
class CollectiveRow:
    """Figures of one case (identical on every rank)."""

    case: CollectiveCase
    pldemu: Timing
    native: Timing
    barriers: int = 0
    """Barrier phases of the lowered recipe."""
    bytes_moved: int = 0
    """Bytes the recipe's data ops write on the busiest rank."""
    round_s: float = math.nan
    """The raw MPI signal round (``signals.RawSignals.barrier_rounds``), measured alongside."""
    memcpy_gbps: float = math.nan
    """memcpy bandwidth at the collective's size, measured alongside."""
    hop_s: float = math.nan
    """One hop of the futex ping-pong (the machine floor), measured alongside; NaN without one."""

    @property
    def bound_s(self) -> float | None:
        """Barrier phases x the raw MPI signal round + bytes moved / the memcpy bandwidth (None for a
        recipe without barrier phases)."""
        if not self.barriers:
            return None
        return self.barriers * self.round_s + self.copy_s

    @property
    def floor_s(self) -> float:
        """Barrier phases x one futex hop + bytes moved / the memcpy bandwidth (NaN without a hop)."""
        return self.barriers * self.hop_s + self.copy_s

    @property
    def copy_s(self) -> float:
        """``bytes_moved`` at the memcpy bandwidth, seconds."""
        if not self.bytes_moved:
            return 0.0
        return self.bytes_moved / (self.memcpy_gbps * 1e9) if self.memcpy_gbps > 0 else math.nan

    def figures(self, timing: Timing) -> tuple[float, float, float]:
        """(time us, algbw GB/s, busbw GB/s) of one implementation."""
        t = timing.median
        alg = gbps(self.case.actual_bytes, t)
        return t * 1e6, alg, alg * bus_factor(self.case.name, self.case.nranks)

    @property
    def ratio(self) -> float:
        """pldemu time / native time (median over iterations, max over ranks)."""
        return ratio(self.pldemu.median, self.native.median)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        p, n = self.figures(self.pldemu), self.figures(self.native)
        out: dict[str, Any] = {
            "collective": self.case.name,
            "mode": self.case.mode if self.case.name == "allreduce" else None,
            "requested_bytes": self.case.nbytes,
            "bytes": self.case.actual_bytes,
            "count": self.case.count,
            "dtype": self.case.dtype.value,
            "nranks": self.case.nranks,
            "pldemu": {"time_us": p[0], "algbw": p[1], "busbw": p[2], "wrong": self.pldemu.wrong,
                       "times_us": [t * 1e6 for t in self.pldemu.times]},
            "native": {"time_us": n[0], "algbw": n[1], "busbw": n[2], "wrong": self.native.wrong,
                       "times_us": [t * 1e6 for t in self.native.times]},
            "ratio": self.ratio,
        }
        bound = self.bound_s
        if bound is not None:
            out["bound_us"] = bound * 1e6
            out["floor_us"] = self.floor_s * 1e6
            out["barriers"] = self.barriers
            out["raw_round_us"] = self.round_s * 1e6
            out["futex_hop_us"] = self.hop_s * 1e6
            out["bytes_moved"] = self.bytes_moved
            out["memcpy_gbps"] = self.memcpy_gbps
            out["copy_us"] = self.copy_s * 1e6
        return out


# ----------------------------------------------------------------------------------------------
# Byte accounting of a recipe (for the bounds)
# ----------------------------------------------------------------------------------------------

_TILE_MATH = frozenset({Op.TILE_ADD, Op.TILE_SUB, Op.TILE_MUL, Op.TILE_MAXIMUM, Op.TILE_MINIMUM,
                        Op.TILE_ADDS, Op.TILE_MULS, Op.TILE_CAST, Op.TILE_EXP, Op.TILE_LOG, Op.TILE_SQRT,
                        Op.TILE_RSQRT, Op.TILE_RECIP, Op.TILE_NEG, Op.TILE_ABS, Op.TILE_DIV, Op.TILE_DIVS,
                        Op.TILE_MAXIMUMS, Op.TILE_MINIMUMS})


class ByteCounter:
    """A runtime listener adding up the bytes every data op writes: window transfers (put, get,
    remote_load), local tile loads and stores, and tile math results. Attached only for one untimed
    run after the timing (a listener switches the instance to its traced variant)."""

    def __init__(self) -> None:
        self.total = 0

    def __call__(self, ev: OpEvent) -> None:
        op, a = ev.op, ev.args
        if op is Op.PUT or op is Op.GET:
            item = a[0].array.itemsize
            self.total += item * (math.prod(a[6]) if len(a) > 4 else a[0].array.size)
        elif op is Op.REMOTE_LOAD:
            self.total += a[0].array.itemsize * math.prod(a[4] if len(a) > 4 else a[3])
        elif op is Op.TILE_LOAD:
            self.total += a[0].array.itemsize * math.prod(a[3] if len(a) > 3 else a[2])
        elif op is Op.TILE_STORE:
            self.total += a[0].data.itemsize * math.prod(a[0].valid)
        elif op in _TILE_MATH:
            self.total += a[0].data.nbytes


def recipe_barriers(program: Any, nranks: int) -> int:
    """Barrier phases of the (single) lowered collective in ``program``: credits per cell x rows."""
    from pldemu.lowering import lower_composite_ops_with_report
    from pldemu.lowering.common import eval_nr

    report = lower_composite_ops_with_report(program)
    total = 0
    for call in report.calls:
        credits = eval_nr(call.lowered.credits, nranks) or 0
        rows = eval_nr(call.lowered.rows, nranks) if call.lowered.rows is not None else 1
        total += credits * (rows or 1)
    return total


# ----------------------------------------------------------------------------------------------
# One case
# ----------------------------------------------------------------------------------------------


def _poison(arr: np.ndarray) -> None:
    arr.fill(np.nan)


def bench_collective(
    comm: MPI.Intracomm, case: CollectiveCase, options: Any, warmup: int, iters: int
) -> CollectiveRow:
    """Time one case: pldemu's lowered recipe and the native MPI collective, alternating; collective."""
    from pldemu.lowering import lower_composite_ops
    from pldemu.runtime.interpreter import ProgramInstance

    if case.size < 1:
        raise BenchError(f"{case.label}: {case.nbytes} bytes is too small for {case.nranks} ranks")
    me, nr = comm.Get_rank(), comm.Get_size()
    cp = collective_program(case.spec())
    cc = case.check_case()
    own = rank_inputs(cc, me, 0)
    exp = _expected(cc, me)
    with ProgramInstance(lower_composite_ops(cp.program), comm, options) as inst:
        pl = _pldemu_contender(case, inst, cp, own, exp)
        nat = _native_contender(case, comm, own, exp)
        row = _timed_with_bounds(comm, case, inst.backend, pl, nat, warmup, iters)
        row.barriers = recipe_barriers(cp.program, nr)
        counter = ByteCounter()
        inst.add_listener(counter)
        if pl.prepare is not None:
            pl.prepare()
        bc = bounded(comm)
        bc.barrier()
        inst.run()
        bc.barrier()
        row.bytes_moved = int(bc.allreduce([counter.total], MPI.MAX, "max over ranks")[0])
        bounded(comm).barrier()
    return row


def _timed_with_bounds(comm: MPI.Intracomm, case: CollectiveCase, backend: str, pl: Contender, nat: Contender,
                       warmup: int, iters: int) -> CollectiveRow:
    """Time the recipe and the native collective alternating with what the bounds need (the raw MPI
    signal round, a memcpy of the natural buffer, the futex hop where there is one: see the module
    docstring); collective."""
    raw = RawSignals(comm, backend)
    floor = FutexPingPong.create(comm, backend)
    try:
        src = np.ones(max(case.count, 1), dtype=case.dtype.np)
        dst = np.empty_like(src)
        extra = [Contender("raw round", lambda: raw.barrier_rounds(BOUND_ROUNDS), per_call=BOUND_ROUNDS),
                 Contender("memcpy", lambda: np.copyto(dst, src))]
        if floor is not None:
            extra.append(Contender("futex hop", floor.hops, per_call=FLOOR_HOPS))
        times = time_alternating(comm, [pl, nat, *extra], warmup, iters)
    finally:
        if floor is not None:
            floor.free()
        raw.free()
    row = CollectiveRow(case, times[0], times[1], round_s=times[2].median,
                        memcpy_gbps=gbps(src.nbytes, times[3].median))
    if floor is not None:
        row.hop_s = times[4].median
    return row


def _expected(cc: CheckCase, me: int) -> np.ndarray | None:
    """This rank's expected result window (all_to_all_v: every count is M, so all rows arrive)."""
    if cc.name == "barrier":
        return None
    if cc.name == "all_to_all_v":
        m, size, nr = cc.max_recv, cc.size, cc.nranks
        blocks = [values(cc.dtype, None, cc.seed, s, 0, m * size, start=me * m * size) for s in range(nr)]
        return np.concatenate(blocks).reshape(nr * m, size)
    target = expected(cc, me, 0).target
    assert target is not None
    return target


def _pldemu_contender(case: CollectiveCase, inst: Any, cp: Any, own: Any, exp: np.ndarray | None) -> Contender:
    name = case.name
    writes: list[tuple[np.ndarray, np.ndarray]] = []
    for role in ("target", "local_data", "input"):
        arr = getattr(own, role)
        buf_name = getattr(cp, role)
        if arr is not None and buf_name is not None:
            buf = inst.local(buf_name)
            writes.append((buf, arr.reshape(buf.shape)))
    poison: list[np.ndarray] = []
    if name in ("allgather", "all_to_all", "all_to_all_v"):
        poison.append(inst.local(cp.target))  # the result is not an input: start from NaN
    if name == "all_to_all_v":
        counts = inst.local(cp.send_counts)
        writes.append((counts, np.full(counts.shape, BENCH_MAX_RECV, dtype=counts.dtype)))

    def prepare() -> None:
        for dst, src in writes:
            np.copyto(dst, src)
        for arr in poison:
            _poison(arr)

    check: Callable[[], int] | None = None
    if exp is not None:
        target = inst.local(cp.target)
        exp_arr = exp

        def check() -> int:
            return count_wrong(exp_arr, target)

    return Contender("pldemu", inst.run, prepare, check)


def _native_contender(case: CollectiveCase, comm: MPI.Intracomm, own: RankInputs, exp: np.ndarray | None) -> Contender:
    """The native MPI collective (:data:`pldemu.harness.native.NATIVE`, blocking form, timed) on the
    same inputs; out of place (inputs never need restoring) except broadcast's root buffer."""
    name = case.name
    if name == "barrier":
        return Contender("native", comm.Barrier)
    if name not in NATIVE:
        raise BenchError(f"no native reference for {name}")
    assert exp is not None
    call = native_call(comm, case.check_case(), own)
    want = exp[comm.Get_rank()] if name == "reduce_scatter" else exp
    out = call.out
    prepare: Callable[[], None] | None = None
    if not (name == "broadcast" and comm.Get_rank() == case.root):
        def prepare() -> None:
            _poison(out)

    def check() -> int:
        return count_wrong(want, out)

    return Contender("native", call.blocking, prepare, check)


__all__ = [
    "BENCH_MAX_RECV",
    "ByteCounter",
    "CollectiveCase",
    "CollectiveRow",
    "bench_collective",
    "recipe_barriers",
]
