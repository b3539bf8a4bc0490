"""The one IR walker: statements, their expressions, sub-expressions and calls.

Every pass, checker and test that needs "every X in this program" iterates with these generators
instead of re-spelling the statement and expression cases (in the spirit of xDSL's
``Operation.walk``). Order is the program's: statements in pre-order (a statement before its nested
bodies), sub-expressions and calls in evaluation order (operands before the node that uses them).
Code that must *rebuild* or *scope* the tree (the printer, the parser, the rewriter) recurses
structurally, but it takes a statement's own expressions and bodies from ``stmt_exprs`` and
``stmt_bodies``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pldemu.ir import nodes as ir


def stmt_exprs(s: ir.Stmt) -> tuple[ir.Expr, ...]:
    """The expressions statement ``s`` evaluates itself (not those of its nested bodies)."""
    if isinstance(s, ir.Assign):
        return (s.value,)
    if isinstance(s, ir.Eval):
        return (s.call,)
    if isinstance(s, ir.For):
        return (s.start, s.stop, s.step)
    if isinstance(s, (ir.While, ir.If)):
        return (s.cond,)
    if isinstance(s, ir.Return):
        return s.values
    if isinstance(s, ir.Task):
        return (s.blocks, *s.deps)
    return ()


def stmt_bodies(s: ir.Stmt) -> tuple[ir.Seq, ...]:
    """The statement lists nested in ``s`` (a ``Seq`` is its own body)."""
    if isinstance(s, ir.Seq):
        return (s,)
    if isinstance(s, (ir.For, ir.While, ir.Task, ir.TaskScope)):
        return (s.body,)
    if isinstance(s, ir.If):
        return (s.then,) if s.orelse is None else (s.then, s.orelse)
    return ()


def walk_stmts(stmts: Iterable[ir.Stmt]) -> Iterator[ir.Stmt]:
    """Every statement of ``stmts`` and of their nested bodies, in pre-order."""
    for s in stmts:
        yield s
        for body in stmt_bodies(s):
            yield from walk_stmts(body.stmts)


def walk_expr(e: ir.Arg) -> Iterator[ir.Arg]:
    """Every sub-expression of ``e`` (``e`` included), operands before the node that uses them."""
    if isinstance(e, ir.ListExpr):
        for item in e.items:
            yield from walk_expr(item)
    elif isinstance(e, ir.BinOp):
        yield from walk_expr(e.lhs)
        yield from walk_expr(e.rhs)
    elif isinstance(e, ir.Call):
        for a in e.args:
            yield from walk_expr(a)
    yield e


MAX_NESTING = 100
"""Deepest nesting of expressions (operators, parentheses, calls) and blocks a program may have:
walks over the IR recurse on it, so past this a program is refused (parser, verifier) with a clear
error instead of crashing deep inside Python's recursion limit."""


def expr_depth(e: ir.Arg) -> int:
    """Levels of nesting of ``e`` (a leaf is 1); iterative, so any depth can be measured."""
    deepest = 0
    stack: list[tuple[ir.Arg, int]] = [(e, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children: tuple[ir.Arg, ...] = ()
        if isinstance(node, ir.ListExpr):
            children = node.items
        elif isinstance(node, ir.BinOp):
            children = (node.lhs, node.rhs)
        elif isinstance(node, ir.Call):
            children = tuple(node.args)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def program_depth(program: ir.Program) -> tuple[int, str]:
    """The deepest nesting of ``program`` (blocks plus expressions) and the function it is in."""
    deepest, where = 0, ""
    for f in program.functions:
        stack: list[tuple[ir.Stmt, int]] = [(s, 1) for s in f.body.stmts]
        while stack:
            s, depth = stack.pop()
            exprs = max((expr_depth(e) for e in stmt_exprs(s)), default=0)
            if depth + exprs > deepest:
                deepest, where = depth + exprs, f.name
            stack.extend((inner, depth + 1) for body in stmt_bodies(s) for inner in body.stmts)
    return deepest, where


def expr_calls(e: ir.Arg) -> Iterator[ir.Call]:
    """Every call inside ``e``, innermost first (evaluation order)."""
    return (x for x in walk_expr(e) if isinstance(x, ir.Call))


def stmt_calls(s: ir.Stmt) -> Iterator[ir.Call]:
    """The calls statement ``s`` evaluates itself, in evaluation order (nested bodies excluded)."""
    for e in stmt_exprs(s):
        yield from expr_calls(e)


def walk_calls(stmts: Iterable[ir.Stmt]) -> Iterator[ir.Call]:
    """Every call of ``stmts`` and their nested bodies, in program order."""
    for s in walk_stmts(stmts):
        yield from stmt_calls(s)


def function_calls(f: ir.Function) -> Iterator[ir.Call]:
    """Every call of function ``f``, in program order."""
    return walk_calls(f.body.stmts)


def program_calls(program: ir.Program) -> Iterator[ir.Call]:
    """Every call of every function of ``program``, function by function."""
    for f in program.functions:
        yield from function_calls(f)


__all__ = [
    "MAX_NESTING",
    "expr_calls",
    "expr_depth",
    "function_calls",
    "program_calls",
    "program_depth",
    "stmt_bodies",
    "stmt_calls",
    "stmt_exprs",
    "walk_calls",
    "walk_expr",
    "walk_stmts",
]
