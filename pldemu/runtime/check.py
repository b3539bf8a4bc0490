"""The checking harness (the nccl-tests of pldemu): run one collective K times and check every call.

:func:`run_check` runs on every rank of a communicator.  It lowers the collective's program once,
instantiates it once, and then, call after call on the *same* signal buffer:

1. writes this rank's inputs for the iteration (``pldemu.runtime.data``: exact in any order),
2. ``run()``\\ s the lowered program,
3. compares this rank's result buffers with the NumPy oracle (``pldemu.runtime.oracle``).

There is **no MPI synchronisation between calls**: the self-clearing credit protocol alone must keep
back-to-back calls apart.  The one exception is the *consume fence* (:data:`CONSUME_FENCE`): for
collectives whose protocol lets a fast peer write this rank's result window for call i+1 before this
rank has read call i's result, an MPI barrier follows the comparison.  That race is the protocol's
documented contract (the window is the result "until the caller consumes it"), not a bug to catch:

* allgather and all_to_all push into every peer's target *before* their first barrier, so a peer that
  has entered call i+1 overwrites rows this rank has not compared yet;
* broadcast: nothing stops a fast root from writing call i+1's data into its window while a slow peer
  is still reading call i's (pypto #2175, deferred upstream), so the root must not write early.

At the end of every block of ``block`` iterations all ranks meet at an MPI barrier and check that
every signal cell on every rank is exactly 0 (the protocol's claim once all ranks have retired a call
and no next-call credit has arrived), compare the block's last result with the native MPI collective
on the same inputs (``Allreduce``, ``Allgather``, ``Reduce_scatter_block``, ``Bcast``, ``Alltoall``,
``Alltoallv``; barrier has none), and reduce the block's figures over ranks.  Rank 0 prints one row per
block as it finishes, nccl-tests style.

Every call also checks the protocol's ordering claim through a small epoch window: each rank publishes
the number of the call it is entering, and when its call i returns every peer must be in call i or
i+1 (nobody passed a barrier early, nobody runs more than one call ahead).

Every MPI wait of the harness itself is bounded (non-blocking request polled against a deadline), so a
deadlocked collective ends in :class:`CheckTimeout` on every rank instead of a hang.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from pldemu.ir import DType, ReduceOp
from pldemu.runtime.data import CheckCase, clamp_rows, max_exact_ranks, rank_inputs, send_counts
from pldemu.runtime.harness import CheckError, CheckTimeout, Failure, RowTotals, bounded, checkpoint_checkers
from pldemu.runtime.harness import rank0_printer as _rank0_printer
from pldemu.runtime.harness import record_failure as _first_error
from pldemu.runtime.harness import report_line as _report
from pldemu.runtime.harness import signal_cells as _signal_cells
from pldemu.runtime.oracle import check_rank, reduced_region, signal_nonzero
from pldemu.windows import allocate_window

CONSUME_FENCE = frozenset({"allgather", "all_to_all", "broadcast"})
"""Collectives that need an MPI barrier after the result is consumed (see the module docstring)."""

ROWS_TARGET = 8
"""The default block makes about this many progress rows."""

HEADER = f"{'iters':>7}  {'size(B)':>10}  {'dtype':>5}  {'time/iter(us)':>13}  {'#wrong':>7}  {'cells!=0':>8}  {'native':>7}"
"""Column titles of the progress table (nccl-tests style)."""

_MPI_OP: Mapping[ReduceOp, MPI.Op] = MappingProxyType(
    {
        ReduceOp.Sum: MPI.SUM,
        ReduceOp.Max: MPI.MAX,
        ReduceOp.Min: MPI.MIN,
        ReduceOp.Prod: MPI.PROD,
    }
)


class _SpecLike(Protocol):
    """The fields of ``pldemu.collectives.CollectiveSpec`` the harness reads."""

    name: Any
    mode: Any
    dtype: Any
    size: Any
    shape: Any
    valid_shape: Any
    reduce: Any
    root: Any
    max_recv: Any
    nranks: Any


class _ProgramLike(Protocol):
    """The fields of ``pldemu.collectives.CollectiveProgram`` the harness reads."""

    spec: Any
    program: Any
    target: Any
    signal: Any
    local_data: Any
    input: Any
    send_counts: Any
    recv_counts: Any


def default_block(iters: int) -> int:
    """Iterations per block so that ``iters`` makes about :data:`ROWS_TARGET` rows."""
    return max(1, math.ceil(iters / ROWS_TARGET))


def _np_dtype(value: Any) -> np.dtype:
    if isinstance(value, DType):
        return value.np
    if isinstance(value, str):
        return DType.parse(value).np
    return np.dtype(value)


def _reduce_op(value: Any) -> ReduceOp:
    if value is None:
        return ReduceOp.Sum
    if isinstance(value, ReduceOp):
        return value
    if isinstance(value, str):
        for op in ReduceOp:
            if op.name.lower() == value.lower():
                return op
        raise CheckError(f"unknown reduce op {value!r}")
    return ReduceOp(int(value))


def _text(value: Any, default: str) -> str:
    """An enum member's name or a string, lower-cased (``AllreduceMode.ring`` -> ``ring``)."""
    if value is None:
        return default
    name = getattr(value, "name", value)
    return str(name).lower()


