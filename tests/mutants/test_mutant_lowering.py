"""The recipe variants in the lowered IR: the default variant is byte-identical to the specified recipes
(the goldens), every variant field changes only the collectives it names, and every mutant's program
differs from the correct one exactly where its description says."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import fields, replace

import pytest
from lowering_helpers import calls_of, looped, roundtrip, specs_all, wait_generations
from test_lowering_golden import CASES, GOLDEN

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType, NotifyOp, Program, WaitCmp, format_program, verify
from pldemu.ir.nodes import Call, Var, format_expr
from pldemu.ir.ops import Op
from pldemu.lowering import (
    CORRECT,
    InsertCommFence,
    RecipeVariant,
    insert_fences,
    lower_composite_ops,
    lower_composite_ops_with_report,
)
from pldemu.mutants import MUTANTS, Mutant

ALL_SPECS = [s for size in (17, 4097, 65537) for dt in (DType.FP32, DType.FP16) for s in specs_all(size, dt)] + [
    CollectiveSpec("allreduce", shape=(8, 16), valid_shape=(3, 10)),
    CollectiveSpec("allreduce", mode=AllreduceMode.ring, shape=(4, 8), valid_shape=(2, 8)),
    CollectiveSpec("broadcast", root=2, shape=(3, 24)),
]


def text(program: Program) -> str:
    return format_program(program)


def lower(spec: CollectiveSpec, variant: RecipeVariant = CORRECT) -> Program:
    return lower_composite_ops(collective_program(spec).program, variant=variant)


def signal_notifies(p: Program) -> list[Call]:
    """Notifies on the barrier signal (not all_to_all_v's recv_counts), in program order."""
    out = []
    for c in calls_of(p, Op.NOTIFY):
        sig = c.args[0]
        assert isinstance(sig, Var)
        if sig.name == "signal":
            out.append(c)
    return out


def credits(p: Program) -> list[tuple[NotifyOp, str]]:
    """(op, value) of every credit (a notify to a peer, i.e. not a negative retire), in order."""
    return [(c.attr("op"), format_expr(c.args[3])) for c in signal_notifies(p)  # type: ignore[misc]
            if not format_expr(c.args[3]).startswith("-")]


def retires(p: Program) -> list[str]:
    """Values of the epilogue's self-notifies (negative AtomicAdd), in order."""
    out = []
    for c in signal_notifies(p):
        value = format_expr(c.args[3])
        if value.startswith("-"):
            assert c.attr("op") is NotifyOp.AtomicAdd
            out.append(value)
    return out


def barrier_shape(p: Program) -> str:
    """Program-order sequence of signal operations: N credit, W wait, R retire."""
    events = [c for c in calls_of(p) if c.op in (Op.NOTIFY, Op.WAIT)
              and isinstance(c.args[0], Var) and c.args[0].name == "signal"]
    return "".join("W" if c.op is Op.WAIT else "R" if format_expr(c.args[3]).startswith("-") else "N"
                   for c in events)


def changed_lines(a: Program, b: Program) -> tuple[list[str], list[str]]:
    """(removed, added) lines of the unified diff a -> b (stripped)."""
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.unified_diff(text(a).splitlines(), text(b).splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (removed if line.startswith("-") else added).append(line[1:].strip())
    return removed, added


# ----------------------------------------------------------------------------------------------
# The default variant is the specified recipe
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_default_variant_reproduces_the_goldens(name: str) -> None:
    program = collective_program(CASES[name]).program
    golden = (GOLDEN / f"{name}.pld").read_text()
    assert text(lower_composite_ops(program, variant=RecipeVariant())) == golden
    assert text(lower_composite_ops_with_report(program, variant=CORRECT).program) == golden
    assert text(lower_composite_ops(program)) == golden  # the old signature still works


@pytest.mark.parametrize("spec", ALL_SPECS, ids=str)
def test_default_variant_is_byte_identical_everywhere(spec: CollectiveSpec) -> None:
    program = looped(collective_program(spec).program, 2)
    assert text(lower_composite_ops(program, variant=RecipeVariant())) == text(lower_composite_ops(program))


def test_variants_leave_no_state_behind() -> None:
    """No global, no cache: a mutant lowering in between does not change the next correct one."""
    spec = CASES["allreduce_mesh_fp32_17"]
    golden = (GOLDEN / "allreduce_mesh_fp32_17.pld").read_text()
    for m in MUTANTS.values():
        m.lower()
        assert text(lower(spec)) == golden


# Which collectives each recipe-specific field may change; the protocol fields change all of them.
AFFECTS: dict[str, set[tuple[str, AllreduceMode]]] = {
    "mesh_post_reduce_barrier": {("allreduce", AllreduceMode.mesh)},
    "reduce_scatter_post_reduce_barrier": {("reduce_scatter", AllreduceMode.mesh)},
    "ring_push_done": {("allreduce", AllreduceMode.ring)},
    "a2av_readiness_wait": {("all_to_all_v", AllreduceMode.mesh)},
    "broadcast_read_complete": {("broadcast", AllreduceMode.mesh)},
    "allgather_pull": {("allgather", AllreduceMode.mesh)},
}
SINGLE_FIELD: dict[str, object] = {
    "notify_before_wait": False, "wait_cmp": WaitCmp.Eq, "credit_op": NotifyOp.Set,
    "generation_threshold": False, "epilogue": False, "epilogue_shortfall": 1,
    **{name: not getattr(CORRECT, name) for name in AFFECTS},
}


def test_every_field_is_exercised() -> None:
    assert set(SINGLE_FIELD) == {f.name for f in fields(RecipeVariant)}


@pytest.mark.parametrize("field", list(SINGLE_FIELD))
@pytest.mark.parametrize("spec", list(specs_all(17)) + list(specs_all(65537)), ids=str)
def test_each_field_changes_only_its_collectives(field: str, spec: CollectiveSpec) -> None:
    variant = replace(CORRECT, **{field: SINGLE_FIELD[field]})  # type: ignore[arg-type]
    mutated = lower(spec, variant)
    verify(mutated)
    roundtrip(mutated)
    assert lower_composite_ops(mutated, variant=variant) is mutated  # still idempotent
    key = (spec.name, spec.mode if spec.name == "allreduce" else AllreduceMode.mesh)
    protocol_field = field not in AFFECTS
    barrier_with_one_credit = field == "generation_threshold" and spec.name in ("barrier", "allgather", "all_to_all",
                                                                                "broadcast")
    expect_change = (protocol_field and not barrier_with_one_credit) or key in AFFECTS.get(field, set())
    # One barrier at generation 1 is unaffected by a fixed threshold of 1; a shortfall of 1 on a
    # one-credit call removes its epilogue, which is a change.
    assert (text(mutated) != text(lower(spec))) == expect_change


# ----------------------------------------------------------------------------------------------
# Each mutant differs exactly where described
# ----------------------------------------------------------------------------------------------


def _barrier_fixed_threshold(m: Mutant, good: Program, bad: Program) -> None:
    assert wait_generations(good) == ["1", "2"]
    assert wait_generations(bad) == ["1", "1"]  # the post-reduce barrier passes at once
    assert credits(bad) == [(NotifyOp.Set, "1"), (NotifyOp.Set, "1")]
    assert retires(good) == ["-2"] and retires(bad) == []


def _wait_eq(m: Mutant, good: Program, bad: Program) -> None:
    assert {w.attr("cmp") for w in calls_of(bad, Op.WAIT)} == {WaitCmp.Eq}
    assert text(bad) == text(good).replace("cmp=Ge", "cmp=Eq")


def _set_credits(m: Mutant, good: Program, bad: Program) -> None:
    assert credits(good) == [(NotifyOp.AtomicAdd, "1"), (NotifyOp.AtomicAdd, "1")]
    assert credits(bad) == [(NotifyOp.Set, "1"), (NotifyOp.Set, "2")]  # the generation each one completes
    assert retires(bad) == retires(good) == ["-2"]  # still AtomicAdd: Set mixed with AtomicAdd
    removed, added = changed_lines(good, bad)
    assert len(removed) == len(added) == 2 and all("op=Set" in line for line in added)


def _no_post_reduce_barrier(m: Mutant, good: Program, bad: Program) -> None:
    assert wait_generations(good) == ["1", "2"] and wait_generations(bad) == ["1"]
    assert retires(good) == ["-2"] and retires(bad) == ["-1"]
    assert len(calls_of(bad, Op.REMOTE_LOAD)) == len(calls_of(good, Op.REMOTE_LOAD))
    assert barrier_shape(bad) == "NWR"


def _no_epilogue(m: Mutant, good: Program, bad: Program) -> None:
    assert retires(bad) == [] and barrier_shape(bad) == "NWNW"
    removed, added = changed_lines(good, bad)
    assert added == [] and sum("pld.system.notify" in line for line in removed) == 1
    assert any(", -2, op=AtomicAdd)" in line for line in removed)


def _epilogue_one_short(m: Mutant, good: Program, bad: Program) -> None:
    assert retires(good) == ["-2"] and retires(bad) == ["-1"]  # N - 1
    removed, added = changed_lines(good, bad)
    assert len(removed) == len(added) == 1 and added[0] == removed[0].replace(", -2,", ", -1,")


def _ring_no_push_done(m: Mutant, good: Program, bad: Program) -> None:
    assert len(calls_of(bad, Op.WAIT)) * 2 == len(calls_of(good, Op.WAIT))  # half the ring waits
    assert wait_generations(good) == ["1", "2", "1", "2"] and wait_generations(bad) == ["1", "1"]
    assert retires(good) == ["-2"] and retires(bad) == ["-1"]  # 2 * chunks -> chunks, on every row
    assert len(calls_of(bad, Op.PUT)) == len(calls_of(good, Op.PUT))
    assert barrier_shape(bad) == "NWNWR"


def _a2av_no_readiness(m: Mutant, good: Program, bad: Program) -> None:
    assert wait_generations(good) == ["1", "2"] and wait_generations(bad) == ["2"]
    assert credits(bad) == credits(good)  # the readiness credit is still posted (accounting intact)
    assert retires(bad) == retires(good) == ["-2"]


def _wait_before_notify(m: Mutant, good: Program, bad: Program) -> None:
    assert barrier_shape(good) == "NWR" and barrier_shape(bad) == "WNR"


def _broadcast_rewrite_race(m: Mutant, good: Program, bad: Program) -> None:
    assert text(bad) == text(good) and m.variant == CORRECT and not m.consume_fence


def _broadcast_read_complete(m: Mutant, good: Program, bad: Program) -> None:
    assert wait_generations(good) == ["1"] and wait_generations(bad) == ["1", "2"]
    assert retires(bad) == ["-2"] and barrier_shape(bad) == "NWNWR"
    order = [c.op for c in calls_of(bad) if c.op in (Op.GET, Op.WAIT)]
    assert order == [Op.WAIT, Op.GET, Op.WAIT]  # the read-complete round comes after the get


def _drop_marker(m: Mutant, good: Program, bad: Program) -> None:
    """Exactly the one marker is gone; the correct program is the specified recipe with every marker
    (and the toolchain's drains, which a drop entry keeps)."""
    assert m.drop is not None
    assert text(good) == text(insert_fences(lower(m.spec, m.variant)))
    removed, added = changed_lines(good, bad)
    assert added == [] and [line.strip() for line in removed] == ["system.fence()"]
    assert text(InsertCommFence().apply(bad)) != text(bad)  # the runtime's pass would put a fence back


CHECKS: dict[str, Callable[[Mutant, Program, Program], None]] = {
    "barrier-fixed-threshold": _barrier_fixed_threshold,
    "wait-eq": _wait_eq,
    "set-credits": _set_credits,
    "allreduce-no-post-reduce-barrier": _no_post_reduce_barrier,
    "reduce-scatter-no-post-reduce-barrier": _no_post_reduce_barrier,
    "no-epilogue": _no_epilogue,
    "epilogue-one-short": _epilogue_one_short,
    "ring-no-push-done": _ring_no_push_done,
    "a2av-no-readiness": _a2av_no_readiness,
    "wait-before-notify": _wait_before_notify,
    "broadcast-rewrite-race": _broadcast_rewrite_race,
    "broadcast-read-complete": _broadcast_read_complete,
    "allgather-drop-put-fence": _drop_marker,
    "ring-drop-put-fence": _drop_marker,
    "allgather-pull-drop-write-fence": _drop_marker,
}


def test_every_mutant_has_a_structural_check() -> None:
    assert set(CHECKS) == set(MUTANTS)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_differs_exactly_where_described(name: str) -> None:
    m = MUTANTS[name]
    good, bad = m.lower_correct(), m.lower()
    verify(bad)
    roundtrip(bad)
    if m.drop is None:
        assert text(good) == text(lower(m.spec))
    CHECKS[name](m, good, bad)


def test_ring_without_push_done_on_several_subchunks() -> None:
    """Runtime subchunk counts: ready generations become k + 1 and the epilogue retires ``chunks``."""
    spec = CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=65537)
    bad = lower(spec, RecipeVariant(ring_push_done=False))
    assert wait_generations(bad) == ["ready", "ready_1"]
    assert "ready = k + 1" in text(bad) and "ready = (2 * k) + 1" in text(lower(spec))
    (call,) = lower_composite_ops_with_report(collective_program(spec).program,
                                              variant=RecipeVariant(ring_push_done=False)).calls
    assert format_expr(call.lowered.credits) == format_expr(call.lowered.chunks)  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", list(specs_all(17)) + list(specs_all(65537)), ids=str)
def test_epilogue_shortfall_retires_n_minus_one_everywhere(spec: CollectiveSpec) -> None:
    (call,) = lower_composite_ops_with_report(collective_program(spec).program).calls
    bad = text(lower(spec, RecipeVariant(epilogue_shortfall=1)))
    n = format_expr(call.lowered.credits)
    if n == "1":
        assert retires(lower(spec, RecipeVariant(epilogue_shortfall=1))) == []  # nothing left to retire
    elif n.isdigit():
        assert retires(lower(spec, RecipeVariant(epilogue_shortfall=1))) == [f"-{int(n) - 1}"]
    else:  # a runtime count: the retire expression subtracts one more
        assert " - 1" in bad.split("retire = ", 1)[1].splitlines()[0]


def test_fixed_threshold_alone_keeps_atomic_credits() -> None:
    """generation_threshold=False is one deviation; the catalogue combines it with Set and no epilogue."""
    bad = lower(CollectiveSpec("allreduce", size=64), RecipeVariant(generation_threshold=False))
    assert wait_generations(bad) == ["1", "1"] and {op for op, _ in credits(bad)} == {NotifyOp.AtomicAdd}
    assert retires(bad) == ["-2"]


def test_report_credits_follow_the_variant() -> None:
    for spec, variant, want in [
        (CollectiveSpec("reduce_scatter", size=64), RecipeVariant(reduce_scatter_post_reduce_barrier=False), "1"),
        (CollectiveSpec("allreduce", size=65537), RecipeVariant(mesh_post_reduce_barrier=False), "1"),
        (CollectiveSpec("allreduce", shape=(8, 16), valid_shape=(3, 10)),
         RecipeVariant(mesh_post_reduce_barrier=False), "1"),
        (CollectiveSpec("broadcast", size=64), RecipeVariant(broadcast_read_complete=True), "2"),
    ]:
        (call,) = lower_composite_ops_with_report(collective_program(spec).program, variant=variant).calls
        assert format_expr(call.lowered.credits) == want
        assert retires(lower(spec, variant)) == [f"-{want}"]


# ----------------------------------------------------------------------------------------------
# The variant value itself
# ----------------------------------------------------------------------------------------------


def test_variant_validation_and_description() -> None:
    assert CORRECT.is_default and CORRECT.deviations() == () and str(CORRECT) == "RecipeVariant()"
    v = RecipeVariant(wait_cmp=WaitCmp.Eq, epilogue_shortfall=1)
    assert not v.is_default and v.deviations() == ("wait_cmp=Eq", "epilogue_shortfall=1")
    for bad in ({"wait_cmp": 1}, {"credit_op": "Set"}, {"epilogue_shortfall": -1}, {"epilogue_shortfall": True},
                {"notify_before_wait": "no"}, {"ring_push_done": 0}):
        with pytest.raises(ValueError, match="RecipeVariant"):
            RecipeVariant(**bad)
    with pytest.raises(TypeError, match="RecipeVariant"):
        lower_composite_ops(collective_program(CollectiveSpec("barrier")).program, variant="wait-eq")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        CORRECT.epilogue = False  # type: ignore[misc]
