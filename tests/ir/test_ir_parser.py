"""The .pld parser on hand-written text: accepted syntax, and error messages with their positions."""

from __future__ import annotations

import contextlib
import math
import random
import re
from pathlib import Path

import pytest
from ir_corpus import all_programs
from ir_helpers import roundtrip

from pldemu.ir import (
    NR,
    Assign,
    AtomicType,
    BinOp,
    BinOpKind,
    Call,
    Const,
    DType,
    Eval,
    For,
    If,
    Op,
    ParseError,
    ReduceOp,
    Seq,
    TensorType,
    TileType,
    Var,
    While,
    format_program,
    parse_file,
    parse_program,
    verify,
)
from pldemu.ir.nodes import INDEX

PRELUDE = """program t {
  window data: fp32[4, 64]
  window half: fp16[1, 32]
  signal sig: int32[NR, 1]
  local loc: int32[2, 2]

  func main() {
"""
FIRST_LINE = PRELUDE.count("\n") + 1  # line number of the first body line; body lines start at column 5


def body(*lines: str) -> str:
    return PRELUDE + "".join(f"    {line}\n" for line in lines) + "  }\n}\n"


def stmts(*lines: str) -> tuple[object, ...]:
    return parse_program(body(*lines)).function().body.stmts


def value_of(line: str, *setup: str) -> object:
    last = stmts(*setup, line)[-1]
    assert isinstance(last, Assign)
    return last.value


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_program(text, "t.pld")
    return info.value


def body_error(*lines: str) -> ParseError:
    return parse_error(body(*lines))


# ----------------------------------------------------------------------------------------------
# Accepted syntax
# ----------------------------------------------------------------------------------------------

I = Var("i", INDEX)  # noqa: E741


def binop(kind: BinOpKind, lhs: object, rhs: object) -> BinOp:
    return BinOp(kind, lhs, rhs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i + 2 * 3", binop(BinOpKind.ADD, I, binop(BinOpKind.MUL, Const(2), Const(3)))),
        ("(i + 2) * 3", binop(BinOpKind.MUL, binop(BinOpKind.ADD, I, Const(2)), Const(3))),
        ("i - 1 - 2", binop(BinOpKind.SUB, binop(BinOpKind.SUB, I, Const(1)), Const(2))),
        ("i // 2 % 3", binop(BinOpKind.MOD, binop(BinOpKind.FLOORDIV, I, Const(2)), Const(3))),
        ("i - -3", binop(BinOpKind.SUB, I, Const(-3))),
        ("i * -3:int32", binop(BinOpKind.MUL, I, Const(-3, DType.INT32))),
        ("i < 1 or i > 2 and i != 3", binop(
            BinOpKind.OR, binop(BinOpKind.LT, I, Const(1)),
            binop(BinOpKind.AND, binop(BinOpKind.GT, I, Const(2)), binop(BinOpKind.NE, I, Const(3))))),
        ("i + 1 <= i * 2", binop(BinOpKind.LE, binop(BinOpKind.ADD, I, Const(1)),
                                 binop(BinOpKind.MUL, I, Const(2)))),
        ("min(i, max(i, 4)) >= 0", binop(BinOpKind.GE, binop(BinOpKind.MIN, I, binop(BinOpKind.MAX, I, Const(4))),
                                         Const(0))),
        ("i == NR", binop(BinOpKind.EQ, I, NR)),
        ("1 + 2", binop(BinOpKind.ADD, Const(1), Const(2))),  # no constant folding
    ],
)
def test_operator_precedence(text: str, expected: BinOp) -> None:
    assert value_of(f"x = {text}", "i = 0") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", Const(5)),
        ("-5", Const(-5)),
        ("5:int32", Const(5, DType.INT32)),
        ("-5:int8", Const(-5, DType.INT8)),
        ("2.5", Const(2.5, DType.FP32)),
        ("1e-3", Const(1e-3, DType.FP32)),
        ("1E+20", Const(1e20, DType.FP32)),
        (".5", Const(0.5, DType.FP32)),
        ("1.0:fp16", Const(1.0, DType.FP16)),
        ("-2.5:bf16", Const(-2.5, DType.BF16)),
        ("inf", Const(math.inf, DType.FP32)),
        ("-inf", Const(-math.inf, DType.FP32)),
        ("inf:fp16", Const(math.inf, DType.FP16)),
        ("true", Const(True, DType.BOOL)),
        ("false", Const(False, DType.BOOL)),
        ("1:fp32", Const(1, DType.FP32)),
        ("(-7)", Const(-7)),
    ],
)
def test_literals(text: str, expected: Const) -> None:
    got = value_of(f"x = {text}")
    assert got == expected
    assert isinstance(got, Const) and type(got.value) is type(expected.value)