def _dims(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    return tuple(int(v) for v in value)


def case_from_spec(spec: _SpecLike, nranks: int, seed: int = 0) -> CheckCase:
    """The harness's view (:class:`CheckCase`) of a lowering ``CollectiveSpec`` on ``nranks`` ranks."""
    if spec.nranks is not None and int(spec.nranks) != nranks:
        raise CheckError(f"the program is built for {spec.nranks} ranks but runs on {nranks}")
    size = int(spec.size) if spec.size is not None else 0
    shape = _dims(spec.shape)
    if shape is None:
        shape = (1, size)
    if not size:
        size = shape[-1] if spec.name != "allreduce" else math.prod(shape)
    return CheckCase(
        name=str(spec.name),
        nranks=nranks,
        dtype=_np_dtype(spec.dtype),
        size=size,
        shape=shape,
        valid_shape=_dims(spec.valid_shape),
        mode=_text(spec.mode, "mesh"),
        reduce=_reduce_op(spec.reduce),
        root=int(spec.root or 0),
        max_recv=int(spec.max_recv or 1),
        seed=seed,
    )


def _name(buffer: Any) -> str | None:
    """A buffer given as a name or as an IR Var."""
    if buffer is None:
        return None
    return str(getattr(buffer, "name", buffer))


# ----------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockRow:
    """One progress row: figures of one block of iterations, reduced over all ranks."""

    iters: int
    """Iterations done at the end of this block (cumulative)."""
    count: int
    """Iterations in this block."""
    size_bytes: int
    dtype: str
    time_us: float
    """Per-iteration ``run()`` time: the slowest rank's block total divided by ``count``."""
    wrong: int
    """Wrong elements, summed over ranks and over the block's iterations."""
    cells_nonzero: int
    """Signal cells != 0 after the block, summed over ranks."""
    native: int | None
    """Elements where the native MPI collective disagreed with pldemu (summed over ranks); None: n/a."""
    invariants: int = 0
    """Protocol invariant violations found by the runtime's checker in this block (all ranks)."""
    races: int = 0
    """Race reports of the race detector at this block's checkpoint."""

    @property
    def ok(self) -> bool:
        """True when nothing was wrong in this block."""
        return (self.wrong == 0 and self.cells_nonzero == 0 and not self.native and not self.invariants
                and not self.races)

    def format(self) -> str:
        """The row as printed under :data:`HEADER` (invariant and race counts follow when non-zero)."""
        native = "n/a" if self.native is None else ("ok" if self.native == 0 else f"{self.native}!")
        extra = (f"  invariants={self.invariants}" if self.invariants else "") + (
            f"  races={self.races}" if self.races else "")
        return (
            f"{self.iters:>7}  {self.size_bytes:>10}  {self.dtype:>5}  {self.time_us:>13.1f}  "
            f"{self.wrong:>7}  {self.cells_nonzero:>8}  {native:>7}{extra}"
        )


@dataclass
class CheckResult(RowTotals):
    """Outcome of :func:`run_check` (identical on every rank except :attr:`first_error`). ``ok``: every
    element was right, every cell zero and native MPI agreed (see :class:`BlockRow`)."""

    case: CheckCase
    rows: list[BlockRow] = field(default_factory=list)
    first_error: str | None = None
    """This rank's first wrong element / non-zero cell, as printed."""
    backend: str = ""
    failure: Failure | None = None
    """This rank's first failure, classified (``first_error`` is its text)."""
    kinds: dict[str, Failure] = field(default_factory=dict)
    """This rank's first failure of each kind."""
    stopped: bool = False
    """True when ``stop_on_failure`` ended the run before ``iters`` iterations."""

    @property
    def wrong(self) -> int:
        """Wrong elements over all iterations and ranks."""
        return sum(r.wrong for r in self.rows)

    @property
    def native_wrong(self) -> int | None:
        """Native-MPI disagreements over all blocks (None: no native collective)."""
        vals = [r.native for r in self.rows if r.native is not None]
        return sum(vals) if vals else None

    def summary(self) -> str:
        """One line: what ran and the verdict."""
        native = self.native_wrong
        nat = "n/a" if native is None else ("ok" if native == 0 else f"{native} differ")
        verdict = "PASS" if self.ok else "FAIL"
        return (
            f"# {self.case.label}: {self.case.nranks} ranks, {self.iters} iters, {self.wrong} wrong, "
            f"{self.cells_nonzero} signal cells != 0, native {nat}, {self.time_us:.1f} us/iter: {verdict}"
        )


# ----------------------------------------------------------------------------------------------
# Native MPI reference
# ----------------------------------------------------------------------------------------------


def native_mismatch(
    comm: MPI.Comm,
    case: CheckCase,
    iteration: int,
    target: np.ndarray | None,
    recv_counts: np.ndarray | None,
    timeout: float,
) -> int | None:
    """Run the native MPI collective on ``iteration``'s inputs; count elements that differ from pldemu.

    ``target``/``recv_counts`` are this rank's pldemu results of that iteration.  Returns None for
    barrier (no native equivalent).  Collective over ``comm``.
    """
    me, nr, size = comm.Get_rank(), case.nranks, case.size
    own = rank_inputs(case, me, iteration)
    name = case.name
    what = f"native {name}"
    if name == "barrier":
        return None
    assert target is not None
    if name == "allreduce":
        assert own.target is not None
        region = reduced_region(case)
        if region is None:
            send = np.ascontiguousarray(own.target)
        elif isinstance(region, int):
            send = np.ascontiguousarray(own.target.reshape(-1)[:region])
        else:
            send = np.ascontiguousarray(own.target[region])
        recv = np.empty_like(send)
        bounded(comm, timeout).complete(comm.Iallreduce(send, recv, _MPI_OP[case.reduce]), what)
        ref = own.target.copy()
        if region is None:
            ref[...] = recv
        elif isinstance(region, int):
            ref.reshape(-1)[:region] = recv
        else:
            ref[region] = recv
        return _count_diff(ref, target)
    if name == "reduce_scatter":
        assert own.target is not None
        recv = np.empty(size, dtype=case.dtype)
        req = comm.Ireduce_scatter_block(np.ascontiguousarray(own.target), recv, _MPI_OP[case.reduce])
        bounded(comm, timeout).complete(req, what)
        return _count_diff(recv, target[me])
    if name == "broadcast":
        assert own.target is not None
        buf = np.ascontiguousarray(own.target.copy())
        bounded(comm, timeout).complete(comm.Ibcast(buf, root=case.root), what)
        return _count_diff(buf, target)
    if name == "allgather":
        assert own.local_data is not None
        recv = np.empty((nr, size), dtype=case.dtype)
        bounded(comm, timeout).complete(comm.Iallgather(np.ascontiguousarray(own.local_data.reshape(-1)), recv), what)
        return _count_diff(recv, target)
    if name == "all_to_all":
        assert own.input is not None
        recv = np.empty((nr, size), dtype=case.dtype)
        bounded(comm, timeout).complete(comm.Ialltoall(np.ascontiguousarray(own.input), recv), what)
        return _count_diff(recv, target)
    if name == "all_to_all_v":
        return _native_alltoallv(comm, case, iteration, target, recv_counts, timeout)
    raise CheckError(f"no native reference for {name}")


def _native_alltoallv(
    comm: MPI.Comm,
    case: CheckCase,
    iteration: int,
    target: np.ndarray,
    recv_counts: np.ndarray | None,
    timeout: float,
) -> int:
    me, nr, size, m = comm.Get_rank(), case.nranks, case.size, case.max_recv
    own = rank_inputs(case, me, iteration)
    assert own.input is not None and own.send_counts is not None
    out_rows = clamp_rows(own.send_counts, m)
    in_rows = np.array(
        [int(clamp_rows(send_counts(case.seed, s, iteration, nr, m)[me], m)) for s in range(nr)]
    )
    displs = [d * m * size for d in range(nr)]
    recv = np.full((nr * m, size), np.nan, dtype=case.dtype)
    send = np.ascontiguousarray(own.input)
    req = comm.Ialltoallv(
        [send, ([int(r) * size for r in out_rows], displs)],
        [recv, ([int(r) * size for r in in_rows], displs)],
    )
    bounded(comm, timeout).complete(req, "native all_to_all_v")
    diff = 0
    for s in range(nr):
        rows = int(in_rows[s])
        block = slice(s * m, s * m + rows)
        diff += _count_diff(recv[block], target[block])
    if recv_counts is not None:
        diff += _count_diff(in_rows.reshape(nr, 1).astype(np.int32), recv_counts.reshape(nr, 1))
    return diff


def _count_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(np.asarray(a) != np.asarray(b).reshape(np.asarray(a).shape)))


