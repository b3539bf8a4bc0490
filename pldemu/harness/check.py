"""The checking harness (the nccl-tests of pldemu): run one collective K times and check every call.

:func:`run_check` runs on every rank of a communicator.  It lowers the collective's program once,
instantiates it once, and then, call after call on the *same* signal buffer:

1. writes this rank's inputs for the iteration (``pldemu.harness.data``: exact in any order),
2. ``run()``\\ s the lowered program,
3. compares this rank's result buffers with the NumPy oracle (``pldemu.harness.oracle``).

There is **no MPI synchronisation between calls**: the self-clearing credit protocol alone must keep
back-to-back calls apart.  The one exception is the *consume fence* (:data:`CONSUME_FENCE`): for
collectives whose protocol lets a fast peer write this rank's result window for call i+1 before this
rank has read call i's result, an MPI barrier follows the comparison.  That race is the protocol's
documented contract (the window is the result "until the caller consumes it"), not a bug to catch:

* allgather and all_to_all push into every peer's target *before* their first barrier, so a peer that
  has entered call i+1 overwrites rows this rank has not compared yet;
* broadcast: nothing stops a fast root from writing call i+1's data into its window while a slow peer
  is still reading call i's (pypto #2175, deferred upstream), so the root must not write early.

The calls run in the block loop every harness shares (:func:`pldemu.harness.blocks.run_blocks`,
on a :class:`pldemu.harness.blocks.RunContext` that performs the host-side hooks of the schedule
and the race detector).  At the end of every block of ``block`` iterations all ranks meet at an MPI
barrier and check that
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from pldemu.collectives import CollectiveProgram, CollectiveSpec
from pldemu.harness.blocks import (
    DEFAULT_HOOKS,
    ROWS_TARGET,
    BlockFigures,
    Hooks,
    RunContext,
    block_size,
    default_block,
    run_blocks,
)
from pldemu.harness.common import CheckError, CheckTimeout, Failure, RowTotals, bounded
from pldemu.harness.common import signal_cells as _signal_cells
from pldemu.harness.data import CheckCase, RankInputs, max_exact_ranks, rank_inputs
from pldemu.harness.native import NATIVE, AlltoallvRows, alltoallv_rows, native_call
from pldemu.harness.oracle import check_rank, count_wrong, reduced_region, signal_nonzero
from pldemu.ir import ReduceOp
from pldemu.ir.dtypes import numpy_dtype
from pldemu.runtime.options import RuntimeOptions
from pldemu.windows import allocate_window

if TYPE_CHECKING:
    from pldemu.runtime.interpreter import ProgramInstance


CONSUME_FENCE = frozenset({"allgather", "all_to_all", "broadcast"})
"""Collectives that need an MPI barrier after the result is consumed (see the module docstring)."""

HEADER = f"{'iters':>7}  {'size(B)':>10}  {'dtype':>5}  {'time/iter(us)':>13}  {'#wrong':>7}  {'cells!=0':>8}  {'native':>7}"
"""Column titles of the progress table (nccl-tests style)."""


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


def case_from_spec(spec: CollectiveSpec, nranks: int, seed: int = 0) -> CheckCase:
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
        dtype=numpy_dtype(spec.dtype),
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
    notes: list[str] = field(default_factory=list)
    """The race detector's notes on fences and cacheinvalids (``--visibility fenced``), not failures."""

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
    """Run the native MPI collective (:data:`pldemu.harness.native.NATIVE`, non-blocking and bounded)
    on ``iteration``'s inputs; count elements that differ from pldemu.

    ``target``/``recv_counts`` are this rank's pldemu results of that iteration.  Returns None for
    barrier (no native equivalent).  Collective over ``comm``.
    """
    name = case.name
    if name == "barrier":
        return None
    if name not in NATIVE:
        raise CheckError(f"no native reference for {name}")
    assert target is not None
    me = comm.Get_rank()
    own = rank_inputs(case, me, iteration)
    rows = alltoallv_rows(case, me, iteration, own) if name == "all_to_all_v" else None
    call = native_call(comm, case, own, rows)
    bounded(comm, timeout).complete(call.start(), f"native {name}")
    if name == "allreduce":
        return count_wrong(_allreduce_ref(case, own, call.out), target)
    if name == "reduce_scatter":
        return count_wrong(call.out, target[me])
    if rows is not None:
        return _alltoallv_wrong(case, rows, call.out, target, recv_counts)
    return count_wrong(call.out, target)