def test_nan_literal() -> None:
    got = value_of("x = nan")
    assert isinstance(got, Const) and math.isnan(got.value) and got.dtype is DType.FP32


def test_comments_blank_lines_trailing_commas_and_multiline_calls() -> None:
    text = """
# a comment before the header

program t nranks=2 {   # trailing comment
  window data: fp32[4, 64,]   # trailing comma in a shape

  signal sig: int32[NR, 1]
  # comment between declarations
  func main() {

    out = pld.tensor.allreduce(
        data,        # the target
        sig,
        mode=ring,   # attributes in any order
        op=Max,
    )
    # comment between statements

    tile.store(tile.load(data, [0, 0,], [4, 64]), [0, 0], data,)
  }
}
# trailing comment
"""
    program = parse_program(text)
    assert program.nranks == 2
    first, second = program.function().body.stmts
    assert isinstance(first, Assign) and isinstance(first.value, Call)
    assert first.value.attrs == (("op", ReduceOp.Max), ("mode", first.value.attr("mode")), ("lanes", 1))
    assert isinstance(second, Eval) and second.call.op is Op.TILE_STORE
    verify(program)
    roundtrip(program)


def test_one_line_blocks_and_else_on_next_line() -> None:
    program = parse_program(body("i = 0", "if i < 1 { i = 1 }", "else { i = 2 }", "while i < 3 { i = i + 1 }"))
    _, if_stmt, while_stmt = program.function().body.stmts
    assert isinstance(if_stmt, If) and if_stmt.orelse is not None
    assert isinstance(while_stmt, While)
    verify(program)


def test_range_defaults() -> None:
    (loop,) = stmts("for i in range(NR) {", "}")
    assert isinstance(loop, For) and (loop.start, loop.stop, loop.step) == (Const(0), NR, Const(1))
    (loop,) = stmts("for i in range(2, NR) {", "}")
    assert isinstance(loop, For) and (loop.start, loop.stop, loop.step) == (Const(2), NR, Const(1))
    (loop,) = stmts("for i in range(NR - 1, -1, -1) {", "}")
    assert isinstance(loop, For) and loop.step == Const(-1)


def test_else_if_chain() -> None:
    _, chain = stmts("i = 1", "if i == 0 {", "} else if i == 1 {", "  i = 5", "} else {", "  i = 6", "}")
    assert isinstance(chain, If) and chain.orelse is not None
    (nested,) = chain.orelse.stmts
    assert isinstance(nested, If) and nested.orelse == Seq((Assign(Var("i", INDEX), Const(6)),))


def test_a_variable_may_be_named_like_an_op_namespace() -> None:
    program = parse_program(body("tile = tile.load(data, [0, 0], [4, 64])", "tile.store(tile, [0, 0], data)"))
    load, store = program.function().body.stmts
    assert isinstance(load, Assign) and load.var.name == "tile" and isinstance(load.var.type, TileType)
    assert isinstance(store, Eval) and store.call.args[0] == load.var
    verify(program)


def test_attributes_are_canonical_enum_case_is_forgiven() -> None:
    (put,) = stmts("pld.tile.put(data, 1, data, tile.create([1, 64], dtype=FP32))")
    assert isinstance(put, Eval)
    assert put.call.attrs == (("atomic", AtomicType.None_),)  # default filled in
    (ar,) = stmts('x = pld.tensor.allreduce(data, sig, op=sum, mode="ring")')
    assert isinstance(ar, Assign) and isinstance(ar.value, Call)
    assert ar.value.attr("op") is ReduceOp.Sum