# ----------------------------------------------------------------------------------------------
# The check loop
# ----------------------------------------------------------------------------------------------


def run_check(
    comm: MPI.Intracomm,
    cp: _ProgramLike,
    iters: int,
    options: Any,
    block: int | None = None,
    *,
    emit: Callable[[str], None] | None = None,
    report: Callable[[str], None] | None = _report,
    header: bool = True,
    sync_timeout: float | None = None,
    lower: Callable[[Any], Any] | None = None,
    before_run: Callable[[int], None] | None = None,
    consume_fence: bool | None = None,
    stop_on_failure: bool = False,
    on_instance: Callable[[Any], None] | None = None,
) -> CheckResult:
    """Run ``cp``'s collective ``iters`` times back to back on every rank of ``comm`` and check each call.

    ``options`` is the runtime's ``RuntimeOptions`` (its ``seed`` also seeds the data, its ``timeout``
    bounds every wait).  ``block`` iterations make one progress row (default :func:`default_block`).
    ``emit`` prints the table (default: rank 0 to stdout; pass ``lambda s: None`` to silence it),
    ``report`` prints this rank's first wrong element / non-zero cell (None: silent).  The harness's
    own MPI waits time out after ``sync_timeout`` seconds (default: 4x ``options.timeout``, at least
    60 s).  ``lower`` replaces LowerCompositeOps and ``before_run(iteration)`` is called before every
    call (tests use them to break a recipe or delay a rank and check that the harness notices).
    ``consume_fence`` overrides the fence policy (None: :data:`CONSUME_FENCE`; False: never fence,
    the back-to-back usage some mutants model). ``stop_on_failure`` ends the run after the first
    block with any failure (every rank agrees on that at the block end). ``on_instance(inst)`` is
    called with the program instance once it exists (a caller that must look at the runtime's
    checkers after a deadlock keeps it). Collective: every rank of ``comm`` must call it with the
    same arguments.

    The runtime's optional checkers are driven from here when the instance has them: the protocol
    invariant checker (``RuntimeOptions.invariants``) and the race detector (``race_detect``) get a
    checkpoint at every block end; the race detector also learns of the harness's own accesses
    (inputs written, results consumed) and of its barriers; deferred visibility
    (``visibility="deferred"``) lands this rank's own writes before the harness touches its
    windows and everything at the harness's barriers.

    Besides the data, every call checks the ordering claim of the credit protocol: each rank
    publishes the number of the call it is entering in an epoch window, and when its call ``i``
    returns, every peer must be in call ``i`` or ``i + 1`` (none behind: no rank passes a barrier
    early; none further ahead: a fast rank runs at most one call ahead).  Violations count as wrong
    elements.
    """
    from pldemu.lowering import lower_composite_ops
    from pldemu.runtime.interpreter import ProgramInstance

    if iters < 1:
        raise CheckError(f"iters must be >= 1, got {iters}")
    block = default_block(iters) if block is None else block
    if block < 1:
        raise CheckError(f"block must be >= 1, got {block}")
    nr, me = comm.Get_size(), comm.Get_rank()
    seed = int(getattr(options, "seed", 0))
    timeout = float(getattr(options, "timeout", 30.0))
    sync = sync_timeout if sync_timeout is not None else max(60.0, 4.0 * timeout)
    case = case_from_spec(cp.spec, nr, seed)
    limit = max_exact_ranks(case.value_op, case.dtype)
    if limit is not None and nr > limit:
        raise CheckError(f"{case.label}: the check data is exact for at most {limit} ranks, not {nr}")
    emit = emit if emit is not None else _rank0_printer(comm)
    names = {
        k: _name(getattr(cp, k))
        for k in ("target", "signal", "local_data", "input", "send_counts", "recv_counts")
    }
    signal = names["signal"]
    if signal is None:
        raise CheckError(f"{case.name}: the program has no signal buffer")

    lowered = (lower or lower_composite_ops)(cp.program)
    result = CheckResult(case)
    fence = case.name in CONSUME_FENCE if consume_fence is None else consume_fence
    with ProgramInstance(lowered, comm, options) as inst:
        _check_buffers(case, inst, names)
        if on_instance is not None:
            on_instance(inst)
        sched = getattr(inst, "schedule", None)
        races = getattr(inst, "races", None)
        shapes = rank_inputs(case, me, 0)
        written = [n for role in ("target", "local_data", "input")
                   if getattr(shapes, role) is not None and (n := names[role]) is not None]
        result.backend = str(getattr(inst, "backend", getattr(options, "windows", "")))
        epoch = allocate_window(comm, "check.epoch", (1,), np.int64, backend=result.backend, fill=-1)
        if header:
            emit(_header_line(case, iters, block, result.backend, options))
            emit("#" + HEADER[1:])
        it = 0
        while it < iters:
            count = min(block, iters - it)
            wrong = 0
            run_time = 0.0
            last_target: np.ndarray | None = None
            last_counts: np.ndarray | None = None
            for _ in range(count):
                if sched is not None:
                    sched.host_access()
                _write_inputs(case, inst, names, me, it)
                if races is not None:
                    for n in written:
                        races.host_access(n, True, "inputs")
                # Complete at this rank's window on return, so it is visible before our first credit.
                epoch.put(me, (1,), (0,), np.array([it], dtype=np.int64))
                if before_run is not None:
                    before_run(it)
                t0 = time.perf_counter()
                inst.run()
                run_time += time.perf_counter() - t0
                order = _order_violations(epoch, me, nr, it)
                if order:
                    wrong += len(order)
                    peer, at = order[0]
                    _first_error(
                        result,
                        report,
                        f"# rank {me} iteration {it}: invariant out-of-step: {len(order)} peers out of step "
                        f"when the call returned, first rank {peer} at call {at} (expected {it} or {it + 1})",
                        "invariant",
                        it,
                    )
                if sched is not None:
                    sched.host_access()
                target = np.array(inst.local(names["target"]), copy=True) if names["target"] else None
                rc = np.array(inst.local(names["recv_counts"]), copy=True) if names["recv_counts"] else None
                if races is not None and names["target"] is not None:
                    races.host_access(names["target"], False, "consume")
                # The copies above consumed the result: now a fast peer may write the window again.
                if fence:
                    if sched is not None:
                        sched.host_sync()
                    bounded(comm, sync).barrier(f"the consume fence after {case.name} iteration {it}")
                    if races is not None:
                        races.join()
                for mm in check_rank(case, me, it, target, rc):
                    if not mm.ok:
                        wrong += mm.count
                        _first_error(result, report, f"# rank {me} iteration {it}: {mm.describe()}", "wrong-data", it)
                last_target, last_counts = target, rc
                it += 1
            # Block end: nobody starts the next call before everybody has finished this block, so
            # no next-call credit can have arrived and every cell must be exactly 0.
            if sched is not None:
                sched.host_sync()
            bounded(comm, sync).barrier(f"the block-end barrier after iteration {it - 1}")
            cells = signal_nonzero(_signal_cells(inst, signal))
            if not cells.ok:
                _first_error(result, report, f"# rank {me} after iteration {it - 1}: invariant "
                             f"nonzero-at-rest: {cells.describe()}", "invariant", it - 1)
            native = native_mismatch(comm, case, it - 1, last_target, last_counts, sync)
            if native:
                _first_error(
                    result,
                    report,
                    f"# rank {me} iteration {it - 1}: {native} elements differ from native MPI",
                    "wrong-data",
                    it - 1,
                )
            violations, race_reports = checkpoint_checkers(comm, inst, sync, result, report)
            totals = [int(v) for v in bounded(comm, sync).allreduce(
                np.array([wrong, cells.count, native or 0], dtype=np.int64), MPI.SUM, "the block-end sum")]
            slowest = float(bounded(comm, sync).allreduce([float(run_time)], MPI.MAX, "the block-end max")[0])
            row = BlockRow(
                iters=it,
                count=count,
                size_bytes=case.target_bytes,
                dtype=_dtype_name(case),
                time_us=slowest / count * 1e6,
                wrong=totals[0],
                cells_nonzero=totals[1],
                native=None if native is None else totals[2],
                invariants=len(violations),
                races=len(race_reports),
            )
            result.rows.append(row)
            emit(row.format())
            if stop_on_failure and not row.ok and it < iters:
                result.stopped = True
                break
        epoch.free()
    emit(result.summary())
    return result


