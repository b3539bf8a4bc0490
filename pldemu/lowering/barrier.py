"""``pld.tensor.barrier(signal) -> signal``: barrier(1) then epilogue(1); no data movement.

Every call restarts at generation 1 whatever the signal's history, so ``sig = barrier(sig)``
needs no state from earlier calls.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import Call, Const
from pldemu.lowering.common import (
    Lowered,
    LoweringContext,
    check_signal,
    emit_comm,
    emit_single_phase_end,
)


def lower_barrier(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one barrier."""
    signal = check_signal(ctx, call, 0)
    comm = emit_comm(fb, ctx, signal, signal)
    emit_single_phase_end(fb, comm)
    return Lowered(signal, Const(1))


__all__ = ["lower_barrier"]
