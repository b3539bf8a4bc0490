"""Shared pieces of the collective recipes: errors, the call context, the credit barrier, geometry.

Everything a recipe emits goes through the function's one ``FunctionBuilder`` (so temporary names
come from one counter per function). Nothing here keeps state between calls: barrier generations
are passed explicitly by each recipe and restart at 1 in every call. NR expressions are checked by
value with the IR's one evaluator (``eval_nr``, re-exported here) and emitted by substitution;
recipe arithmetic is written with the IR's operators (``2 * (nr - 1)``), which fold constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import Layout, NotifyOp, ReduceOp
from pldemu.ir.nodes import (
    NR,
    BinOp,
    BufferKind,
    Call,
    Const,
    Expr,
    ExprLike,
    ListExpr,
    Program,
    TensorType,
    Var,
    binop,
    ceildiv,
    emin,
    eval_nr,
    format_expr,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.signatures import REDUCE_TILE_OP, describe
from pldemu.lowering.backend import STANDALONE, Backend
from pldemu.lowering.variant import CORRECT, RecipeVariant

CHUNK_BYTES = 16 * 1024
"""One UB chunk: the largest tile a recipe allocates (4,096 FP32 / 8,192 FP16 elements)."""

ALIGN_BYTES = 32
"""PTO tile row alignment: 8 FP32 / 16 FP16 elements."""

REDUCE_DTYPES = (DType.FP16, DType.FP32)
"""Element types the reducing collectives (allreduce, reduce_scatter) support."""

_NR_SAMPLES = range(1, 17)
"""Rank counts at which a shape expression is compared with its required form when NR is not pinned."""


# ----------------------------------------------------------------------------------------------
# Errors and the call context
# ----------------------------------------------------------------------------------------------


class LoweringError(ValueError):
    """A collective whose arguments break its lowering contract.

    The message names the op, the argument and what was expected, then where the call sits.
    """

    def __init__(self, op: Op, arg: str, expected: str, got: str = "", where: str = "") -> None:
        self.op, self.arg, self.expected, self.got, self.where = op, arg, expected, got, where
        text = f"{op.text}: argument '{arg}' must be {expected}"
        if got:
            text += f", got {got}"
        if where:
            text += f" (at {where})"
        super().__init__(text)


@dataclass(frozen=True)
class LoweringContext:
    """What a rule may know besides its call: the program (buffers, pinned NR) and the call's site."""

    program: Program
    op: Op
    where: str = ""
    roots: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Variable name -> the declared buffers it may stand for (through rebinds and tensor.view)."""
    variant: RecipeVariant = CORRECT
    """The recipe variant of the pass (``LowerCompositeOps.variant``): the specified recipe unless a
    mutant is being built."""
    target: str = ""
    """Name of the variable the call is assigned to ("" when evaluated for effect): temporaries' base."""
    backend: Backend = STANDALONE
    """The target whose scratch plans and dtype gates the tile.select rule follows (``LowerCompositeOps.backend``)."""
    group: tuple[int, ...] | None = None
    """The comm sub-domain of the call's windows (``BufferDecl.group``): the recipe runs on its ranks, numbered
    within it (``get_comm_ctx`` gives the group's rank and size), so its shapes are checked at its size."""

    def root(self, var: Var) -> frozenset[str]:
        """The buffers ``var`` may denote (itself when it is a buffer or an unknown parameter)."""
        return self.roots.get(var.name, frozenset({var.name}))

    @property
    def nranks(self) -> int | None:
        """The pinned rank count (the group's size for a collective over a comm sub-domain), or None. Used
        for validation only, never for geometry."""
        return len(self.group) if self.group is not None else self.program.nranks

    def error(self, arg: str, expected: str, got: str = "") -> LoweringError:
        return LoweringError(self.op, arg, expected, got, self.where)