def _allreduce_ref(case: CheckCase, own: RankInputs, reduced: np.ndarray) -> np.ndarray:
    """This rank's target after native MPI's Allreduce of the region the recipe reduces (``reduced``)."""
    assert own.target is not None
    region = reduced_region(case)
    ref = own.target.copy()
    if region is None:
        ref[...] = reduced
    elif isinstance(region, int):
        ref.reshape(-1)[:region] = reduced
    else:
        ref[region] = reduced
    return ref


def _alltoallv_wrong(case: CheckCase, rows: AlltoallvRows, recv: np.ndarray, target: np.ndarray,
                     recv_counts: np.ndarray | None) -> int:
    """Elements of the received rows (and the receive counts) that differ from native MPI's."""
    nr, m = case.nranks, case.max_recv
    diff = 0
    for s in range(nr):
        block = slice(s * m, s * m + int(rows.in_rows[s]))
        diff += count_wrong(recv[block], target[block])
    if recv_counts is not None:
        diff += count_wrong(np.array(rows.in_rows).reshape(nr, 1).astype(np.int32), recv_counts.reshape(nr, 1))
    return diff


# ----------------------------------------------------------------------------------------------
# The check loop
# ----------------------------------------------------------------------------------------------


def run_check(
    comm: MPI.Intracomm,
    cp: CollectiveProgram,
    iters: int,
    options: RuntimeOptions,
    block: int | None = None,
    *,
    hooks: Hooks = DEFAULT_HOOKS,
    lower: Callable[[Any], Any] | None = None,
    consume_fence: bool | None = None,
) -> CheckResult:
    """Run ``cp``'s collective ``iters`` times back to back on every rank of ``comm`` and check each call.

    ``options``: the runtime's knobs (its ``seed`` also seeds the data, its ``timeout`` bounds every
    wait; the harness's own MPI waits time out after 4x that, at least 60 s). ``block`` iterations
    make one progress row (default :func:`default_block`). ``hooks``: the progress printer, the
    first-failure reporter, a per-call hook, the instance hook and the early stop
    (:class:`pldemu.harness.blocks.Hooks`; ``QUIET`` prints nothing). ``lower`` replaces
    LowerCompositeOps (tests and mutants break a recipe with it and check that the harness notices).
    ``consume_fence`` overrides the fence policy (None: :data:`CONSUME_FENCE`; False: never fence,
    the back-to-back usage some mutants model). Collective: every rank of ``comm`` must call it with
    the same arguments.

    The run context (:class:`pldemu.harness.blocks.RunContext`) drives the runtime's optional
    checkers: the invariant checker and the race detector get a checkpoint at every block end; the
    race detector learns of the harness's own accesses (inputs written, results consumed) and
    barriers; deferred visibility lands this rank's writes before the harness touches its windows.

    Besides the data, every call checks the ordering claim of the credit protocol: each rank
    publishes the number of the call it is entering in an epoch window, and when its call ``i``
    returns, every peer must be in call ``i`` or ``i + 1`` (none behind: no rank passes a barrier
    early; none further ahead: a fast rank runs at most one call ahead).  Violations count as wrong
    elements.
    """
    from pldemu.lowering import lower_composite_ops

    block = block_size(iters, block)
    case = case_from_spec(cp.spec, comm.Get_size(), options.seed)
    limit = max_exact_ranks(case.value_op, case.dtype)
    if limit is not None and case.nranks > limit:
        raise CheckError(f"{case.label}: the check data is exact for at most {limit} ranks, not {case.nranks}")
    names = {k: _name(getattr(cp, k)) for k in ("target", "signal", "local_data", "input", "send_counts",
                                                  "recv_counts")}
    if names["signal"] is None:
        raise CheckError(f"{case.name}: the program has no signal buffer")
    lowered = (lower or lower_composite_ops)(cp.program)
    result = CheckResult(case)
    fence = case.name in CONSUME_FENCE if consume_fence is None else consume_fence
    with RunContext.open(comm, lowered, options, result, hooks) as ctx:
        _check_buffers(case, ctx.inst, names)
        result.backend = ctx.backend
        harness = _CollectiveHarness(ctx, case, names, fence)
        ctx.emit(_header_line(case, iters, block, result.backend, options))
        ctx.emit("#" + HEADER[1:])
        run = run_blocks(ctx, iters, block, harness)
        result.rows, result.stopped, result.notes = run.rows, run.stopped, run.notes
        harness.epoch.free()
    ctx.emit(result.summary())
    return result


