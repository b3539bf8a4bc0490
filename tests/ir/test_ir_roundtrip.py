"""print -> parse -> print identity and structural equality over builder-made programs and the examples."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from ir_corpus import CORPUS, all_programs, iter_stmts, ops_used
from ir_helpers import first_difference, flatten_seqs, roundtrip

import pldemu
from pldemu.ir import (
    NR,
    AllreduceMode,
    Assign,
    BinOp,
    BinOpKind,
    Call,
    Const,
    DType,
    Eval,
    For,
    Function,
    Op,
    Program,
    ProgramBuilder,
    Seq,
    Var,
    format_program,
    parse_file,
    parse_program,
    verify,
    walk_expr,
)
from pldemu.ir.walk import stmt_exprs

EXAMPLES = Path(pldemu.__file__).parent / "examples"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_program_verifies_and_roundtrips(name: str) -> None:
    program = verify(CORPUS[name]())
    parsed = roundtrip(program)
    assert parsed == program  # strict dataclass equality too (the corpus has no nested Seq)
    verify(parsed)


def test_corpus_uses_every_op() -> None:
    used: set[Op] = set()
    for p in all_programs():
        used |= ops_used(p)
    assert used == set(Op), sorted(o.text for o in set(Op) - used)


def test_corpus_uses_every_binop_kind() -> None:
    used = {e.op for p in all_programs() for f in p.functions for st in iter_stmts(f.body)
            for top in stmt_exprs(st) for e in walk_expr(top) if isinstance(e, BinOp)}
    assert used == set(BinOpKind), sorted(k.value for k in set(BinOpKind) - used)


def test_parsed_types_attrs_and_const_dtypes_match() -> None:
    program = CORPUS["primitives"]()
    parsed = roundtrip(program)
    for a, b in zip(program.function().body.stmts, parsed.function().body.stmts, strict=True):
        assert type(a) is type(b)
        if isinstance(a, Assign) and isinstance(b, Assign):
            assert a.var.type == b.var.type
        if isinstance(a, Eval) and isinstance(b, Eval):
            assert a.call.attrs == b.call.attrs
            assert a.call.type == b.call.type


def test_roundtrip_flattens_nested_seq() -> None:
    pb = ProgramBuilder("nested")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    fb.pld.tensor.barrier(sig)
    flat = pb.build()
    program = Program("nested", flat.buffers, (Function("main", (), Seq((flat.function().body,))),))
    parsed = roundtrip(program)
    assert parsed == flat
    assert parsed == flatten_seqs(program)
    assert parsed != program


def test_nan_constants_compare_equal_in_roundtrip() -> None:
    pb = ProgramBuilder("nan")
    fb = pb.function()
    fb.let("x", Const(float("nan"), DType.FP32))  # not the math.nan object
    roundtrip(pb.build())


def test_first_difference_reports_a_path() -> None:
    a, b = CORPUS["control_flow"](), CORPUS["control_flow"]()
    assert first_difference(a, b) is None
    tweaked = parse_program(format_program(a).replace("z = ((x - y) - 1) % 5", "z = ((x - y) - 1) % 6"))
    where = first_difference(a, tweaked)
    assert where is not None and "functions[0].body" in where and "6" in where


def test_binop_of_constants_is_not_folded() -> None:
    pb = ProgramBuilder("unfolded")
    fb = pb.function()
    fb.let("x", BinOp(BinOpKind.ADD, Const(1), BinOp(BinOpKind.MUL, Const(2), Const(3))))
    program = pb.build()
    assert roundtrip(program) == program
    assert "x = 1 + (2 * 3)" in format_program(program)


def test_entry_and_nranks_survive() -> None:
    program = CORPUS["control_flow"]()
    text = format_program(program)
    assert text.startswith("program control entry=kernel {")
    assert roundtrip(program).entry == "kernel"
    assert roundtrip(CORPUS["collectives"]()).nranks == 4


def test_special_literals_keep_value_and_dtype() -> None:
    parsed = roundtrip(CORPUS["control_flow"]())
    values = {s.var.name: s.value for s in parsed.function("kernel").body.stmts if isinstance(s, Assign)}
    nan = values["bad"]
    assert isinstance(nan, Const) and math.isnan(nan.value) and nan.dtype is DType.FP32
    assert values["t"] == Const(True, DType.INDEX)  # a bool value with a non-bool dtype prints true:index
    assert values["big"] == Const(12345678901234, DType.INT64)
    assert values["tiny"] == Const(-1e-30, DType.FP32)


@pytest.mark.parametrize("name", ["allreduce_loop", "custom_barrier"])
def test_examples_parse_verify_roundtrip(name: str) -> None:
    program = verify(parse_file(EXAMPLES / f"{name}.pld"))
    assert program.name == name
    roundtrip(program)


def test_allreduce_example_uses_one_signal_per_mode() -> None:
    program = parse_file(EXAMPLES / "allreduce_loop.pld")
    signals_by_mode: dict[object, set[str]] = {}
    stmts = list(iter_stmts(program.function().body))
    for s in stmts:
        if isinstance(s, Assign) and isinstance(s.value, Call) and s.value.op is Op.ALLREDUCE:
            signal = s.value.args[1]
            assert isinstance(signal, Var)
            signals_by_mode.setdefault(s.value.attr("mode"), set()).add(signal.name)
    assert signals_by_mode == {AllreduceMode.mesh: {"mesh_sig"}, AllreduceMode.ring: {"ring_sig"}}
    assert any(isinstance(s, For) for s in stmts)