def test_rebinding_takes_the_new_type() -> None:
    program = parse_program(body(
        "t = tile.load(data, [0, 0], [4, 64])",
        "t = tile.set_validshape(t, [2, 10])",
        "tile.store(t, [0, 0], data)",
    ))
    _, second, store = program.function().body.stmts
    assert isinstance(second, Assign) and isinstance(second.var.type, TileType)
    assert second.var.type.valid_shape == (Const(2), Const(10))
    assert isinstance(store, Eval) and store.call.args[0] == second.var
    verify(program)


def test_names_bound_in_both_branches_are_visible_after_the_if() -> None:
    program = parse_program(body("if NR > 2 {", "  x = 1", "} else {", "  x = 2", "}", "y = x + 1"))
    verify(program)


def test_parameters_are_in_scope_and_typed() -> None:
    text = PRELUDE.replace("func main() {", "func main(n: index, w: window fp32[n, 4], c: ctx) {") + \
        "    me = pld.system.rank(c)\n    x = tensor.read(w, [n - 1, 0])\n  }\n}\n"
    program = parse_program(text)
    n, w, _ = program.function().params
    assert n == Var("n", INDEX)
    assert w.type == TensorType(DType.FP32, (n, Const(4)), None, True)
    verify(program)
    roundtrip(program)


def test_parse_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.pld"
    path.write_text(body("x = y"))
    with pytest.raises(ParseError) as info:
        parse_file(path)
    assert str(info.value).startswith(f"{path}:{FIRST_LINE}:9: undefined variable 'y'")
    good = tmp_path / "good.pld"
    good.write_text(format_program(parse_program(body("x = 1"))))
    assert parse_file(good).name == "t"


# ----------------------------------------------------------------------------------------------
# Errors: message and position
# ----------------------------------------------------------------------------------------------


def test_error_format_shows_line_and_caret() -> None:
    err = body_error("out = pld.tensor.allreduse(data, sig)")
    assert (err.filename, err.line, err.col) == ("t.pld", FIRST_LINE, 11)
    lines = str(err).splitlines()
    assert lines[0] == (f"t.pld:{FIRST_LINE}:11: unknown op 'pld.tensor.allreduse'; "
                        "did you mean 'pld.tensor.allreduce'?")
    assert lines[1] == "        out = pld.tensor.allreduse(data, sig)"
    assert lines[2] == "              ^" + "~" * (len("pld.tensor.allreduse") - 1)


