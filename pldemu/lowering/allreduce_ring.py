"""``pld.tensor.allreduce`` mode=ring: push-based reduce-scatter then allgather over NR segments.

The target is one [1, SIZE] stream split into NR segments (boundaries are runtime expressions of
``nr``). Reduce-scatter round s (signal row s): rank me sends segment (me - s) mod NR to its right
neighbour and receives segment (me - s - 1) mod NR from its left one. Allgather round s (row
s + NR - 1) forwards the fully reduced segment (me + 1 - s) mod NR. Each round walks its segment in
``chunks = ceil(L / C)`` subchunks (L: the longest segment), the same count in every round, and
every subchunk barriers twice on its row: ready (2k + 1) and push-done (2k + 2), even past the end
of a short segment, so the epilogue retires 2 * chunks from every row. (The ring-no-push-done
variant drops the push-done barrier: ready becomes k + 1 and the epilogue retires ``chunks``.)
"""

from __future__ import annotations

from collections.abc import Callable

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import (
    NR,
    Call,
    Const,
    Expr,
    ExprLike,
    Var,
    ceildiv,
    emax,
    emin,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.lowering.common import (
    Comm,
    Geometry,
    Lowered,
    LoweringContext,
    bind_runtime,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    numel,
    ring_boundary,
    ring_max_segment,
    show,
    subst_nr,
    target_geometry,
)


def lower_allreduce_ring(call: Call, fb: FunctionBuilder, ctx: LoweringContext, target: Var, signal: Var,
                         tile_op: Op) -> Lowered:
    """Emit the ring recipe (arguments already validated by ``lower_allreduce``)."""
    t, geo, valid = target_geometry(target)
    if valid is not None and not _is_linear_prefix(valid, t.shape):
        raise ctx.error("target", "a contiguous row-major prefix when a partial valid_shape is used with "
                        "mode=ring (the ring reduces one linear stream)", f"valid {show(valid)} of shape {show(t.shape)}")

    comm = emit_comm(fb, ctx, target, signal)
    nr = comm.nr
    size_sym = numel(valid if valid is not None else t.shape)
    size: Expr = subst_nr(size_sym, nr)
    phys = subst_nr(numel(t.shape), nr)
    size = bind_runtime(fb, "size", size)  # a runtime extent, used by every boundary below
    c = geo.chunk_cols(size_sym)  # no segment is longer than SIZE, so a short SIZE shrinks the chunk
    chunks_sym: Expr = ceildiv(ring_max_segment(size_sym, NR, geo), c)
    static_size = static_int(size_sym)
    if static_size is not None and static_size <= c:
        # 1 <= L <= SIZE <= C: one subchunk per round at every rank count (a static-extent decision).
        chunks_sym = Const(1)

    # A contiguous prefix keeps the full physical extent and carries the logical one as valid.
    flat = fb.pld.tensor.view(target, [1, size if valid is None else phys],
                              None if valid is None else [1, size])
    chunks: Expr = chunks_sym
    if static_int(chunks_sym) is None:
        # Every round walks ceil(L / C) subchunks, L the longest segment: a runtime expression.
        longest = fb.let("seg_max", ring_max_segment(size, nr, geo))
        chunks = fb.let("chunks", ceildiv(longest, c))
    ring = _Ring(fb, comm, geo, flat, size, c, chunks, tile_op)

    # Phase 1: reduce-scatter, rounds 0 .. NR-2 on signal rows 0 .. NR-2.
    with fb.for_range(0, nr - 1, hint="step") as s:
        ring.reduce_scatter_round(s)
    # Phase 2: allgather, rounds 0 .. NR-2 on signal rows NR-1 .. 2*NR-3.
    with fb.for_range(0, nr - 1, hint="step") as s:
        ring.allgather_round(s)

    rows = 2 * (nr - 1)
    if comm.variant.ring_push_done:
        credits_sym = 2 * chunks_sym
        emit_epilogue(fb, comm, bind_runtime(fb, "credits", 2 * chunks), rows)
    else:  # one (ready) barrier per subchunk: ``chunks`` credits per row
        credits_sym = chunks_sym
        emit_epilogue(fb, comm, chunks, rows)
    return Lowered(target, credits_sym, 2 * (NR - 1), chunks_sym, (1, c))


def _is_linear_prefix(valid: tuple[Expr, ...], shape: tuple[Expr, ...]) -> bool:
    """Valid box == the first prod(valid) elements of the row-major stream."""
    if len(valid) != len(shape):
        return False
    past = False
    for v, d in zip(valid, shape, strict=True):
        full = v == d
        if past and not full:
            return False
        if not past and static_int(v) != 1:
            past = True
    return True


class _Ring:
    """Emission helpers sharing one call's ring state (builder, comm, views, tiles, geometry)."""

    def __init__(self, fb: FunctionBuilder, comm: Comm, geo: Geometry, flat: Var, size: Expr, c: int,
                 chunks: Expr, tile_op: Op) -> None:
        """Emits the call's shared tiles and ``right`` (its neighbour) before any round."""
        self.fb, self.comm, self.geo, self.flat = fb, comm, geo, flat
        self.size, self.c, self.chunks, self.tile_op = size, c, chunks, tile_op
        # One stage shared by every push, narrowed per transfer with tile.set_validshape.
        self.stage = fb.pld.tile.create([1, c], geo.dtype, hint="stage")
        # Holds this rank's own value of the receive slot across the two barriers of a subchunk.
        self.own = fb.pld.tile.create([1, c], geo.dtype, hint="own")
        self.right = fb.let("right", (comm.me + 1) % comm.nr)
        # FP16 boundaries are multiples of align * NR apart in the scaled domain; bind that once.
        self.unit: ExprLike | None = None
        if geo.dtype is DType.FP16:
            self.unit = fb.let("seg_unit", geo.align * comm.nr)

    def segment(self, seg: Var, hint: str) -> tuple[Var, Var]:
        """(start, length) of segment ``seg``: runtime expressions of nr."""
        nr = self.comm.nr
        lo = self.fb.let(f"{hint}_lo", ring_boundary(seg, self.size, nr, self.geo, self.unit))
        hi = ring_boundary(seg + 1, self.size, nr, self.geo, self.unit)
        return lo, self.fb.let(f"{hint}_len", hi - lo)

    def seg_index(self, s: Var, delta: int, hint: str) -> Var:
        """(me - s + delta) mod NR; adding NR keeps the dividend non-negative (s <= NR - 2, delta >= -1)."""
        nr = self.comm.nr
        shifted = self.comm.me - s
        shifted = shifted + delta if delta > 0 else shifted - -delta  # SUB, not ADD of a negative
        return self.fb.let(hint, (shifted + nr) % nr)

    def extent(self, length: Var, col: ExprLike, hint: str) -> Var:
        """Elements of this subchunk inside the segment: 0 past its end."""
        return self.fb.let(hint, emax(0, emin(self.c, length - col)))

    def push(self, lo: Var, col: ExprLike, n: Var) -> None:
        """Put [1, n] elements at lo + col into the right neighbour's same slot (skipped when n == 0)."""
        fb = self.fb
        with fb.if_(n.gt(0)):
            at = lo + col
            staged = fb.pld.tile.set_validshape(self.stage, [1, n], hint="stage_n")
            fb.pld.tile.put(self.flat, self.right, self.flat, staged, [0, at], [0, at], [1, n])

    def subchunks(self, body: Callable[[Expr], None]) -> None:
        """Run ``body(k)`` for k in 0 .. chunks-1: a loop, or straight-line code when chunks == 1."""
        if static_int(self.chunks) == 1:
            body(Const(0))
        else:
            with self.fb.for_range(0, self.chunks, hint="k") as k:
                body(k)

    def generation(self, k: Expr) -> Expr:
        """Ready generation 2k + 1 of subchunk k (push-done is one more); k + 1 without push-done."""
        per_subchunk = 2 if self.comm.variant.ring_push_done else 1
        return bind_runtime(self.fb, "ready", per_subchunk * k + 1)

    def push_done(self, ready: Expr, row: ExprLike) -> None:
        """Push-done barrier (ready + 1): every push of the subchunk has landed before anyone reads
        its slot. The ring-no-push-done variant omits it."""
        if self.comm.variant.ring_push_done:
            emit_barrier(self.fb, self.comm, ready + 1, row)

    def reduce_scatter_round(self, s: Var) -> None:
        fb = self.fb
        send_lo, send_len = self.segment(self.seg_index(s, 0, "send_seg"), "send")
        recv_lo, recv_len = self.segment(self.seg_index(s, -1, "recv_seg"), "recv")

        def subchunk(k: Expr) -> None:
            col = bind_runtime(fb, "col", k * self.c)
            send_n = self.extent(send_len, col, "send_n")
            recv_n = self.extent(recv_len, col, "recv_n")
            at = recv_lo + col
            # Read the OWN value of the receive slot before the ready barrier: until every rank has
            # passed it no push can land, so the slot still holds only this rank's value.
            with fb.if_(recv_n.gt(0)):
                fb.assign_to(self.own, fb.call(Op.TILE_LOAD, [self.flat, [0, at], [1, self.c], [1, recv_n]]))
            ready = self.generation(k)
            emit_barrier(fb, self.comm, ready, s)
            self.push(send_lo, col, send_n)
            self.push_done(ready, s)
            with fb.if_(recv_n.gt(0)):
                left = fb.pld.tile.load(self.flat, [0, at], [1, self.c], [1, recv_n], hint="left")
                # reduce(left, own): the result takes its valid extent from the lhs, and ``own`` is typed as
                # the full tile it was created as. Every ReduceOp is commutative.
                total = fb.let("reduced", fb.call(self.tile_op, [left, self.own]))
                fb.pld.tile.store(total, [0, at], self.flat)

        self.subchunks(subchunk)

    def allgather_round(self, s: Var) -> None:
        fb = self.fb
        row = fb.let("row", s + (self.comm.nr - 1))
        lo, length = self.segment(self.seg_index(s, 1, "fwd_seg"), "fwd")

        def subchunk(k: Expr) -> None:
            col = bind_runtime(fb, "col", k * self.c)
            n = self.extent(length, col, "fwd_n")
            ready = self.generation(k)
            # Ready: every rank finished the previous round, so the forwarded slot holds final data
            # and the right neighbour's slot is no longer being read.
            emit_barrier(fb, self.comm, ready, row)
            self.push(lo, col, n)
            self.push_done(ready, row)

        self.subchunks(subchunk)

__all__ = ["lower_allreduce_ring"]
