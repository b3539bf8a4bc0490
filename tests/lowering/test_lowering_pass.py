"""The pass itself: rewriting sites, result binding, fresh names, idempotency, unchanged programs,
verifier and text round trip on every lowered program, the dispatch table."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
from lowering_helpers import calls_of, looped, roundtrip, specs_all

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import (
    COLLECTIVES,
    NR,
    Assign,
    DType,
    Eval,
    ProgramBuilder,
    Return,
    Var,
    WaitCmp,
    format_program,
    verify,
)
from pldemu.ir.nodes import Const
from pldemu.ir.ops import TILE_COMPOSITES, Op
from pldemu.ir.signatures import SIGNATURES
from pldemu.lowering import (
    RULES,
    LowerCompositeOps,
    LoweringError,
    RecipeVariant,
    lower_composite_ops,
    lower_composite_ops_with_report,
)
from pldemu.lowering.rules import ARGS

ALL_SPECS = [s for size in (17, 4097, 65537) for dt in (DType.FP32, DType.FP16) for s in specs_all(size, dt)]


def test_dispatch_table_is_immutable_and_complete() -> None:
    assert isinstance(RULES, MappingProxyType)
    assert set(RULES) == set(COLLECTIVES) | TILE_COMPOSITES
    assert all(callable(rule) and rule.__name__ == f"lower_{op.name.lower()}" for op, rule in RULES.items())
    with pytest.raises(TypeError):
        RULES[Op.TILE_ADD] = RULES[Op.BARRIER]  # type: ignore[index]


@pytest.mark.parametrize("spec", ALL_SPECS, ids=str)
def test_verifier_round_trip_idempotency(spec: CollectiveSpec) -> None:
    program = collective_program(spec).program
    verify(program)
    roundtrip(program)
    once = lower_composite_ops(program)
    verify(once)
    roundtrip(once)
    assert lower_composite_ops(once) is once  # nothing left to lower: the very same program
    assert format_program(lower_composite_ops(once)) == format_program(once)


@pytest.mark.parametrize("spec", list(specs_all(17)), ids=str)
def test_lowering_inside_loops_verifies_and_round_trips(spec: CollectiveSpec) -> None:
    once = lower_composite_ops(looped(collective_program(spec).program, 2))
    verify(once)
    roundtrip(once)


def test_program_without_collectives_is_returned_unchanged() -> None:
    pb = ProgramBuilder("plain")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    ctx = fb.pld.system.get_comm_ctx(sig)
    me = fb.pld.system.rank(ctx)
    fb.pld.system.notify(sig, me, [me, 0], 1)
    program = pb.build()
    out = lower_composite_ops(program)
    assert out is program and out == program
    assert lower_composite_ops_with_report(program).calls == ()


def test_functions_without_collectives_are_kept() -> None:
    pb = ProgramBuilder("two")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function("main")
    fb.pld.tensor.barrier(sig)
    other = pb.function("helper")
    other.pld.system.get_comm_ctx(sig)
    program = pb.build()
    out = lower_composite_ops(program)
    assert out.function("helper") is program.function("helper")
    assert out.function("main") != program.function("main")


def test_final_assignment_keeps_the_original_lhs() -> None:
    program = collective_program(CollectiveSpec("allreduce", size=17)).program
    (original,) = program.function().body.stmts
    assert isinstance(original, Assign)
    last = lower_composite_ops(program).function().body.stmts[-1]
    assert isinstance(last, Assign)
    assert last.var == original.var  # same name, same type: downstream uses are untouched
    assert last.value == Var("target", original.var.type)


def test_eval_and_return_of_a_collective() -> None:
    pb = ProgramBuilder("forms")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    fb.emit(Eval(fb.call(Op.BARRIER, [sig])))
    fb.emit(Return((fb.call(Op.BARRIER, [sig]),)))
    out = lower_composite_ops(pb.build())
    verify(out)
    body = out.function().body.stmts
    assert body[-1] == Return((sig,))  # returns the result: the signal itself
    assert not any(c.op in RULES for c in calls_of(out))
    assert len(lower_composite_ops_with_report(pb.build()).calls) == 2


def test_nested_collective_is_hoisted_before_its_use() -> None:
    pb = ProgramBuilder("nested")
    data = pb.window("data", "fp32", [1, 17])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    fb.let("first", fb.call(Op.TENSOR_READ, [fb.call(Op.ALLREDUCE, [data, sig]), [0, 0]]))
    out = lower_composite_ops(pb.build())
    verify(out)
    last = out.function().body.stmts[-1]
    assert isinstance(last, Assign) and last.var.name == "first"
    assert last.value == fb.call(Op.TENSOR_READ, [data, [0, 0]])


def test_collective_in_a_while_condition_is_rejected() -> None:
    pb = ProgramBuilder("cond")
    data = pb.window("data", "int32", [1, 1])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    cond = fb.call(Op.TENSOR_READ, [fb.call(Op.BROADCAST, [data, sig], {"root": 0}), [0, 0]])
    with fb.while_(cond.gt(0)):
        pass
    with pytest.raises(LoweringError, match="while condition") as err:
        lower_composite_ops(pb.build())
    assert "func main > stmt 1" in str(err.value)


def test_fresh_names_do_not_collide_with_user_names() -> None:
    pb = ProgramBuilder("names")
    data = pb.window("data", "fp32", [1, 17])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    for name in ("ctx", "me", "nr", "peer", "src", "acc", "data_view"):
        fb.let(name, 7)
    fb.pld.tensor.allreduce(data, sig)
    fb.pld.tensor.allreduce(data, sig)
    out = lower_composite_ops(pb.build())
    verify(out)
    roundtrip(out)
    text = format_program(out)
    for fresh in ("ctx_1 = pld.system.get_comm_ctx(data)", "me_1 = pld.system.rank(ctx_1)",
                  "ctx_2 = pld.system.get_comm_ctx(data)", "data_view_1 = tensor.view(data, [1, 17])"):
        assert fresh in text


def test_every_lowered_call_is_reported_in_program_order() -> None:
    pb = ProgramBuilder("order")
    data = pb.window("data", "fp32", [1, 17])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    fb.pld.tensor.barrier(sig)
    with fb.for_range(0, 2):
        fb.pld.tensor.allreduce(data, sig, op="max")
    rep = lower_composite_ops_with_report(pb.build())
    assert [c.call.op for c in rep.calls] == [Op.BARRIER, Op.ALLREDUCE]
    assert "for i" in rep.calls[1].where
    line = rep.calls[1].summary()
    assert line.startswith("pld.tensor.allreduce [op=Max mode=mesh lanes=1] at func main > stmt 2 > for i > stmt 1:")
    assert "tile.maximum x1" in line and "barriers/cell 2" in line and "chunks 1" in line


def test_pinned_program_gets_the_same_code() -> None:
    """NR pinned or not, the emitted code is identical: lowering never depends on the rank count."""
    for spec in specs_all(4097):
        free = lower_composite_ops(collective_program(spec).program)
        pinned = lower_composite_ops(collective_program(
            CollectiveSpec(spec.name, mode=spec.mode, size=spec.size, nranks=4)).program)
        assert pinned.functions == free.functions
        assert pinned.nranks == 4


def test_emitted_code_uses_runtime_rank_queries_only() -> None:
    for spec in specs_all(4097):
        out = lower_composite_ops(collective_program(spec).program)
        body_text = format_program(out).split("func main", 1)[1]
        assert "NR" not in body_text  # geometry uses nr = pld.system.nranks(ctx)


def test_lower_accepts_const_true_if() -> None:
    pb = ProgramBuilder("branch")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    with fb.if_(Const(True)):
        fb.pld.tensor.barrier(sig)
    out = lower_composite_ops(pb.build())
    verify(out)
    roundtrip(out)




def test_argument_roles_come_from_the_signature_table() -> None:
    """ARGS is derived from SIGNATURES: the result alias and the signal of every collective."""
    expected = {
        Op.ALLREDUCE: (0, 1), Op.ALLGATHER: (1, 2), Op.REDUCE_SCATTER: (0, 1), Op.BROADCAST: (0, 1),
        Op.BARRIER: (0, 0), Op.ALL_TO_ALL: (1, 2), Op.ALL_TO_ALL_V: (1, 2),
    }
    assert isinstance(ARGS, MappingProxyType)
    assert {op: (a.result, a.signal) for op, a in ARGS.items()} == expected
    for op, roles in ARGS.items():
        names = [p.name for p in SIGNATURES[op].params]
        assert names[roles.signal] == "signal"


def test_the_pass_object_carries_its_options() -> None:
    """LowerCompositeOps(variant).apply is the function entry point; options are frozen fields."""
    program = collective_program(CollectiveSpec("allreduce", size=17)).program
    variant = RecipeVariant(wait_cmp=WaitCmp.Eq)
    lowered = LowerCompositeOps(variant).apply(program)
    assert lowered == lower_composite_ops(program, variant=variant)
    assert lowered != LowerCompositeOps().apply(program)
    assert LowerCompositeOps().apply(program) == lower_composite_ops(program)
    assert LowerCompositeOps.name == "lower-composite-ops"
    with pytest.raises(dataclasses.FrozenInstanceError):
        LowerCompositeOps().variant = variant  # type: ignore[misc]
    with pytest.raises(TypeError, match="variant must be a RecipeVariant"):
        LowerCompositeOps("Eq")  # type: ignore[arg-type]
