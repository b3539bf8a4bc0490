"""Helpers of the stress MPI tests: a lowering that drops ops (the collective assert is helpers.agree)."""

from __future__ import annotations

from collections.abc import Callable

from pldemu.ir import Assign, Call, Eval, For, If, Op, Program, Seq, Stmt, While
from pldemu.lowering import RecipeVariant, lower_composite_ops


def _drop(seq: Seq, op: Op) -> Seq:
    out: list[Stmt] = []
    for st in seq.stmts:
        if isinstance(st, For):
            st = For(st.var, st.start, st.stop, st.step, _drop(st.body, op))
        elif isinstance(st, While):
            st = While(st.cond, _drop(st.body, op))
        elif isinstance(st, If):
            st = If(st.cond, _drop(st.then, op), None if st.orelse is None else _drop(st.orelse, op))
        elif isinstance(st, Seq):
            st = _drop(st, op)
        call = st.call if isinstance(st, Eval) else st.value if isinstance(st, Assign) else None
        if isinstance(call, Call) and call.op is op:
            continue
        out.append(st)
    return Seq(tuple(out))


def lowering_without(op: Op, variant: RecipeVariant | None = None) -> Callable[[Program], Program]:
    """LowerCompositeOps (with ``variant``), then every ``op`` statement removed from main."""

    def lower(program: Program) -> Program:
        lowered = lower_composite_ops(program, variant=variant or RecipeVariant())
        main = lowered.function()
        return lowered.replace_function(type(main)(main.name, main.params, _drop(main.body, op)))

    return lower