@pytest.mark.parametrize(
    ("line", "col", "message"),
    [
        # unknown ops, with the closest known op
        ("pld.tensor.allreduse(data, sig)", 5, "unknown op 'pld.tensor.allreduse'; did you mean 'pld.tensor.allreduce'?"),
        ("tensor.allreduce(data, sig)", 5, "unknown op 'tensor.allreduce'; did you mean 'pld.tensor.allreduce'?"),
        ("x = tile.lod(data, [0, 0], [4, 64])", 9, "unknown op 'tile.lod'; did you mean 'tile.load'?"),
        ("barrier(sig)", 5, "unknown function 'barrier'; did you mean 'pld.tensor.barrier'?"),
        ("x = tile.load", 9, "op 'tile.load' must be called"),
        # attributes
        ("x = pld.tensor.allreduce(data, sig, opp=Sum)", 41,
         "pld.tensor.allreduce has no attribute 'opp' (its attributes: op, mode, lanes); did you mean 'op'?"),
        ("x = pld.tensor.allreduce(data, sig, op=Summ)", 44,
         "attribute 'op' of pld.tensor.allreduce must be one of Sum, Max, Min, Prod, got 'Summ'; "
         "did you mean 'Sum'?"),
        ("x = pld.tensor.allreduce(data, sig, op=Sum, op=Max)", 49, "attribute 'op' given twice"),
        ("x = pld.tensor.broadcast(data, sig, root=r)", 46,
         "attribute 'root' of pld.tensor.broadcast (attributes are compile-time constants) must be an "
         "integer literal, got 'r'"),
        ("x = pld.tensor.broadcast(data, sig)", 9, "pld.tensor.broadcast needs the attribute root=..."),
        ("x = tile.create([1, 8], dtype=fp33)", 35, "unknown dtype 'fp33'"),
        ("x = pld.tensor.allreduce(data, op=Sum, sig)", 44, "positional argument after an attribute"),
        # variables and scopes
        ("x = dta", 9, "undefined variable 'dta'; did you mean 'data'?"),
        ("NR = 4", 5, "'NR' is the rank-count symbol and cannot be used as a variable name"),
        ("if = 4", 5, "'if' is a reserved word"),
        ("a.b = 4", 5, "a variable name cannot contain dots: 'a.b'"),
        # IR type errors from make_call, at the offending argument
        ("pld.system.notify(loc, 0, [0, 0], 1)", 23,
         "pld.system.notify: argument 'signal' must be a window tensor, got tensor int32[2-d]"),
        ("pld.system.wait(data, [0, 0], 1)", 21, "pld.system.wait: argument 'signal' must be an INT32 window"),
        ("pld.system.wait(sig, [0], 1)", 26, "pld.system.wait: argument 'offsets' must be a list of 2 entries"),
        ("pld.system.wait(sig, 0, 1)", 26, "pld.system.wait: argument 'offsets' must be a [list] of scalars"),
        ("x = pld.tensor.barrier(sig, sig)", 33, "pld.tensor.barrier takes (signal), got 2 arguments"),
        ("x = tile.create([1, 0], dtype=fp32)", 21, "tile.create: argument 'shape' must be positive extents"),
        ("x = tile.add(tile.create([1, 8], dtype=fp32), tile.create([1, 8], dtype=fp16))", 51,
         "tile.add: argument 'rhs' must be a tile fp32[1, 8] like lhs"),
        ("x = pld.tensor.allreduce(data, sig, op=Sum, mode=sideways)", 54,
         "attribute 'mode' of pld.tensor.allreduce must be one of mesh, ring"),
        ("x = tile.store(tile.load(data, [0, 0], [4, 64]), [0, 0], data)", 9,
         "tile.store returns nothing; call it as a statement instead of assigning it to 'x'"),
        # syntax
        ("x = 1 < 2 < 3", 15, "comparisons cannot be chained"),
        ("x = -NR", 9, "unary minus applies only to number literals; write 0 - x"),
        ("x = 1", None, None),
        ("i = 0", None, None),
        ("x = 2.5:int32", 13, "a float literal cannot have the integer type int32"),
        ("x = 7 / 2", 11, "unexpected '/': integer division is written //"),
        ("x += 1", 7, "'+=' is not supported; write x = x + ..."),
        ("data", 5, "this expression does nothing on its own"),
        ("x = [1, 2]", 9, "a [list] can only be an op argument"),
        ("else {", 5, "'else' without a matching 'if'"),
        ("x = 1 y = 2", 11, "expected the end of the line, got 'y'"),
        ("x = range(3)", 9, "range(...) only appears in 'for NAME in range(...)'"),
        ("x = min(1, 2, 3)", 12, "min takes exactly two arguments, got 3"),
        ("for i in range(1, 2, 3, 4) {", 19, "range takes 1 to 3 arguments"),
        ("for i over range(3) {", 11, "expected 'in' after the loop variable"),
        ("x = 5abc", 9, "invalid number literal '5a'"),
    ],
)
def test_body_errors(line: str, col: int | None, message: str | None) -> None:
    if message is None:
        parse_program(body(line))
        return
    err = body_error(line)
    assert message in err.message
    assert (err.line, err.col) == (FIRST_LINE, col), str(err)


def test_name_bound_only_in_a_loop_is_not_visible_after_it() -> None:
    err = body_error("for i in range(3) {", "  x = i", "}", "y = x")
    assert (err.line, err.col) == (FIRST_LINE + 3, 9)
    assert err.message == (f"'x' is not defined here: it is only bound inside the for loop at line {FIRST_LINE} "
                           "(names bound in a loop body are not visible after the loop)")
    err = body_error("for i in range(3) {", "}", "y = i")
    assert "only bound inside the for loop" in err.message


def test_name_bound_in_one_branch_is_not_visible_after_the_if() -> None:
    err = body_error("if NR > 2 {", "  x = 1", "}", "y = x")
    assert err.message == f"'x' is not defined here: it is bound in only one branch of the if at line {FIRST_LINE}"
    err = body_error("if NR > 2 {", "  x = 1", "} else {", "  x = 1.0", "}", "y = x")
    assert "the branches of the if at line" in err.message and "different types" in err.message


