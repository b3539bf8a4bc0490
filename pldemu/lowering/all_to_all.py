"""``pld.tensor.all_to_all(input [NR, SIZE], target [NR, SIZE], signal) -> target`` (push).

    for dest in range(0, nr):                    # self included: a local copy
        pld.tile.put(target, dest, input, stage, [me, 0], [dest, 0], [1, SIZE])
    barrier(1)
    epilogue(1)
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import Call, Const
from pldemu.lowering.common import (
    Geometry,
    Lowered,
    LoweringContext,
    check_dims,
    check_separate_input,
    check_signal,
    check_target_dtype,
    emit_comm,
    emit_single_phase_end,
    same_extent,
    show,
    stage_tile,
    subst_nr,
    tensor_arg,
    window_target,
)


def lower_all_to_all(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one all_to_all."""
    src, it = tensor_arg(ctx, call, 0, "input")
    target, t = window_target(ctx, call, 1)
    check_dims(ctx, "target", t, [lambda n: n, None], "[NR, SIZE]")
    check_dims(ctx, "input", it, [lambda n: n, None], "[NR, SIZE]")
    check_target_dtype(ctx, "input", it, t)
    size = t.shape[1]
    if not same_extent(it.shape[1], size, ctx.nranks):
        raise ctx.error("input", f"shaped like the target [NR, {show(size)}]", show(it.shape))
    check_separate_input(ctx, src, it, target, t)
    signal = check_signal(ctx, call, 2)

    comm = emit_comm(fb, ctx, target, signal)
    stage, shape = stage_tile(fb, ctx, Geometry.of(t.dtype), "input", [Const(1), size])
    n = subst_nr(size, comm.nr)
    with fb.for_range(0, comm.nr, hint="dest") as dest:
        fb.pld.tile.put(target, dest, src, stage, [comm.me, 0], [dest, 0], [1, n])
    emit_single_phase_end(fb, comm)
    return Lowered(target, Const(1), None, None, shape)


__all__ = ["lower_all_to_all"]
