"""The corpus against hand-computed values: which casts go, why the others stay, the byte statistic,
and execution before/after against float64 (never less precise) and fp32 (bit-equal where the spec
says no precision is lost: every on-chip narrowing round trip removed)."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_helpers import CORPUS_FILES, corpus

from pldemu.neuron.eliminate_casts import DOCSTRING_GATES, GATES, NeuronEliminateCasts, Refusal
from pldemu.neuron.evaluate import compare
from pldemu.neuron.interpreter import Numerics, make_inputs, run
from pldemu.neuron.verifier import verify

R = Refusal
ROW = 128 * 64 * 4 // 128
"""Bytes per partition of a [128, 64] fp32 cast: 256."""

# name -> (removed casts, bytes, {kept cast: (refusal, refused_by)}, after == fp32 reference)
CONTRACT = {
    "adjacent_casts": (("c1", "c2"), 2 * ROW, {}, True),
    "ap_multi_store": (("c",), 2 * ROW, {}, True),  # count_cast once per store
    "ap_one_store_fails": ((), 0, {"c": (R.GATE2_WHITELIST, "right")}, False),
    "bf16_source": (("c",), ROW, {}, True),
    "canonical": ((), 0, {"c": (R.GATE3_SRC_IS_TARGET, "p")}, False),
    "cast_chain": (("c2",), ROW, {"c1": (R.GATE3_SRC_IS_TARGET, "p")}, False),
    "graph_input": ((), 0, {"c": (R.BAIL_GRAPH_INPUT, None)}, True),
    "int_float": ((), 0, {"ca": (R.GATE4_INT_FLOAT_CLASS, "pa"), "cb": (R.GATE3_SRC_IS_TARGET, "pb")}, True),
    "loop": (("c",), 8 * ROW, {}, True),
    "psum_source": ((), 0, {"c": (R.BAIL_PSUM, None)}, True),
    "same_dtype": ((), 0, {"c": (R.BAIL_SAME_DTYPE, None)}, False),
    "several_uses": (("c",), ROW, {}, True),
}
DOC = R.GATE3_SRC_IS_NOT_TARGET
DOCSTRING = {
    "adjacent_casts": ((), 0, {"c1": (DOC, "p1"), "c2": (DOC, "p2")}, False),
    "ap_multi_store": ((), 0, {"c": (DOC, "left")}, False),
    "ap_one_store_fails": ((), 0, {"c": (DOC, "left")}, False),
    "bf16_source": ((), 0, {"c": (DOC, "p")}, False),
    "canonical": (("c",), ROW, {}, True),
    # %c1 (fp16 -> bf16) goes: %p (src bf16) is re-typed fp16 -> bf16; bytes 128*64*2 // 128 = 128
    "cast_chain": (("c1",), 128, {"c2": (DOC, "p")}, False),
    "graph_input": ((), 0, {"c": (R.BAIL_GRAPH_INPUT, None)}, True),
    "int_float": ((), 0, {"ca": (DOC, "pa"), "cb": (R.GATE4_INT_FLOAT_CLASS, "pb")}, True),
    "loop": ((), 0, {"c": (DOC, "p")}, False),
    "psum_source": ((), 0, {"c": (R.BAIL_PSUM, None)}, True),
    "same_dtype": ((), 0, {"c": (R.BAIL_SAME_DTYPE, None)}, False),
    "several_uses": ((), 0, {"c": (DOC, "p")}, False),
}
READINGS = {"contract": (GATES, CONTRACT), "docstring": (DOCSTRING_GATES, DOCSTRING)}
CASES = [(reading, name) for reading in READINGS for name in sorted(CONTRACT)]


def test_every_corpus_file_has_hand_values() -> None:
    assert sorted(p.stem for p in CORPUS_FILES) == sorted(CONTRACT) == sorted(DOCSTRING)


@pytest.mark.parametrize("reading, name", CASES)
def test_removed_casts_reasons_and_bytes(reading: str, name: str) -> None:
    gates, table = READINGS[reading]
    removed, nbytes, kept, _ = table[name]
    p = NeuronEliminateCasts(gates=gates)
    result = p.transformStmts(corpus(name))
    verify(result.after)
    assert result.eliminated == removed
    assert {v.cast: (v.refusal, v.refused_by) for v in result.verdicts if not v.eliminated} == kept
    assert p.stats.value("Number of bytes of casts eliminated") == nbytes == result.bytes_eliminated
    remaining = {i.name for i in result.after.insts}
    assert not set(removed) & remaining and set(kept) <= remaining


@pytest.mark.parametrize("reading, name", CASES)
def test_after_is_never_less_precise_and_fp32_exact_where_promised(reading: str, name: str) -> None:
    gates, table = READINGS[reading]
    removed, _, _, fp32_exact = table[name]
    f = corpus(name)
    rows = compare(f, NeuronEliminateCasts(gates=gates).transformStmts(f).after)
    for row in rows:
        assert row.never_less_precise, row
        assert row.after_equals_fp32 is fp32_exact, row
        if removed:
            assert row.after.max_abs < row.before.max_abs, "removing a bf16 hop must show in the error"
            assert not row.before_equals_fp32


def test_canonical_after_docstring_reading_equals_numpy_fp32_bit_for_bit() -> None:
    f = corpus("canonical")
    after = NeuronEliminateCasts(gates=DOCSTRING_GATES).transformStmts(f).after
    inputs = make_inputs(f)
    x = inputs["x"].astype(np.float32)
    expected = np.exp(np.tanh(x)).astype(np.float64)
    assert np.array_equal(run(after, inputs, Numerics.HARDWARE)["out"], expected)
    assert not np.array_equal(run(f, inputs, Numerics.HARDWARE)["out"], expected)
