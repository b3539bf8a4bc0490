"""The IR utilities: the one walker, the one evaluator of static / NR expressions, the one Scope."""

from __future__ import annotations

import pytest

from pldemu.ir import NR, DType, ProgramBuilder, parse_program, program_calls, walk_stmts
from pldemu.ir.nodes import (
    INDEX,
    BinOp,
    BinOpKind,
    Const,
    FoldError,
    For,
    If,
    ListExpr,
    NotStatic,
    Var,
    eval_nr,
    evaluate,
)
from pldemu.ir.ops import Op
from pldemu.ir.scope import Scope
from pldemu.ir.signatures import make_call
from pldemu.ir.walk import expr_calls, stmt_bodies, stmt_exprs, walk_expr

TEXT = """program p {
  signal sig: int32[NR, 1]
  local t: fp32[4]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    for i in range(0, pld.system.nranks(ctx), 1) {
      if i != me {
        pld.system.notify(sig, i, [me, 0], 1, op=AtomicAdd)
      } else {
        pld.system.wait(sig, [i, 0], 1, cmp=Ge)
      }
    }
  }
}
"""


def test_walk_visits_statements_in_pre_order_and_calls_in_evaluation_order() -> None:
    program = parse_program(TEXT)
    kinds = [type(s).__name__ for s in walk_stmts(program.function().body.stmts)]
    assert kinds == ["Assign", "Assign", "For", "If", "Eval", "Eval"]  # bodies are walked, not yielded
    ops = [c.op for c in program_calls(program)]
    assert ops == [Op.GET_COMM_CTX, Op.RANK, Op.NRANKS, Op.NOTIFY, Op.WAIT]


def test_statement_parts() -> None:
    program = parse_program(TEXT)
    loop = program.function().body.stmts[2]
    assert isinstance(loop, For)
    assert stmt_exprs(loop) == (loop.start, loop.stop, loop.step)
    assert stmt_bodies(loop) == (loop.body,)
    branch = loop.body.stmts[0]
    assert isinstance(branch, If) and branch.orelse is not None
    assert stmt_bodies(branch) == (branch.then, branch.orelse)


def test_walk_expr_yields_operands_before_their_node() -> None:
    pb = ProgramBuilder("e")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    ctx = fb.pld.system.get_comm_ctx(sig)
    e = (make_call(Op.NRANKS, [ctx], {}) + 1) * 2  # the builder would bind the call to a name
    nodes = list(walk_expr(e))
    assert nodes[-1] is e and isinstance(nodes[0], Var)
    assert [c.op for c in expr_calls(e)] == [Op.NRANKS]
    assert list(walk_expr(ListExpr((Const(1), Const(2)))))[-1] == ListExpr((Const(1), Const(2)))


def test_evaluate_literals_lists_and_nr() -> None:
    assert evaluate(BinOp(BinOpKind.MUL, Const(2), BinOp(BinOpKind.SUB, NR, Const(1))), 4) == 6
    assert evaluate(ListExpr((Const(1), BinOp(BinOpKind.ADD, Const(2), Const(3))))) == (1, 5)
    assert evaluate(BinOp(BinOpKind.LT, Const(1), Const(2))) is True
    with pytest.raises(NotStatic) as info:
        evaluate(BinOp(BinOpKind.ADD, NR, Const(1)))  # NR is free unless bound
    assert info.value.expr == NR
    x = Var("x", INDEX)
    with pytest.raises(NotStatic) as info:
        evaluate(BinOp(BinOpKind.ADD, Const(1), x), 4)
    assert info.value.expr == x
    bad = BinOp(BinOpKind.FLOORDIV, NR, Const(0))
    with pytest.raises(FoldError) as fold:
        evaluate(BinOp(BinOpKind.ADD, bad, Const(1)), 4)
    assert fold.value.expr == bad and isinstance(fold.value.cause, ZeroDivisionError)


def test_eval_nr_is_integer_only() -> None:
    assert eval_nr(BinOp(BinOpKind.FLOORDIV, NR, Const(2)), 5) == 2
    assert eval_nr(Const(2.5), 5) is None
    assert eval_nr(BinOp(BinOpKind.LT, NR, Const(3)), 5) is None
    assert eval_nr(BinOp(BinOpKind.MOD, NR, Const(0)), 5) is None
    assert eval_nr(Var("x", INDEX), 5) is None


def test_expression_operators_fold_through_the_evaluator() -> None:
    assert Const(6) // Const(4) == Const(1)
    assert (Const(3) % Const(0)) == BinOp(BinOpKind.MOD, Const(3), Const(0))  # the fault is left to run time
    assert Const(1).lt(Const(2)) == Const(True, DType.BOOL)


def test_scope_rules_after_loops_and_branches() -> None:
    outer = Scope.of({"a": INDEX})
    body = outer.child()
    body.bind("b", INDEX)
    outer.leave_loop(body, "the loop")
    assert outer.get("b") is None and "only bound inside the loop" in outer.hidden["b"]
    then, other = outer.child(), outer.child()
    then.bind("c", INDEX)
    other.bind("c", INDEX)
    then.bind("d", INDEX)
    outer.join_branches(then, other, "the if")
    assert outer.get("c") == INDEX
    assert outer.get("d") is None and "only one branch of the if" in outer.hidden["d"]