def _order_violations(epoch: Any, me: int, nranks: int, it: int) -> list[tuple[int, int]]:
    """Peers whose published call number is not ``it`` or ``it + 1`` once this rank's call ``it`` returned."""
    out = []
    for peer in range(nranks):
        if peer != me:
            at = int(epoch.get(peer, (1,), (0,), (1,))[0])
            if not it <= at <= it + 1:
                out.append((peer, at))
    return out


def _dtype_name(case: CheckCase) -> str:
    return "fp16" if case.dtype == np.dtype(np.float16) else "fp32"


def _header_line(case: CheckCase, iters: int, block: int, backend: str, options: Any) -> str:
    from pldemu.runtime.options import RuntimeOptions
    from pldemu.runtime.schedule import NO_PERTURBATION, describe_schedule

    geo = f"SIZE={case.size}"
    if case.name in ("allreduce", "broadcast") and case.shape != (1, case.size):
        geo = "shape " + "x".join(map(str, case.shape))
    if case.valid_shape is not None:
        geo += " valid " + "x".join(map(str, case.valid_shape))
    fence = " (consume fence)" if case.name in CONSUME_FENCE else ""
    schedule = describe_schedule(options) if isinstance(options, RuntimeOptions) else NO_PERTURBATION
    return (
        f"# pldemu check: {case.label}, {case.nranks} ranks, {geo}, {iters} iters in blocks of {block}"
        f"{fence}, windows={backend}, seed={case.seed}"
        + ("" if schedule == NO_PERTURBATION else f"; schedule: {schedule}")
    )


