"""Mutation-style tests of NeuronEliminateCasts: each gate and bail decides a program of its own, and the
pass built without it (or with two gates swapped) gives a different verdict, so the test asserting the
verdict fails on that mutant. Also: the edit order, collect-then-rewrite, and no inner fixpoint."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from neuron_helpers import FULL, chain, corpus, kernel

from pldemu.neuron.eliminate_casts import (
    CAST_BAILS,
    GATE1,
    GATE2,
    GATE3,
    GATE4,
    GATES,
    GRAPH_INPUT_BAIL,
    PSUM_BAIL,
    NeuronEliminateCasts,
    Refusal,
)
from pldemu.neuron.ir import FunctionEditor, Inst, IRError, Kind
from pldemu.neuron.stats import Statistics
from pldemu.neuron.verifier import VerifyError, verify

# One program per gate, in which that gate alone refuses the producer %p.
GATE_ALONE = {
    Refusal.GATE1_CAN_MUTATE_DST_TY: f"ActivationOp(xs{FULL}:bf16) func=tanh dtype=bf16",
    Refusal.GATE2_WHITELIST: f"TensorTensorOp(xs{FULL}:bf16, xs{FULL}:bf16) func=add dtype=bf16 canMutateDstTy",
    Refusal.GATE3_SRC_IS_TARGET: f"ActivationOp(xfs{FULL}:fp32) func=tanh dtype=bf16 canMutateDstTy",
    Refusal.GATE4_INT_FLOAT_CLASS: f"ActivationOp(xis{FULL}:int32) func=copy dtype=bf16 canMutateDstTy",
}
# Programs in which two adjacent gates both refuse: the first in order must be the one reported.
GATE_PAIRS = {
    (0, 1): (f"TensorTensorOp(xs{FULL}:bf16, xs{FULL}:bf16) func=add dtype=bf16", "fp32"),
    (1, 2): (f"TensorTensorOp(xfs{FULL}:fp32, xfs{FULL}:fp32) func=add dtype=bf16 canMutateDstTy", "fp32"),
    (2, 3): (f"TensorScalarPtrOp(xfs{FULL}:fp32) func=multiply scalar=8.0 dtype=int8 canMutateDstTy", "fp32"),
}


def _only(result_verdicts: tuple) -> object:  # type: ignore[type-arg]
    (verdict,) = result_verdicts
    return verdict


@pytest.mark.parametrize("refusal", list(GATE_ALONE), ids=lambda r: r.name.lower())
def test_gate_refuses_its_program(refusal: Refusal) -> None:
    verdict = _only(NeuronEliminateCasts().transformStmts(chain(GATE_ALONE[refusal])).verdicts)
    assert not verdict.eliminated and verdict.refusal is refusal and verdict.refused_by == "p"  # type: ignore[attr-defined]


@pytest.mark.parametrize("refusal", list(GATE_ALONE), ids=lambda r: r.name.lower())
def test_mutant_without_gate_eliminates_its_program(refusal: Refusal) -> None:
    """Kills the mutant that drops this gate: the program above is then eliminated."""
    mutant = NeuronEliminateCasts(gates=tuple(g for g in GATES if g.refusal is not refusal))
    assert mutant.transformStmts(chain(GATE_ALONE[refusal])).eliminated == ("c",)


@pytest.mark.parametrize("pair", list(GATE_PAIRS), ids=lambda p: f"gates_{p[0] + 1}_{p[1] + 1}")
def test_gate_order_decides_reason(pair: tuple[int, int]) -> None:
    producer, target = GATE_PAIRS[pair]
    f = chain(producer, target)
    verdict = _only(NeuronEliminateCasts().transformStmts(f).verdicts)
    assert verdict.refusal is GATES[pair[0]].refusal  # type: ignore[attr-defined]
    swapped = list(GATES)
    swapped[pair[0]], swapped[pair[1]] = swapped[pair[1]], swapped[pair[0]]
    mutant = _only(NeuronEliminateCasts(gates=tuple(swapped)).transformStmts(f).verdicts)
    assert mutant.refusal is GATES[pair[1]].refusal, "the mutant swapping the two gates reports the other"  # type: ignore[attr-defined]


def test_gates_are_the_contract_in_order() -> None:
    assert GATES == (GATE1, GATE2, GATE3, GATE4)


def test_same_dtype_bail_and_mutant_without_it() -> None:
    f = corpus("same_dtype")
    assert _only(NeuronEliminateCasts().transformStmts(f).verdicts).refusal is Refusal.BAIL_SAME_DTYPE  # type: ignore[attr-defined]
    assert NeuronEliminateCasts(cast_bails=()).transformStmts(f).eliminated == ("c",)
    assert CAST_BAILS[0].refusal is Refusal.BAIL_SAME_DTYPE


def test_graph_input_bail_and_mutant_without_it() -> None:
    f = corpus("graph_input")
    assert _only(NeuronEliminateCasts().transformStmts(f).verdicts).refusal is Refusal.BAIL_GRAPH_INPUT  # type: ignore[attr-defined]
    # without the bail all() over the input's zero stores passes vacuously and the cast is erased with
    # its uses still in place
    with pytest.raises(IRError, match="still has uses"):
        NeuronEliminateCasts(tensor_bails=(PSUM_BAIL,)).transformStmts(f)


def test_psum_bail_and_mutant_without_it() -> None:
    # a PSUM tile written by an ActivationOp (engines may write PSUM), read back by a cast to fp16
    f = kernel(f"%w = ActivationOp(xs{FULL}:bf16) dst=acc{FULL}:fp32 func=tanh dtype=fp32 canMutateDstTy\n"
               f"%c = TensorCopyOp(acc{FULL}:fp32) dtype=fp16\n%u = ActivationOp(%c) func=exp dtype=fp16\n",
               tensors="psum acc[8, 4] fp32\n")
    assert _only(NeuronEliminateCasts().transformStmts(f).verdicts).refusal is Refusal.BAIL_PSUM  # type: ignore[attr-defined]
    mutant = NeuronEliminateCasts(tensor_bails=(GRAPH_INPUT_BAIL,)).transformStmts(f)
    assert mutant.eliminated == ("c",)
    with pytest.raises(VerifyError, match="PSUM tensor acc must be plain fp32"):
        verify(mutant.after)


def test_psum_corpus_matmul_eviction_is_kept_by_the_bail() -> None:
    assert _only(NeuronEliminateCasts().transformStmts(corpus("psum_source")).verdicts).refusal is Refusal.BAIL_PSUM  # type: ignore[attr-defined]


def test_all_stores_checked_before_any_rewrite_kills_rewrite_as_you_go() -> None:
    """%left passes every gate, %right fails gate 2: nothing is touched, not even %left."""
    f = corpus("ap_one_store_fails")
    result = NeuronEliminateCasts().transformStmts(f)
    verdict = _only(result.verdicts)
    assert (verdict.refusal, verdict.refused_by) == (Refusal.GATE2_WHITELIST, "right")  # type: ignore[attr-defined]
    assert result.journal == () and result.after == f
    assert NeuronEliminateCasts().shouldMutateInstDstType(f, f.inst("left"), f.inst("c").dtype)


def test_branch_b_rewrites_every_store_then_erases_once() -> None:
    result = NeuronEliminateCasts().transformStmts(corpus("ap_multi_store"))
    assert result.journal == (("mutateDstTy", "left"), ("count_cast", "c"), ("replaceAllUsesWith", "c"),
                              ("mutateDstTy", "right"), ("count_cast", "c"), ("replaceAllUsesWith", "c"),
                              ("eraseFromParent", "c"))


def test_edit_order_mutate_count_replace_then_caller_erases() -> None:
    result = NeuronEliminateCasts().transformStmts(corpus("bf16_source"))
    assert result.journal == (("mutateDstTy", "p"), ("count_cast", "c"), ("replaceAllUsesWith", "c"),
                              ("eraseFromParent", "c"))


def test_replace_before_mutate_is_refused() -> None:
    """The order is load-bearing: redirecting uses before re-typing the producer would change their type."""
    f = corpus("bf16_source")
    ed = FunctionEditor(f)
    with pytest.raises(IRError, match="the new value is bf16, the uses expect fp32"):
        ed.replaceAllUsesWith(f.inst("c"), f.inst("c").src)


def test_count_cast_reads_the_cast_before_it_is_erased() -> None:
    f = corpus("bf16_source")
    p = NeuronEliminateCasts()
    ed = FunctionEditor(f)
    p.eliminateCast(ed, f.inst("c"), f.inst("p"), f.inst("c").dtype)
    ed.eraseFromParent(f.inst("c"))
    with pytest.raises(IRError, match="no instruction %c"):
        p.count_cast(ed, f.inst("c"))


@dataclass(frozen=True)
class _NotAnInstruction:
    """Has a dtype (through ``name``) for the same-dtype bail, but is neither ValueRef nor AP."""

    name: str


def test_branch_a_asserts_a_producer_instruction() -> None:
    f = corpus("bf16_source")
    cast = replace(f.inst("c"), srcs=(_NotAnInstruction("p"),))  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="neither an AP nor an instruction"):
        NeuronEliminateCasts().tryEliminateCast(FunctionEditor(f), cast)


def _live_walk(pass_: NeuronEliminateCasts, ed: FunctionEditor) -> list[str]:
    """The walk transformStmts must not be: iterate the live list while the pass erases from it."""
    tried, i = [], 0
    while i < len(ed.insts):
        inst: Inst = ed.insts[i]
        if inst.kind is Kind.TensorCopyOp and not inst.dst:
            tried.append(inst.name)
            pass_.tryEliminateCast(ed, inst)
        i += 1
    return tried


def test_collect_then_rewrite_reaches_both_adjacent_casts() -> None:
    f = corpus("adjacent_casts")
    assert NeuronEliminateCasts().transformStmts(f).eliminated == ("c1", "c2")
    ed = FunctionEditor(f)
    assert _live_walk(NeuronEliminateCasts(), ed) == ["c1"], "the live walk skips %c2: the program discriminates"
    assert [i.name for i in ed.insts if i.kind is Kind.TensorCopyOp] == ["c2"]


def test_no_inner_fixpoint_second_run_finds_the_new_candidate() -> None:
    p = NeuronEliminateCasts()
    first = p.transformStmts(corpus("cast_chain"))
    assert first.eliminated == ("c2",)
    assert first.verdicts[0].refusal is Refusal.GATE3_SRC_IS_TARGET
    assert p.shouldMutateInstDstType(first.after, first.after.inst("p"), first.after.inst("c1").dtype)
    second = p.transformStmts(first.after)
    assert second.eliminated == ("c1",)


def test_counter_accumulates_across_runs_sharing_a_registry() -> None:
    """The spec's counter is class-level: every pass using one registry adds to the same total."""
    stats = Statistics()
    NeuronEliminateCasts(stats=stats).transformStmts(corpus("bf16_source"))
    NeuronEliminateCasts(stats=stats).transformStmts(corpus("loop"))
    assert stats.rows()[0][:2] == ("Number of bytes of casts eliminated", 256 + 2048)
    assert stats.rows()[0][2].value == "bytes"
    assert NeuronEliminateCasts().stats.value("Number of bytes of casts eliminated") == 0


def test_a_cast_with_a_dst_is_not_a_candidate() -> None:
    """transformStmts keeps only TensorCopyOps whose dst is falsy: a cast that stores into a tensor is
    never tried (it would otherwise pass every gate here)."""
    f = kernel(f"%p = ActivationOp(xs{FULL}:bf16) func=tanh dtype=bf16 canMutateDstTy\n"
               f"%c = TensorCopyOp(%p) dst=t{FULL}:fp32 dtype=fp32\n", tensors="sbuf t[8, 4] fp32\n")
    result = NeuronEliminateCasts().transformStmts(f)
    assert result.verdicts == () and result.after == f
    assert NeuronEliminateCasts().shouldMutateInstDstType(f, f.inst("p"), f.inst("c").dtype)
