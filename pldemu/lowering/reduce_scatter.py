"""``pld.tensor.reduce_scatter(target [NR, SIZE], signal, op=...) -> target``.

Every rank stages all NR rows before the call; afterwards rank r's row r holds the reduction of
row r across ranks::

    barrier(1)                                   # every rank's rows are staged
    acc = own row me; for peer != me: acc = reduce(acc, remote_load(peer's row me))
    barrier(2)                                   # post-reduce: nobody still reads a row
    tile.store(acc, [me, 0], target)
    epilogue(2)

A row longer than one 16-KiB chunk is reduced chunk by chunk and each chunk is stored as soon as it
is reduced (before barrier 2): no peer ever reads row ``me`` of this rank (peer p reads only row p),
so the early store cannot race with a remote_load, while barrier 2 still keeps every rank inside the
call until all reads of its rows are done (the write-after-read hazard of restaging for the next
call). This keeps the credit count at 2 whatever the row length.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import Call, Const, Expr, ExprLike, Var, ceildiv, emin, static_int
from pldemu.ir.ops import Op
from pldemu.lowering.common import (
    REDUCE_DTYPES,
    Comm,
    Geometry,
    Lowered,
    LoweringContext,
    check_dims,
    check_dtype,
    check_fully_valid,
    check_packed,
    check_signal,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    emit_peer_loop,
    reduce_op,
    subst_nr,
    window_target,
)


def lower_reduce_scatter(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one reduce_scatter: FP16/FP32, Sum/Max/Min/Prod."""
    tile_op = reduce_op(ctx, call)
    target, t = window_target(ctx, call, 0)
    check_dtype(ctx, "target", t, REDUCE_DTYPES)
    check_packed(ctx, "target", t)
    check_dims(ctx, "target", t, [lambda n: n, None], "[NR, SIZE]")
    check_fully_valid(ctx, "target", t)
    signal = check_signal(ctx, call, 1)

    comm = emit_comm(fb, ctx, target, signal)
    geo = Geometry.of(t.dtype)
    size_sym = t.shape[1]
    size = subst_nr(size_sym, comm.nr)
    c = geo.chunk_cols(size_sym)
    chunks_sym = ceildiv(size_sym, c)
    # The variant may drop the post-reduce barrier: then one credit per call, retired by the epilogue.
    post_reduce = comm.variant.reduce_scatter_post_reduce_barrier
    emit_barrier(fb, comm, 1)  # ready: every rank has staged all its rows
    if static_int(chunks_sym) == 1:
        acc = _reduce_chunk(fb, comm, target, tile_op, size, c, Const(0))
        if post_reduce:
            emit_barrier(fb, comm, 2)  # post-reduce
        fb.pld.tile.store(acc, [comm.me, 0], target)
    else:
        with fb.for_range(0, size, c, hint="col") as col:
            acc = _reduce_chunk(fb, comm, target, tile_op, size, c, col)
            fb.pld.tile.store(acc, [comm.me, col], target)  # safe before barrier 2: see module doc
        if post_reduce:
            emit_barrier(fb, comm, 2)
    credits = 2 if post_reduce else 1
    emit_epilogue(fb, comm, credits)
    return Lowered(target, Const(credits), None, chunks_sym, None)


def _reduce_chunk(fb: FunctionBuilder, comm: Comm, target: Var, tile_op: Op, size: Expr, c: int,
                  col: Expr) -> Var:
    tile = fb.pld.tile
    width: ExprLike = emin(c, size - col)
    if static_int(width) is None:
        width = fb.let("valid", width)
    acc = tile.load(target, [comm.me, col], [1, c], [1, width], hint="acc")

    def add_peer(peer: Var) -> None:
        got = tile.remote_load(target, peer, [comm.me, col], [1, c], [1, width], hint="peer_row")
        fb.assign(acc, fb.call(tile_op, [acc, got]))

    emit_peer_loop(fb, comm, "peer", add_peer)
    return acc


__all__ = ["lower_reduce_scatter"]
