"""``pld.tensor.allgather(local_data [1, SIZE], target [NR, SIZE], signal) -> target`` (push).

    for peer in range(0, nr):                    # self included: a local copy
        pld.tile.put(target, peer, local_data, stage, [me, 0], [0, 0], [1, SIZE])
    barrier(1)                                   # every row has landed everywhere
    epilogue(1)

The window is the result. put reads local_data directly (no tile.load) and auto-chunks through a
stage of at most 16 KiB.

``RecipeVariant.allgather_pull`` lowers the pull form instead: every rank stores its own row into its
own target (tile.load / tile.store, in chunks of at most 16 KiB), barrier(1), gets every peer's row
from that peer's target into its own, barrier(2) (read-complete: nobody still reads a row its owner
rewrites in the next call), epilogue(2). Its own-row stores are window writes a peer reads within the
call, the one place a lowered collective needs the fence InsertCommFence places after a window write.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import Call, Const, Expr, ExprLike, Var, ceildiv, emin, static_int
from pldemu.lowering.common import (
    Comm,
    Geometry,
    Lowered,
    LoweringContext,
    check_dims,
    check_fully_valid,
    check_signal,
    check_target_dtype,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    emit_peer_loop,
    emit_single_phase_end,
    same_extent,
    show,
    stage_tile,
    subst_nr,
    tensor_arg,
    window_target,
)


def lower_allgather(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one allgather."""
    local, lt = tensor_arg(ctx, call, 0, "local_data")
    target, t = window_target(ctx, call, 1)
    if ctx.root(local) & ctx.root(target):
        raise ctx.error("local_data", "a buffer other than the target (it is pushed into the target of every "
                        "rank, its own included)", f"{local.name} aliases {target.name}")
    check_dims(ctx, "target", t, [lambda n: n, None], "[NR, SIZE]")
    check_dims(ctx, "local_data", lt, [lambda n: 1, None], "[1, SIZE]")
    check_target_dtype(ctx, "local_data", lt, t)
    size = t.shape[1]
    if not same_extent(lt.shape[1], size, ctx.nranks):
        raise ctx.error("local_data", f"[1, {show(size)}] (one row of the target)", show(lt.shape))
    check_fully_valid(ctx, "target", t)
    check_fully_valid(ctx, "local_data", lt)
    signal = check_signal(ctx, call, 2)

    comm = emit_comm(fb, ctx, target, signal)
    geo = Geometry.of(t.dtype)
    stage, shape = stage_tile(fb, ctx, geo, "local_data", [Const(1), size])
    n = subst_nr(size, comm.nr)
    if ctx.variant.allgather_pull:
        return _pull(fb, comm, local, target, stage, geo, size, n, shape)
    with fb.for_range(0, comm.nr, hint="peer") as peer:
        fb.pld.tile.put(target, peer, local, stage, [comm.me, 0], [0, 0], [1, n])
    emit_single_phase_end(fb, comm)  # the gathered rows are complete on every rank only after its barrier
    return Lowered(target, Const(1), None, None, shape)


def _pull(fb: FunctionBuilder, comm: Comm, local: Var, target: Var, stage: Var, geo: Geometry, size: Expr,
          n: Expr, shape: tuple[int, int]) -> Lowered:
    """The pull form (``RecipeVariant.allgather_pull``; the module docstring)."""
    c = geo.chunk_cols(size)
    if static_int(ceildiv(size, c)) == 1:
        _store_own(fb, comm, local, target, n, c, Const(0))
    else:
        with fb.for_range(0, n, c, hint="col") as col:
            _store_own(fb, comm, local, target, n, c, col)
    emit_barrier(fb, comm, 1)  # every rank's own row is in its own target
    emit_peer_loop(fb, comm, "src", lambda peer: fb.pld.tile.get(target, peer, target, stage, [peer, 0],
                                                                 [peer, 0], [1, n]))
    emit_barrier(fb, comm, 2)  # read-complete: no peer still gets a row its owner rewrites next call
    emit_epilogue(fb, comm, 2)
    return Lowered(target, Const(2), None, None, shape)


def _store_own(fb: FunctionBuilder, comm: Comm, local: Var, target: Var, n: Expr, c: int, col: ExprLike) -> None:
    width: ExprLike = emin(c, n - col)
    if static_int(width) is None:
        width = fb.let("valid", width)
    row = fb.pld.tile.load(local, [0, col], [1, c], [1, width], hint="own")
    fb.pld.tile.store(row, [comm.me, col], target)


__all__ = ["lower_allgather"]
