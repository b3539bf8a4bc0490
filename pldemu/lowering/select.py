"""tile.select(cond, on_true, on_false): the packed predicate mask picks TSEL or TSELS (spec table).

    on_true  on_false  emitted
    tile     tile      tile.create(TSEL scratch) + tile.sel(mask, T, F, tmp)
    tile     scalar    tile.create(TSELS scratch) + tile.sels(mask, T, tmp, F)
    scalar   tile      tile.full(T) + tile.create(TSEL scratch) + tile.sel(mask, full, F, tmp)

TSELS is used only when the backend plans its scratch (required), the source is rank 2 (static
columns: pldemu tiles always are), the source dtype has a TSELS form (never BF16) and the scalar can
be re-typed to the TSELS scalar dtype; otherwise the scalar is materialised with tile.full and TSEL
is used, refused when the backend has no TSEL form for the dtype (8-bit on a2a3). A materialised
branch takes the other branch's valid extents (tile.full's valid_shape operand), so a tail-narrowed
select stays narrow and the rewritten call still prints and parses. ND operands take the TSEL path.
The deducer (ir/tile_signatures.py) already checked the mask, so no compare is synthesised here.
"""

from __future__ import annotations

import math

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import MemorySpace
from pldemu.ir.nodes import Assign, Call, Const, Expr, ListExpr, TileType, Var
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.ir.tile_signatures import SELS_SRC_DTYPES, sels_scalar_dtype
from pldemu.lowering.backend import ScratchPlan, ScratchRequest
from pldemu.lowering.common import Lowered, LoweringContext, LoweringError


class UnsupportedSelect(LoweringError):
    """A select the backend has no instruction for; the message is the whole sentence."""

    def __init__(self, ctx: LoweringContext, message: str) -> None:
        ValueError.__init__(self, message + (f" (at {ctx.where})" if ctx.where else ""))
        self.op, self.arg, self.expected, self.got, self.where = ctx.op, "on_true", message, "", ctx.where


def _retyped(c: Const, dtype: DType) -> Const | None:
    """The literal re-created with ``dtype``, value unchanged; None if ``dtype`` cannot hold it."""
    v = c.value
    if dtype.is_float:
        return Const(float(v), dtype)
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        return None
    iv = int(v)
    lo, hi = dtype.int_range()
    return Const(iv, dtype) if lo <= iv <= hi else None


def _scratch(fb: FunctionBuilder, ctx: LoweringContext, plan: ScratchPlan, role: str) -> Var:
    assert plan.dtype is not None
    call = make_call(Op.TILE_CREATE, [ListExpr(tuple(Const(d) for d in plan.shape))],
                     {"dtype": plan.dtype, "mem": MemorySpace.Vec})
    var = Var(fb.temp(ctx.target or "select", role), call.type)
    fb.emit(Assign(var, call))
    return var


def lower_tile_select(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Rewrite tile.select into tile.sels or tile.sel (see the module docstring)."""
    cond, on_true, on_false = call.args
    assert isinstance(cond, (Var, Call)) and isinstance(on_true, (Var, Call, Const))
    assert isinstance(on_false, (Var, Call, Const))
    model = call.type
    assert isinstance(model, TileType)
    backend = ctx.backend
    if isinstance(on_false, Const) and len(model.shape) == 2 and model.dtype in SELS_SRC_DTYPES:
        plan = backend.plan_op_scratch(Op.TILE_SELS, ScratchRequest(model.dtype, model.shape[-1]))
        scalar = _retyped(on_false, sels_scalar_dtype(model.dtype))
        if plan.required and scalar is not None:
            tmp = _scratch(fb, ctx, plan, "sels_tmp")
            return Lowered(make_call(Op.TILE_SELS, [cond, on_true, tmp, scalar]), Const(0),
                           note=f"TSELS, scratch {plan.describe()}")
    plan = backend.plan_op_scratch(Op.TILE_SEL, ScratchRequest(model.dtype, model.shape[-1]))
    if not plan.required:
        raise UnsupportedSelect(ctx, f"tile.select cannot select {model.dtype.value} values on backend "
                                f"'{backend.name}': neither pto.tsel nor pto.tsels has a form for that element "
                                "type there. Cast the operands to a wider type before selecting")
    lhs, rhs = (_materialise(fb, ctx, b, model) for b in (on_true, on_false))
    tmp = _scratch(fb, ctx, plan, "sel_tmp")
    full = "tile.full + " if isinstance(on_true, Const) or isinstance(on_false, Const) else ""
    return Lowered(make_call(Op.TILE_SEL, [cond, lhs, rhs, tmp]), Const(0),
                   note=f"{full}TSEL, scratch {plan.describe()}")


def _materialise(fb: FunctionBuilder, ctx: LoweringContext, branch: Expr, model: TileType) -> Expr:
    """A scalar branch as tile.full of the result's geometry, narrowed to the result's valid view."""
    if not isinstance(branch, Const):
        return branch
    value = _retyped(branch, model.dtype)
    if value is None:
        raise ctx.error("on_false", f"a literal a {model.dtype.value} tile can hold", repr(branch.value))
    args: list[Expr | ListExpr] = [ListExpr(tuple(Const(d) for d in model.shape)), value]
    if model.valid_shape is not None:
        args.append(ListExpr(model.valid_shape))
    full = make_call(Op.TILE_FULL, args, {"dtype": model.dtype})
    var = Var(fb.temp(ctx.target or "select", "full"), full.type)
    fb.emit(Assign(var, full))
    return var


__all__ = ["UnsupportedSelect", "lower_tile_select"]