@dataclass(frozen=True)
class Lowered:
    """A rule's result: the value bound to the original LHS, plus facts for the summary line."""

    value: Expr
    credits: Expr
    """Credits this call issues per peer on every barrier cell (what the epilogue retires), in NR."""
    rows: Expr | None = None
    """Signal rows the call uses (ring: 2*(NR-1)); None for the mesh convention."""
    chunks: Expr | None = None
    """Chunk (subchunk) count of the data phase, in terms of NR; None when the recipe is not chunked."""
    stage: tuple[int, ...] | None = None
    """Physical shape of the VEC stage tile, if the recipe allocates one."""
    note: str | None = None
    """What a tile composite became (e.g. "TSELS, scratch fp32[1, 128]"); replaces the barrier facts."""


Rule = Callable[[Call, FunctionBuilder, LoweringContext], Lowered]
"""A lowering rule: emits the recipe of ``call`` into the builder and returns its result."""


# ----------------------------------------------------------------------------------------------
# NR expressions: validation by evaluation (pldemu.ir.nodes.eval_nr), emission by substitution
# ----------------------------------------------------------------------------------------------


def matches_nr(e: Expr, want: Callable[[int], int], pinned: int | None) -> bool:
    """Does ``e`` equal ``want(NR)``: at the pinned NR, or at every sampled NR when none is pinned."""
    samples: Sequence[int] = (pinned,) if pinned is not None else _NR_SAMPLES
    return all(eval_nr(e, n) == want(n) for n in samples)


def subst_nr(e: Expr, nr: Expr) -> Expr:
    """Replace the NR symbol by the runtime rank count ``nr`` (re-folding constants)."""
    if isinstance(e, Var) and e.name == NR.name:
        return nr
    if isinstance(e, BinOp):
        lhs, rhs = subst_nr(e.lhs, nr), subst_nr(e.rhs, nr)
        if lhs is e.lhs and rhs is e.rhs:
            return e
        return binop(e.op, lhs, rhs)
    return e


def same_extent(a: Expr, b: Expr, pinned: int | None) -> bool:
    """Equal as expressions of NR (structurally, or by value at the sampled / pinned NR)."""
    if a == b:
        return True
    samples: Sequence[int] = (pinned,) if pinned is not None else _NR_SAMPLES
    for n in samples:
        va, vb = eval_nr(a, n), eval_nr(b, n)
        if va is None or vb is None or va != vb:
            return False
    return True


def numel(shape: Sequence[Expr]) -> Expr:
    """Product of the dimensions (folded when static)."""
    total: Expr = Const(1)
    for d in shape:
        total = total * d
    return total


def show(e: Expr | ListExpr | Sequence[Expr]) -> str:
    """Text of an expression or shape for messages."""
    if isinstance(e, (Var, Const, BinOp, Call, ListExpr)):
        return format_expr(e)
    return "[" + ", ".join(format_expr(x) for x in e) + "]"


def show_nr(e: Expr, pinned: int | None) -> str:
    """An NR expression, with its value at the pinned NR when there is one."""
    text = show(e)
    if pinned is not None:
        v = eval_nr(e, pinned)
        if v is not None and text != str(v):
            text += f" (= {v} at NR={pinned})"
    return text


