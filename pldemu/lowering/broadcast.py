"""``pld.tensor.broadcast(target, signal, root=R) -> target`` (R a static int).

    barrier(1)                                   # root's data is staged
    pld.tile.get(target, R, target, stage)       # every rank; on the root a local no-op
    epilogue(1)

Known, deferred race (pypto #2175): nothing stops a fast root from overwriting its window for the
next call while a slow peer is still reading it; the recipe is kept exactly as specified. The
variant ``RecipeVariant(broadcast_read_complete=True)`` adds a second barrier after the get (and
retires 2), which closes it.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import Call, Const
from pldemu.lowering.common import (
    Geometry,
    Lowered,
    LoweringContext,
    check_fully_valid,
    check_signal,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    stage_tile,
    window_target,
)


def lower_broadcast(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one broadcast from the static root rank."""
    root = call.attr("root")
    if not isinstance(root, int) or isinstance(root, bool) or root < 0:
        raise ctx.error("root", "a non-negative integer rank", repr(root))
    if ctx.nranks is not None and root >= ctx.nranks:
        raise ctx.error("root", f"a rank below the pinned NR = {ctx.nranks}", str(root))
    target, t = window_target(ctx, call, 0)
    check_fully_valid(ctx, "target", t)
    signal = check_signal(ctx, call, 1)

    comm = emit_comm(fb, ctx, target, signal)
    # The stage is capped at one chunk whatever the target's extent; a runtime dim takes the bound.
    stage, shape = stage_tile(fb, ctx, Geometry.of(t.dtype), "target", t.shape)
    emit_barrier(fb, comm, 1)
    fb.pld.tile.get(target, root, target, stage)
    credits = 1
    if comm.variant.broadcast_read_complete:
        # Read-complete round (the fix of the #2175 race): nobody, the root included, leaves the
        # call before every peer's get has finished reading the root's window.
        emit_barrier(fb, comm, 2)
        credits = 2
    emit_epilogue(fb, comm, credits)
    return Lowered(target, Const(credits), None, None, shape)


__all__ = ["lower_broadcast"]
