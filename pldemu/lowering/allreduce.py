"""``pld.tensor.allreduce(target, signal, op=..., mode=mesh|ring, lanes=L)``: validation and mode dispatch.

``lanes`` is pypto's ``core_num``: a HOST builtin's grid of L blocks per rank, each with its own signal
column (see ``allreduce_mesh``). 1, the default, is the specified InCore recipe; only mesh splits.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.enums import AllreduceMode
from pldemu.ir.nodes import Call, Var
from pldemu.ir.ops import Op
from pldemu.lowering.allreduce_mesh import lower_allreduce_mesh
from pldemu.lowering.allreduce_ring import lower_allreduce_ring
from pldemu.lowering.common import (
    REDUCE_DTYPES,
    Lowered,
    LoweringContext,
    check_dtype,
    check_layout,
    check_packed,
    check_signal,
    reduce_op,
    window_target,
)

ModeRule = Callable[[Call, FunctionBuilder, LoweringContext, Var, Var, Op], Lowered]

MODES: MappingProxyType[AllreduceMode, ModeRule] = MappingProxyType(
    {AllreduceMode.mesh: lower_allreduce_mesh, AllreduceMode.ring: lower_allreduce_ring}
)
"""mode -> recipe. Mesh and ring differ in signal convention as well as data movement."""


def lower_allreduce(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one allreduce: FP16/FP32, Sum/Max/Min/Prod, any positive element count."""
    mode = call.attr("mode")
    rule = MODES.get(mode) if isinstance(mode, AllreduceMode) else None
    if rule is None:
        legal = ", ".join(m.name for m in AllreduceMode)
        raise ctx.error("mode", f"one of {legal}", repr(mode))
    tile_op = reduce_op(ctx, call)
    lanes = dict(call.attrs).get("lanes")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise ctx.error("lanes", "a positive int", repr(lanes))
    if lanes > 1 and mode is not AllreduceMode.mesh:
        raise ctx.error("lanes", "1 with mode=ring (the ring runs one lane; pypto: core_num=1)", str(lanes))
    target, t = window_target(ctx, call, 0)
    check_dtype(ctx, "target", t, REDUCE_DTYPES)
    check_packed(ctx, "target", t)
    check_layout(ctx, "target", t)
    signal = check_signal(ctx, call, 1, ring=mode is AllreduceMode.ring, lanes=lanes)
    return rule(call, fb, ctx, target, signal, tile_op)


__all__ = ["MODES", "lower_allreduce"]