# ----------------------------------------------------------------------------------------------
# Geometry: chunk, alignment, stage
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Geometry:
    """Chunk and alignment of one element type, in elements of physical storage."""

    dtype: DType
    chunk: int
    align: int

    @staticmethod
    def of(dtype: DType) -> Geometry:
        size = dtype.itemsize
        return Geometry(dtype, CHUNK_BYTES // size, ALIGN_BYTES // size)

    def chunk_cols(self, extent: Expr) -> int:
        """Physical chunk width for a stream of ``extent`` elements.

        A static extent below one chunk shrinks the chunk to the smallest aligned width covering
        it, so a short collective does not reserve a whole 16-KiB tile; anything else (including a
        runtime extent) uses the full chunk.
        """
        e = static_int(extent)
        if e is not None and 0 < e < self.chunk:
            return math.ceil(e / self.align) * self.align
        return self.chunk

    def stage_shape(self, transfer: Sequence[Expr]) -> tuple[int, int] | None:
        """The 2-D VEC stage a put/get of ``transfer`` slides through (MakeCollectiveStageShape).

        The stage is a bounce buffer that must never exceed a static transfer width, so a short
        row is rounded DOWN to the alignment (FP32 SIZE=17 gives 16 columns); a transfer shorter
        than one alignment unit has no legal width: None. Rows trade against columns inside the
        chunk budget; a runtime last dimension takes the chunk bound.
        """
        cols = self.chunk
        last = static_int(transfer[-1])
        if last is not None and last > 0:
            cols = min(last, self.chunk)
            if cols < self.align:
                return None
            if cols < self.chunk:
                cols = cols // self.align * self.align
        budget = max(1, self.chunk // cols)
        rows = 1
        for d in transfer[:-1]:
            v = static_int(d)
            if v is None or v <= 0:
                rows = 1
                break
            rows = min(rows * v, budget)
        return (rows, cols)


def ring_boundary(i: ExprLike, size: Expr, nr: Expr, geo: Geometry, unit: ExprLike | None = None) -> Expr:
    """Start of ring segment ``i`` (segment NR ends the stream).

    FP32 keeps balanced floor(i*SIZE/NR) boundaries. FP16 rounds each boundary up to 16 elements
    (32 bytes) and caps it at SIZE so every non-empty segment starts aligned; trailing segments may
    then be empty, which the schedule tolerates. ``unit`` may pass a bound ``16 * nr``.
    """
    scaled = i * size
    if geo.dtype is DType.FP16:
        unit = geo.align * nr if unit is None else unit
        return emin(ceildiv(scaled, unit) * geo.align, size)
    return scaled // nr


def ring_max_segment(size: Expr, nr: Expr, geo: Geometry) -> Expr:
    """Upper bound on any ring segment's length: the common subchunk-loop bound of every round."""
    if geo.dtype is DType.FP16:
        unit = geo.align * nr
        return emin(ceildiv(size, unit) * geo.align, size)
    return ceildiv(size, nr)


# ----------------------------------------------------------------------------------------------
# The self-clearing credit barrier
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comm:
    """The runtime rank queries of one call, the signal its barriers use and the recipe variant.

    The variant travels with the call's barrier state so that every shared protocol helper below
    (credit, wait, barrier, epilogue) emits the same deviation for the whole call.
    """

    ctx: Var
    me: Var
    nr: Var
    signal: Var
    variant: RecipeVariant
    lane: ExprLike = 0
    """The mesh signal column the barriers use: 0, or lane c of a lane-split allreduce (``[NR, S]``)."""

    def cell(self, rank: ExprLike, row: ExprLike | None) -> list[ExprLike]:
        """Mesh cell [rank, lane] (one per rank), or ring cell [row, rank] (one row per round)."""
        return [rank, self.lane] if row is None else [row, rank]


def emit_comm(fb: FunctionBuilder, lowering: LoweringContext, window: Var, signal: Var) -> Comm:
    """ctx = get_comm_ctx(window); me = rank(ctx); nr = nranks(ctx).

    Rank and rank count are runtime queries so the lowering never depends on the rank count. The
    returned ``Comm`` carries the pass's recipe variant (``lowering.variant``), so no recipe handles
    the variant of the shared protocol itself.
    """
    sys = fb.pld.system
    ctx = sys.get_comm_ctx(window)
    return Comm(ctx, sys.rank(ctx), sys.nranks(ctx), signal, lowering.variant)


def emit_peer_loop(fb: FunctionBuilder, comm: Comm, hint: str, body: Callable[[Var], None]) -> None:
    """for p in range(0, nr): if p != me: body(p)."""
    with fb.for_range(0, comm.nr, hint=hint) as p, fb.if_(p.ne(comm.me)):
        body(p)


def emit_notify_all(fb: FunctionBuilder, comm: Comm, row: ExprLike | None = None, g: ExprLike = 1) -> None:
    """One credit (AtomicAdd +1) on my cell of every peer's signal; ``g`` is the generation it completes.

    ``g`` only matters to the Set variant (``RecipeVariant.credit_op``), which writes the value the
    waiter expects instead of adding one.
    """
    op, value = comm.variant.credit_op, comm.variant.credit_value(g)
    emit_peer_loop(fb, comm, "peer", lambda p: fb.pld.system.notify(
        comm.signal, p, comm.cell(comm.me, row), value, op=op))


def emit_wait(fb: FunctionBuilder, comm: Comm, src: ExprLike, g: ExprLike, row: ExprLike | None = None) -> None:
    """Wait until ``src``'s cell on my signal holds at least ``g`` credits (every credit wait comes here).

    Ge, never Eq: a fast peer may already have advanced the cell past ``g`` (its next barrier or
    next call) before this rank polls, and Eq would then deadlock.
    """
    variant = comm.variant
    fb.pld.system.wait(comm.signal, comm.cell(src, row), variant.threshold(g), cmp=variant.wait_cmp)


def emit_wait_all(fb: FunctionBuilder, comm: Comm, g: ExprLike, row: ExprLike | None = None) -> None:
    """Wait until every peer's cell on my signal holds at least ``g`` credits (see ``emit_wait``)."""
    emit_peer_loop(fb, comm, "src", lambda s: emit_wait(fb, comm, s, g, row))


def emit_barrier(fb: FunctionBuilder, comm: Comm, g: ExprLike, row: ExprLike | None = None) -> None:
    """Barrier generation ``g``: announce to every peer, then wait for every peer's g-th credit.

    ``g`` counts this call's barriers on the cell (1, 2, ...), restarting at 1 in every call, because
    the epilogue retires exactly the credits the call issued. Notify first: a rank that waited
    before posting its own credit would wait for peers doing the same (the wait-before-notify
    variant emits exactly that deadlock).
    """
    if comm.variant.notify_before_wait:
        emit_notify_all(fb, comm, row, g)
        emit_wait_all(fb, comm, g, row)
    else:
        emit_wait_all(fb, comm, g, row)
        emit_notify_all(fb, comm, row, g)


def emit_single_phase_end(fb: FunctionBuilder, comm: Comm) -> None:
    """The end of a collective with one barrier phase: barrier(1) (every rank's data has landed),
    then the epilogue retiring that one credit per cell."""
    emit_barrier(fb, comm, 1)
    emit_epilogue(fb, comm, 1)


def emit_epilogue(fb: FunctionBuilder, comm: Comm, n: ExprLike, rows: ExprLike | None = None) -> None:
    """Retire this call's ``n`` credits per peer from every non-self cell (of every row, for ring).

    AtomicAdd(-n) on my own signal rather than Set(0): a fast peer may already have posted credits
    for the next call, and subtracting keeps them while a Set would clobber them. The variant may
    drop the epilogue or retire fewer credits than issued (``RecipeVariant.retired``).
    """
    value = comm.variant.retired(n)
    if value is None:
        return
    static = static_int(value)
    if static is not None and static <= 0:
        return  # a shortfall that leaves nothing to retire: no epilogue at all
    retire: ExprLike = 0 - value
    if static is None:
        retire = fb.let("retire", retire)
    notify = fb.pld.system.notify

    def one_row(row: ExprLike | None) -> None:
        emit_peer_loop(fb, comm, "src", lambda s: notify(
            comm.signal, comm.me, comm.cell(s, row), retire, op=NotifyOp.AtomicAdd))

    if rows is None:
        one_row(None)
    else:
        with fb.for_range(0, rows, hint="row") as r:
            one_row(r)


def stage_tile(fb: FunctionBuilder, ctx: LoweringContext, geo: Geometry, arg: str,
               transfer: Sequence[Expr]) -> tuple[Var, tuple[int, int]]:
    """Allocate the VEC stage for a put/get of ``transfer``, or reject a transfer with no legal stage."""
    shape = geo.stage_shape(transfer)
    if shape is None:
        raise ctx.error(arg, f"rows of at least one alignment unit ({ALIGN_BYTES} bytes = {geo.align} "
                        f"{geo.dtype.value} elements) so the put/get stage has a legal aligned width",
                        f"{show(transfer[-1])} elements per row")
    return fb.pld.tile.create(list(shape), geo.dtype, hint="stage"), shape


# ----------------------------------------------------------------------------------------------
# Argument validation
# ----------------------------------------------------------------------------------------------


def tensor_arg(ctx: LoweringContext, call: Call, index: int, name: str) -> tuple[Var, TensorType]:
    """The ``index``-th argument as a named tensor variable."""
    a = call.args[index]
    if not isinstance(a, Var) or not isinstance(a.type, TensorType):
        got = describe(a.type) if not isinstance(a, ListExpr) else "a list"
        raise ctx.error(name, "a tensor variable (a buffer or a name bound to one)", got)
    return a, a.type


def check_window(ctx: LoweringContext, name: str, t: TensorType) -> None:
    if not t.window:
        raise ctx.error(name, "a window (DistributedTensor) so peers can reach it", describe(t))


def window_target(ctx: LoweringContext, call: Call, index: int) -> tuple[Var, TensorType]:
    """The ``index``-th argument as the collective's target: a tensor variable that is a window
    (every collective's result lands where peers can write it)."""
    target, t = tensor_arg(ctx, call, index, "target")
    check_window(ctx, "target", t)
    return target, t


def check_target_dtype(ctx: LoweringContext, name: str, arg: TensorType, t: TensorType) -> None:
    """The data argument ``name`` moves into the target as it is: it must have the target's dtype."""
    if arg.dtype is not t.dtype:
        raise ctx.error(name, f"of the target's dtype {t.dtype.value}", arg.dtype.value)


def check_dtype(ctx: LoweringContext, name: str, t: TensorType, allowed: Sequence[DType]) -> None:
    if t.dtype not in allowed:
        legal = " or ".join(d.value.upper() for d in allowed)
        raise ctx.error(name, f"{legal}", t.dtype.value.upper())


def check_packed(ctx: LoweringContext, name: str, t: TensorType) -> None:
    """Recipes reinterpret targets with tensor.view, which needs packed row-major storage."""
    if t.strides is not None:
        raise ctx.error(name, "a packed tensor (strided targets cannot be viewed flat)",
                        f"strides {list(t.strides)}")


def check_fully_valid(ctx: LoweringContext, name: str, t: TensorType) -> None:
    """Only allreduce has a partial-valid path; other collectives move whole buffers."""
    if partial_valid(t) is not None:
        raise ctx.error(name, "fully valid (only pld.tensor.allreduce supports a partial valid_shape)",
                        f"valid {show(t.valid_shape or ())} of shape {show(t.shape)}")


def check_separate_input(ctx: LoweringContext, src: Var, it: TensorType, target: Var, t: TensorType) -> None:
    """An exchange's ``input``: not the target (peers write the target while it is read), and both
    fully valid."""
    if ctx.root(src) & ctx.root(target):
        raise ctx.error("input", "a buffer other than the target", f"{src.name} aliases {target.name}")
    check_fully_valid(ctx, "target", t)
    check_fully_valid(ctx, "input", it)


def bind_runtime(fb: FunctionBuilder, hint: str, e: Expr) -> Expr:
    """``e`` itself when it is a static integer, else a ``let`` named ``hint`` (a runtime extent is
    computed once, then used by every bound and width that needs it)."""
    return e if static_int(e) is not None else fb.let(hint, e)


def target_geometry(target: Var) -> tuple[TensorType, Geometry, tuple[Expr, ...] | None]:
    """A validated allreduce target's type, its dtype's geometry and its partial valid shape (if any)."""
    t = target.type
    assert isinstance(t, TensorType)
    return t, Geometry.of(t.dtype), partial_valid(t)


def partial_valid(t: TensorType) -> tuple[Expr, ...] | None:
    """The valid shape if it is genuinely partial (a valid_shape equal to the shape is not)."""
    if t.valid_shape is None or tuple(t.valid_shape) == tuple(t.shape):
        return None
    return t.valid_shape


def check_dims(ctx: LoweringContext, name: str, t: TensorType, want: Sequence[Callable[[int], int] | None],
               form: str) -> None:
    """Each dimension equals ``want[i](NR)`` (None: any extent); ``form`` spells the expected shape."""
    pinned = ctx.nranks
    bad = len(t.shape) != len(want) or any(
        w is not None and not matches_nr(d, w, pinned) for d, w in zip(t.shape, want, strict=False))
    if bad:
        expected = f"shaped {form}" + ("" if pinned is None else f" (NR pinned to {pinned})")
        if pinned is None:
            expected += " as an expression in NR"
        raise ctx.error(name, expected, show(t.shape))


def check_signal(ctx: LoweringContext, call: Call, index: int, ring: bool = False, lanes: int = 1) -> Var:
    """An INT32 signal window of the mesh [NR, 1] (or ring [2*(NR-1), NR], or pypto's [2*(NR-1)+1, NR])
    convention, zero-initialised; a mesh call split into ``lanes`` > 1 lanes takes [NR, S], S >= lanes
    (lane c's cells are column c; spare columns stay untouched)."""
    sig, t = tensor_arg(ctx, call, index, "signal")
    if t.dtype is not DType.INT32:
        raise ctx.error("signal", "an INT32 signal window", describe(t))
    check_window(ctx, "signal", t)
    if ring and t.shape and matches_nr(t.shape[0], lambda n: 2 * n - 1, ctx.nranks):
        # pypto's host ring builtin takes [2 * (NR - 1) + 1, NR]; the recipe uses rows 0 .. 2*NR-3 and the
        # spare last row stays zero, so the same cells serve (a tensor.view cannot drop the row).
        check_dims(ctx, "signal", t, [None, lambda n: n], "[2 * (NR - 1) + 1, NR] (pypto's ring layout)")
    elif ring:
        check_dims(ctx, "signal", t, [lambda n: 2 * (n - 1), lambda n: n],
                   "[2 * (NR - 1), NR] (one row per ring round; pypto's [2 * (NR - 1) + 1, NR] also serves)")
    elif lanes > 1:
        form = f"[NR, S] with a static S >= lanes = {lanes} (one column per lane)"
        check_dims(ctx, "signal", t, [lambda n: n, None], form)
        stride = static_int(t.shape[1])
        if stride is None or stride < lanes:
            raise ctx.error("signal", form, show(t.shape))
    else:
        check_dims(ctx, "signal", t, [lambda n: n, lambda n: 1], "[NR, 1] (one cell per rank)")
    for decl in ctx.program.buffers:
        # Barrier cells must start at zero: a data window starts poison-filled.
        if decl.var.name in ctx.root(sig) and decl.kind is not BufferKind.SIGNAL:
            raise ctx.error("signal", "a 'signal' buffer (zero at allocation)", f"{decl.kind.value} {decl.var.name}")
    return sig


def reduce_op(ctx: LoweringContext, call: Call) -> Op:
    """The tile op of the call's ReduceOp."""
    value = call.attr("op")
    tile_op = REDUCE_TILE_OP.get(value) if isinstance(value, ReduceOp) else None
    if tile_op is None:
        legal = ", ".join(m.name for m in ReduceOp)
        raise ctx.error("op", f"a ReduceOp ({legal})", repr(value))
    return tile_op


def check_layout(ctx: LoweringContext, name: str, t: TensorType) -> None:
    """A DN partial box is not a row-major rectangle of the flattened view."""
    if t.layout is Layout.DN and partial_valid(t) is not None:
        raise ctx.error(name, "ND layout when a partial valid_shape is set (a DN partial view is not a row-major rectangle)",
                        "layout DN")


__all__ = [
    "ALIGN_BYTES",
    "CHUNK_BYTES",
    "REDUCE_DTYPES",
    "Comm",
    "Geometry",
    "Lowered",
    "LoweringContext",
    "LoweringError",
    "Rule",
    "bind_runtime",
    "check_dims",
    "check_dtype",
    "check_fully_valid",
    "check_layout",
    "check_packed",
    "check_separate_input",
    "check_signal",
    "check_target_dtype",
    "check_window",
    "emit_barrier",
    "emit_comm",
    "emit_epilogue",
    "emit_notify_all",
    "emit_peer_loop",
    "emit_single_phase_end",
    "emit_wait",
    "emit_wait_all",
    "eval_nr",
    "matches_nr",
    "numel",
    "partial_valid",
    "reduce_op",
    "ring_boundary",
    "ring_max_segment",
    "same_extent",
    "show",
    "show_nr",
    "stage_tile",
    "subst_nr",
    "target_geometry",
    "tensor_arg",
    "window_target",
]