def test_duplicate_buffer() -> None:
    err = parse_error("program t {\n  window data: fp32[4]\n  local data: fp32[8]\n}\n")
    assert (err.line, err.col) == (3, 9)
    assert err.message == "buffer 'data' is already declared at line 2"


@pytest.mark.parametrize(
    ("text", "line", "col", "message"),
    [
        ("", 1, 1, "a .pld file starts with 'program NAME {', got end of file"),
        ("prog t {\n}\n", 1, 1, "a .pld file starts with 'program NAME {'"),
        ("program t nranks=x {\n}\n", 1, 18, "nranks must be an integer literal"),
        ("program t size=4 {\n}\n", 1, 11, "expected '{' or a program option"),
        ("program t {\n  window w: fp32[4]\n", 3, 1, "missing '}' to close the program opened at line 1"),
        ("program t {\n  window w: fp32[4\n}\n", 2, 17, "'[' is never closed"),
        ("program t {\n  window w: fp32)4]\n}\n", 2, 17, "unmatched ')'"),
        ("program t {\n  window w: fp32[4)\n}\n", 2, 19, "')' does not match the '[' at line 2, column 17"),
        ("program t {\n  window w: float[4]\n}\n", 2, 13, "unknown dtype 'float'"),
        ("program t {\n  window w: fp32[4] layout XY\n}\n", 2, 28, "layout must be one of ND, DN, got 'XY'"),
        ("program t {\n  window w: fp32[n]\n}\n", 2, 18, "undefined variable 'n'"),
        ("program t {\n  buffer w: fp32[4]\n}\n", 2, 3, "expected a buffer declaration"),
        ("program t {\n  func main() {\n  }\n  window w: fp32[4]\n}\n", 4, 3,
         "declare buffers before the first function"),
        ("program t {\n  func main() {\n  }\n  func main() {\n  }\n}\n", 4, 8,
         "function 'main' is already defined at line 2"),
        ("program t {\n  func main(x: fp32, x: fp32) {\n  }\n}\n", 2, 22, "parameter 'x' given twice"),
        ("program t {\n  func main(x) {\n  }\n}\n", 2, 14, "expected ':' after the parameter name 'x'"),
        ("program t {\n  func main(x: blob) {\n  }\n}\n", 2, 16, "unknown parameter type 'blob'"),
        # issue 9: the func's brace is the missing one (the '}' that is there lines up with the program)
        ("program t {\n  func main() {\n    x = 1\n}\n", 2, 15,
         "missing '}' to close the function 'main' opened at line 2 (the '}' at line 4, column 1, lines up"),
        ("program t {\n  func main() {\n    x = 1\n", 4, 1,
         "missing '}' to close the function 'main' opened at line 2"),
        ("program t {\n}\nprogram u {\n}\n", 3, 1, "unexpected 'program' after the end of the program"),
        ('program t {\n  func main() {\n    x = "abc\n  }\n}\n', 3, 9, "unterminated string literal"),
    ],
)
def test_program_errors(text: str, line: int, col: int, message: str) -> None:
    err = parse_error(text)
    assert message in err.message
    assert (err.line, err.col) == (line, col), str(err)


def test_ir_type_error_is_chained() -> None:
    err = body_error("pld.system.notify(loc, 0, [0, 0], 1)")
    assert type(err.__cause__).__name__ == "IRTypeError"
    assert isinstance(err, ValueError)


def test_mutated_programs_fail_with_parse_errors_only() -> None:
    """Deleting, duplicating or inserting tokens never crashes the parser with another exception."""
    rng = random.Random(7)
    for program in all_programs():
        toks = re.findall(r"\w+(?:\.\w+)*|\S|\n", format_program(program))
        for _ in range(300):
            mutated = list(toks)
            i = rng.randrange(len(mutated))
            action = rng.randrange(3)
            if action == 0:
                del mutated[i]
            elif action == 1:
                mutated.insert(i, rng.choice(toks))
            else:
                mutated.insert(i, rng.choice(["-", "(", "]", ":", "=", ",", "else", "NR", "1.5", "true", '"s"']))
            with contextlib.suppress(ParseError):
                parse_program(" ".join(mutated))
