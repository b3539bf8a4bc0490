"""Limits the IR enforces with a clear error instead of a crash or a silent wrap (issue 9)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pldemu.ir import DType, ParseError, Program, VerifyError, parse_program, verify
from pldemu.ir.nodes import Assign, BinOp, BinOpKind, Const, Function, Seq, Var
from pldemu.ir.walk import MAX_NESTING, expr_depth


def program(body: str) -> str:
    return "program p {\n  window x: fp32[1, 8]\n  func main() {\n" + body + "\n  }\n}\n"


def sum_of(n: int) -> str:
    return "    k = " + " + ".join(["1:int32"] * n)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    k = " + "(" * 150 + "1" + ")" * 150, f"nested more than {MAX_NESTING} levels deep"),
        (sum_of(3000), "expression nested 3000 levels deep"),
        (sum_of(500), "expression nested 500 levels deep"),
        ("    k = 99999999999:int32", "the literal 99999999999 does not fit int32 (-2147483648 .. 2147483647)"),
        ("    k = -2147483649:int32", "does not fit int32"),
        ("    k = 300:uint8", "the literal 300 does not fit uint8 (0 .. 255)"),
    ],
    ids=["parens-150", "sum-3000", "sum-500", "int32-overflow", "int32-underflow", "uint8-overflow"],
)
def test_refused_with_a_position(body: str, message: str):
    with pytest.raises(ParseError) as err:
        parse_program(program(body))
    assert message in str(err.value) and err.value.line == 4


def test_deep_but_allowed():
    p = parse_program(program(sum_of(MAX_NESTING - 1)))
    verify(p)
    parse_program(program("    k = 2147483647:int32 + -2147483648:int32"))


def test_blocks_nested_too_deep():
    depth = MAX_NESTING + 1
    body = "".join("    " + "  " * i + "if true {\n" for i in range(depth)) + "    k = 1\n" + "    }\n" * depth
    with pytest.raises(ParseError, match="nested more than"):
        parse_program(program(body))


def test_verifier_bounds_builder_programs_without_recursing():
    e = Const(1, DType.INT32)
    for _ in range(500):  # what a Python builder loop produces; later recursive walks would crash on it
        e = BinOp(BinOpKind.ADD, e, Const(1, DType.INT32))
    assert expr_depth(e) == 501
    p = Program("deep", (), (Function("main", (), Seq((Assign(Var("k", Const(1, DType.INT32).type), e),))),))
    with pytest.raises(VerifyError, match=r"function main: nested 502 levels deep"):
        verify(p)


def test_verifier_refuses_an_out_of_range_constant():
    c = Const(2**40, DType.INT32)
    p = Program("big", (), (Function("main", (), Seq((Assign(Var("k", c.type), c),))),))
    with pytest.raises(VerifyError, match="constant 1099511627776 does not fit int32"):
        verify(p)


def test_unclosed_function_brace_is_blamed_on_the_function():
    with pytest.raises(ParseError) as err:
        parse_program("program t {\n  window x: fp32[1, 8]\n  func main() {\n    k = 1\n}\n")
    assert "missing '}' to close the function 'main' opened at line 3" in str(err.value)
    assert err.value.line == 3


@pytest.mark.launcher
def test_cli_refuses_deep_programs_in_one_line(tmp_path: Path):
    path = tmp_path / "deep.pld"
    path.write_text(program(sum_of(3000)))
    out = subprocess.run([sys.executable, "-m", "pldemu", "run", str(path), "-n", "2"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    assert "expression nested 3000 levels deep" in out.stderr
