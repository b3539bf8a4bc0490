"""HOST-level ``with pl.at(level=pl.Level.CHIP):`` scopes, outlined as pypto's OutlineHierarchyScopes does.

pypto turns each such scope into a chip Orchestration of its own (inputs: the free variables the scope
uses; outputs: the variables it defines that the host uses later) and the scope into a call of it,
without ``device=``: pypto's runtime deals such comm-less dispatches round-robin over the program's chips
(``translate.host``). Here the HOST function's AST is rewritten the same way before the host is projected:
``self._at_<line>(inputs...)`` in place of the scope, and an Orchestration ``_at_<line>`` whose
parameters are typed by their arguments. A CORE_GROUP scope inside it is the device translator's.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import TypeVar

from pldemu.pypto.capture import CapturedFunction, CapturedProgram, Kind

_Node = TypeVar("_Node", bound=ast.AST)

CHIP_LEVELS = frozenset({"CHIP"})
"""The levels a HOST-level ``pl.at`` outlines (a chip Orchestration)."""


def outline_host_scopes(prog: CapturedProgram) -> CapturedProgram:
    """``prog`` with its HOST function's ``pl.at(level=CHIP)`` scopes outlined (itself when it has none)."""
    host = prog.host()
    outlined: dict[str, CapturedFunction] = {}
    body = _rewrite(prog, host, host.node.body, outlined)
    if not outlined:
        return prog
    node = ast.FunctionDef(host.node.name, host.node.args, body, host.node.decorator_list, host.node.returns,
                           host.node.type_comment, lineno=host.node.lineno, col_offset=host.node.col_offset,
                           end_lineno=host.node.end_lineno, end_col_offset=host.node.end_col_offset)
    functions = {**prog.functions, host.name: dataclasses.replace(host, node=node), **outlined}
    return dataclasses.replace(prog, functions=functions)


def _rewrite(prog: CapturedProgram, host: CapturedFunction, body: list[ast.stmt],
             outlined: dict[str, CapturedFunction]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for i, s in enumerate(body):
        level = _chip_scope(s, host)
        if level is None:
            out.append(s)
            continue
        assert isinstance(s, ast.With)
        later = {n.id for t in body[i + 1:] for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        fn, call = _outline(host, s, later)
        outlined[fn.name] = fn
        out.append(call)
    return out


def _chip_scope(s: ast.stmt, host: CapturedFunction) -> str | None:
    """``with pl.at(level=pl.Level.CHIP, ...):`` (one context, no ``as``): its level; else None."""
    if not isinstance(s, ast.With) or len(s.items) != 1 or s.items[0].optional_vars is not None:
        return None
    call = s.items[0].context_expr
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "at"):
        return None
    level = next((kw.value for kw in call.keywords if kw.arg == "level"), None)
    name = level.attr if isinstance(level, ast.Attribute) else None
    return name if name in CHIP_LEVELS else None


def _outline(host: CapturedFunction, s: ast.With, later: set[str]) -> tuple[CapturedFunction, ast.stmt]:
    name = f"_at_{s.lineno}"
    stored = {n.id for n in _names(s.body) if isinstance(n.ctx, ast.Store)}
    inputs = sorted({n.id for n in _names(s.body) if isinstance(n.ctx, ast.Load) and n.id not in host.closure
                     and n.id != "self"} - (stored - set(host.params)))
    outputs = sorted(stored & later)
    ret: ast.stmt = ast.Return(_tuple(outputs)) if outputs else ast.Pass()
    args = ast.arguments([], [ast.arg("self"), *(ast.arg(p) for p in inputs)], None, [], [], None, [])
    node = ast.FunctionDef(name, args, [*s.body, _at(ret, s)], [], None, None)
    fn = CapturedFunction(name, Kind.ORCHESTRATION, _at(node, s), tuple(inputs), {}, host.file, host.closure,
                          inferred=True)
    call = ast.Call(ast.Attribute(ast.Name("self", ast.Load()), name, ast.Load()),
                    [ast.Name(p, ast.Load()) for p in inputs], [])
    stmt: ast.stmt = ast.Assign([_tuple(outputs, ast.Store())], call) if outputs else ast.Expr(call)
    return fn, _at(stmt, s)


def _at(node: _Node, where: ast.stmt) -> _Node:
    """``node`` and every new node under it placed at ``where``'s line (what the host wrote there); the
    scope's own statements keep theirs."""
    for n in ast.walk(node):
        if not hasattr(n, "lineno") and isinstance(n, (ast.stmt, ast.expr, ast.arg)):
            n.lineno, n.col_offset = where.lineno, where.col_offset
            n.end_lineno, n.end_col_offset = where.lineno, where.col_offset
    return node


def _names(body: list[ast.stmt]) -> Iterator[ast.Name]:
    for s in body:
        yield from (n for n in ast.walk(s) if isinstance(n, ast.Name))


def _tuple(names: list[str], ctx: ast.expr_context | None = None) -> ast.expr:
    ctx = ctx or ast.Load()
    if len(names) == 1:
        return ast.Name(names[0], ctx)
    return ast.Tuple([ast.Name(n, ctx) for n in names], ctx)


__all__ = ["CHIP_LEVELS", "outline_host_scopes"]
