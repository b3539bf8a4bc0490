"""C's truncating division and remainder in the IR (``tdiv`` / ``trem``): the evaluator and constant
folding truncate, the floor operators stay floor, and the ``.pld`` spelling round-trips."""

from __future__ import annotations

import math

import pytest
from ir_helpers import roundtrip

from pldemu.ir import (
    BinOp,
    BinOpKind,
    Const,
    DType,
    ParseError,
    ProgramBuilder,
    evaluate,
    format_program,
    parse_program,
)
from pldemu.ir.nodes import binop, fold_binop, trunc_div, trunc_rem

OPERANDS = [(a, b) for a in range(-9, 10) for b in (-4, -3, -1, 1, 2, 3, 5)]


def _c_div(a: int, b: int) -> int:
    """C99's ``a / b`` for ints: the quotient rounded toward zero (exact for these small operands)."""
    return int(a / b)


@pytest.mark.parametrize(("a", "b"), OPERANDS)
def test_tdiv_and_trem_are_c_division(a: int, b: int) -> None:
    assert fold_binop(BinOpKind.TDIV, a, b) == _c_div(a, b)
    assert fold_binop(BinOpKind.TREM, a, b) == int(math.fmod(a, b))
    assert _c_div(a, b) * b + fold_binop(BinOpKind.TREM, a, b) == a
    assert fold_binop(BinOpKind.FLOORDIV, a, b) == a // b and fold_binop(BinOpKind.MOD, a, b) == a % b


def test_the_two_families_differ_only_for_operands_of_different_signs() -> None:
    assert (trunc_div(-1, 4), trunc_rem(-1, 4), -1 // 4, -1 % 4) == (0, -1, -1, 3)
    assert (trunc_div(7, -2), trunc_rem(7, -2), 7 // -2, 7 % -2) == (-3, 1, -4, -1)
    assert (trunc_div(-7, -2), trunc_rem(-7, -2)) == (-7 // -2, -7 % -2)
    assert (trunc_div(-8, 4), trunc_rem(-8, 4)) == (-2, 0)  # exact: the same either way
    big = -(2**70) - 1
    assert (trunc_div(big, 3), trunc_rem(big, 3)) == (-((2**70 + 1) // 3), -((2**70 + 1) % 3))
    assert trunc_rem(-7.5, 2.0) == math.fmod(-7.5, 2.0)
    with pytest.raises(ZeroDivisionError):
        trunc_rem(-1, 0)


def test_constant_folding_truncates() -> None:
    assert binop(BinOpKind.TREM, -1, 4) == Const(-1)
    assert binop(BinOpKind.TDIV, Const(-7, DType.INT32), 2) == Const(-3, DType.INDEX)
    assert evaluate(BinOp(BinOpKind.TREM, BinOp(BinOpKind.SUB, Const(0), Const(5)), Const(3))) == -2
    assert binop(BinOpKind.MOD, -1, 4) == Const(3)  # the floor operators are unchanged
    x = ProgramBuilder("p").local("x", "int32", [1])
    assert binop(BinOpKind.TDIV, x, 1) is x  # x / 1 is x, as for //
    assert isinstance(binop(BinOpKind.TREM, 1, 0), BinOp)  # a fault is left to run time


def _program() -> str:
    pb = ProgramBuilder("trunc")
    out = pb.local("out", "int32", [4])
    fb = pb.function()
    ctx = fb.pld.system.get_comm_ctx(pb.signal("sig", [1, 1]))
    me = fb.pld.system.rank(ctx)
    trem = fb.let("trem", me - 1)  # a variable may share the operator's name
    q = fb.let("q", BinOp(BinOpKind.TDIV, BinOp(BinOpKind.TREM, trem, Const(-3)), me + 2))
    fb.pld.tensor.write(out, [0], BinOp(BinOpKind.ADD, q, BinOp(BinOpKind.TREM, Const(-7), Const(3))))
    return format_program(pb.build())


def test_pld_spelling_is_a_function_and_round_trips() -> None:
    text = _program()
    assert "q = tdiv(trem(trem, -3), me + 2)" in text and "q + trem(-7, 3)" in text
    program = parse_program(text)
    assert roundtrip(program) == program and format_program(program) == text
    stmts = program.function().body.stmts
    assert stmts[3].value == BinOp(BinOpKind.TDIV, BinOp(BinOpKind.TREM, stmts[2].var, Const(-3)),
                                   BinOp(BinOpKind.ADD, stmts[1].var, Const(2)))


def test_pld_refuses_a_wrong_operand_count() -> None:
    text = _program().replace("trem(trem, -3)", "trem(trem)")
    with pytest.raises(ParseError, match=r"trem takes exactly two arguments, got 1"):
        parse_program(text)