def _check_buffers(case: CheckCase, inst: Any, names: dict[str, str | None]) -> None:
    """Fail early, with a clear message, if the program's buffers do not have the expected geometry."""
    want: dict[str, tuple[int, ...] | None] = {"target": case.target_shape}
    nr, m, size = case.nranks, case.max_recv, case.size
    if case.name == "allgather":
        want["local_data"] = (1, size)
    if case.name == "all_to_all":
        want["input"] = (nr, size)
    if case.name == "all_to_all_v":
        want["input"] = (nr * m, size)
        want["send_counts"] = (nr,)
        want["recv_counts"] = (nr, 1)
    for role, shape in want.items():
        name = names.get(role)
        if shape is None:
            continue
        if name is None:
            raise CheckError(f"{case.name}: the program has no {role} buffer")
        got = tuple(np.shape(inst.local(name)))
        if math.prod(got) != math.prod(shape):
            raise CheckError(
                f"{case.name}: buffer {name} ({role}) has shape {got}, the harness expects {shape}"
            )


def _write_inputs(
    case: CheckCase, inst: Any, names: dict[str, str | None], rank: int, iteration: int
) -> None:
    ins = rank_inputs(case, rank, iteration)
    for role, arr in (
        ("target", ins.target),
        ("local_data", ins.local_data),
        ("input", ins.input),
        ("send_counts", ins.send_counts),
    ):
        if arr is None:
            continue
        name = names[role]
        if name is None:
            raise CheckError(f"{case.name}: the program has no {role} buffer")
        buf = inst.local(name)
        buf[...] = arr.reshape(buf.shape)


__all__ = [
    "CONSUME_FENCE",
    "HEADER",
    "BlockRow",
    "CheckError",
    "CheckResult",
    "CheckTimeout",
    "Failure",
    "case_from_spec",
    "default_block",
    "native_mismatch",
    "run_check",
]