class _CollectiveHarness:
    """The per-call and block-end work of :func:`run_check` (a ``BlockHarness``): inputs, the epoch
    (ordering) check, the consume fence, the oracle; the cells at rest and native MPI at block ends."""

    def __init__(self, ctx: RunContext, case: CheckCase, names: dict[str, str | None], fence: bool) -> None:
        self.case, self.names, self.fence = case, names, fence
        self.epoch = allocate_window(ctx.comm, "check.epoch", (1,), np.int64, backend=ctx.backend, fill=-1)
        self.results = [n for role in ("target", "recv_counts") if (n := names[role]) is not None]
        self.wrong = 0
        self.last: dict[str, np.ndarray] = {}

    def call(self, ctx: RunContext, it: int) -> float:
        case, me = self.case, ctx.me
        ctx.write_own(_inputs(case, self.names, me, it))
        # Complete at this rank's window on return, so it is visible before our first credit.
        self.epoch.put(me, (1,), (0,), np.array([it], dtype=np.int64))
        seconds = ctx.run_call(it)
        order = _order_violations(self.epoch, me, ctx.nranks, it)
        if order:
            self.wrong += len(order)
            peer, at = order[0]
            ctx.fail(f"# rank {me} iteration {it}: invariant out-of-step: {len(order)} peers out of step when the "
                     f"call returned, first rank {peer} at call {at} (expected {it} or {it + 1})", "invariant", it)
        self.last = dict(zip(self.results, ctx.read_own(self.results), strict=True))
        # The copies above consumed the result: now a fast peer may write the window again.
        if self.fence:
            ctx.fence(f"the consume fence after {case.name} iteration {it}")
        for mm in check_rank(case, me, it, self._result("target"), self._result("recv_counts")):
            if not mm.ok:
                self.wrong += mm.count
                ctx.fail(f"# rank {me} iteration {it}: {mm.describe()}", "wrong-data", it)
        return seconds

    def _result(self, role: str) -> np.ndarray | None:
        name = self.names[role]
        return self.last[name] if name is not None else None

    def block_end(self, ctx: RunContext, last: int) -> list[int]:
        me = ctx.me
        cells = signal_nonzero(_signal_cells(ctx.inst, str(self.names["signal"])))
        if not cells.ok:
            ctx.fail(f"# rank {me} after iteration {last}: invariant nonzero-at-rest: {cells.describe()}",
                     "invariant", last)
        native = native_mismatch(ctx.comm, self.case, last, self._result("target"), self._result("recv_counts"),
                                 ctx.sync)
        if native:
            ctx.fail(f"# rank {me} iteration {last}: {native} elements differ from native MPI", "wrong-data", last)
        self.native_known = native is not None
        wrong, self.wrong = self.wrong, 0
        return [wrong, cells.count, native or 0]

    def row(self, f: BlockFigures) -> BlockRow:
        return BlockRow(iters=f.iters, count=f.count, size_bytes=self.case.target_bytes,
                        dtype=_dtype_name(self.case), time_us=f.time_us, wrong=f.totals[0],
                        cells_nonzero=f.totals[1], native=f.totals[2] if self.native_known else None,
                        invariants=len(f.violations), races=len(f.races))


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


def _header_line(case: CheckCase, iters: int, block: int, backend: str, options: RuntimeOptions) -> str:
    from pldemu.runtime.instrument.schedule import NO_PERTURBATION, describe_schedule

    geo = f"SIZE={case.size}"
    if case.name in ("allreduce", "broadcast") and case.shape != (1, case.size):
        geo = "shape " + "x".join(map(str, case.shape))
    if case.valid_shape is not None:
        geo += " valid " + "x".join(map(str, case.valid_shape))
    fence = " (consume fence)" if case.name in CONSUME_FENCE else ""
    schedule = describe_schedule(options)
    return (
        f"# pldemu check: {case.label}, {case.nranks} ranks, {geo}, {iters} iters in blocks of {block}"
        f"{fence}, windows={backend}, seed={case.seed}"
        + ("" if schedule == NO_PERTURBATION else f"; schedule: {schedule}")
    )


def _check_buffers(case: CheckCase, inst: ProgramInstance, names: dict[str, str | None]) -> None:
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


def _inputs(case: CheckCase, names: dict[str, str | None], rank: int, iteration: int) -> dict[str, np.ndarray]:
    """This rank's inputs of ``iteration`` by buffer name."""
    ins = rank_inputs(case, rank, iteration)
    out: dict[str, np.ndarray] = {}
    for role in ("target", "local_data", "input", "send_counts"):
        arr = getattr(ins, role)
        if arr is None:
            continue
        name = names[role]
        if name is None:
            raise CheckError(f"{case.name}: the program has no {role} buffer")
        out[name] = arr
    return out


__all__ = [
    "CONSUME_FENCE",
    "HEADER",
    "ROWS_TARGET",
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
