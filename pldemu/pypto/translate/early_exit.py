"""``break`` / ``continue`` in a device loop, as pypto's CtrlFlowTransform removes them before code generation.

pypto's parser takes both in ``pl.range`` / ``pl.pipeline`` / ``while`` loops (refusing them in ``pl.parallel``,
``pl.unroll`` and a ``pl.split_aiv`` body); its CtrlFlowTransform pass turns them into structured control flow, so
the device runs the iterations up to a ``break`` and skips the rest of an iteration after a ``continue``. pldemu's
loops have no early exit, so the loop body is rewritten here, on the AST, to the same effect:

- the statements after an ``if`` that may leave the iteration move into both of its branches (so a branch that
  leaves drops them), and a ``continue`` ends its block;
- a ``break`` sets a flag (an integer scalar carried by the loop, 0 before it) and ends its block; the whole body
  runs under ``if flag == 0`` and a ``while`` loop's condition also tests it.

Every new node keeps the line of the statement it stands for, so errors point at the user's line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

REFUSED_LOOPS = {"pl.parallel": "parallel", "pl.unroll": "unrolled", "pl.spmd": "pl.spmd",
                 "pl.split_aiv": "pl.split_aiv"}
"""The loops pypto's parser refuses a ``break`` / ``continue`` in (``_validate_loop_control``), by their kind
in its message (a ``pl.spmd`` body is a fan of blocks, not a loop, to pldemu too)."""


def _exits(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The ``break`` / ``continue`` statements of ``body`` that leave this loop (not those of a nested loop)."""
    for s in body:
        if isinstance(s, (ast.Break, ast.Continue)):
            yield s
        elif isinstance(s, ast.If):
            yield from _exits(s.body)
            yield from _exits(s.orelse)


def first_exit(body: list[ast.stmt]) -> ast.stmt | None:
    """The first ``break`` / ``continue`` that leaves the loop of ``body``, or None."""
    return next(_exits(body), None)


@dataclass(frozen=True)
class Rewritten:
    """A loop body without ``break`` / ``continue``: ``flag`` names the break flag (None when nothing breaks)."""

    body: list[ast.stmt]
    flag: str | None


def _flag_test(flag: str, at: ast.AST) -> ast.expr:
    test = ast.Compare(left=ast.Name(id=flag, ctx=ast.Load()), ops=[ast.Eq()], comparators=[ast.Constant(0)])
    return ast.copy_location(ast.fix_missing_locations(ast.copy_location(test, at)), at)


def _lower(block: list[ast.stmt], flag: str) -> list[ast.stmt]:
    for i, s in enumerate(block):
        if isinstance(s, ast.Continue):
            return block[:i]
        if isinstance(s, ast.Break):
            set_flag = ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())], value=ast.Constant(1))
            return [*block[:i], ast.fix_missing_locations(ast.copy_location(set_flag, s))]
        if isinstance(s, ast.If) and first_exit([s]) is not None:
            rest = block[i + 1:]
            branch = ast.If(test=s.test, body=_lower([*s.body, *rest], flag), orelse=_lower([*s.orelse, *rest], flag))
            return [*block[:i], ast.copy_location(branch, s)]
    return block


def rewrite(body: list[ast.stmt], loop: ast.stmt) -> Rewritten:
    """``body`` of ``loop`` with its ``break`` / ``continue`` lowered (the caller binds the flag to 0 before the
    loop and carries it)."""
    breaks = any(isinstance(s, ast.Break) for s in _exits(body))
    flag = f"_pl_break_{loop.lineno}_{loop.col_offset}" if breaks else None
    lowered = _lower(list(body), flag or "")
    if flag is None:
        return Rewritten(lowered, None)
    guarded = ast.copy_location(ast.If(test=_flag_test(flag, loop), body=lowered, orelse=[]), loop)
    return Rewritten([guarded], flag)


def _assigned(nodes: list[ast.stmt]) -> set[str]:
    """The names ``nodes`` bind anywhere (nested blocks included)."""
    return {t.id for n in nodes for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}


def _top_assigned(nodes: list[ast.stmt]) -> set[str]:
    """The names bound by ``nodes``' own assignments (pypto's AssignStmts of that scope, not an ``if``'s outputs)."""
    return _assigned([n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))])


def _set(name: str, value: ast.expr, at: ast.AST) -> ast.stmt:
    return ast.fix_missing_locations(ast.copy_location(
        ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value), at))


def _yield_call(s: ast.stmt) -> ast.Call | None:
    value = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
    func = value.func if isinstance(value, ast.Call) else None
    named = (isinstance(func, ast.Attribute) and func.attr == "yield_") or (
        isinstance(func, ast.Name) and func.id == "yield_")
    return value if named and isinstance(value, ast.Call) else None


def _escape_if(s: ast.stmt) -> tuple[ast.stmt, list[ast.stmt]] | None:
    """``if c: continue`` (or a branch holding only the exit, either one): the exit and the other branch."""
    if not isinstance(s, ast.If):
        return None
    for mine, other in ((s.body, s.orelse), (s.orelse, s.body)):
        if len(mine) == 1 and isinstance(mine[0], (ast.Break, ast.Continue)):
            return mine[0], other
    return None


def rewrite_carried(body: list[ast.stmt], loop: ast.stmt, carried: list[str]) -> Rewritten | tuple[str, ast.AST]:
    """``body`` of a loop with ``init_values`` (carrying ``carried``) with its one ``break`` / ``continue`` lowered
    as pypto's CtrlFlowTransform lowers it, or why pldemu does not run it and where. At the exit each carried value
    is the trailing ``pl.yield_``'s value when that is a name the statements before the exit bind (at the body's
    own level) and nothing after re-binds, else the value the iteration began with; a continue keeps a yielded
    expression as it is, a break takes the value the iteration began with (ResolveYieldAtEscape)."""
    exits = list(_exits(body))
    call = _yield_call(body[-1]) if body else None
    if len(exits) > 1 or call is None or len(call.args) != len(carried) or first_exit(body[-1:]):
        return (f"'{ast.unparse(exits[0]).strip()}' in a loop with init_values runs in pldemu as one exit from the body "
                "(a bare one, or an `if` branch holding only it) before the body's last statement, "
                f"`pl.yield_` of its {len(carried)} carried values: pypto's CtrlFlowTransform resolves the yield at a "
                "second exit against the statements since the first only, and drops the statements before an exit "
                "in its branch", exits[0])
    at = next(i for i, s in enumerate(body) if first_exit([s]) is not None)
    split = _escape_if(body[at]) or ((body[at], []) if isinstance(body[at], (ast.Break, ast.Continue)) else None)
    if split is None:
        return ("an exit nested in an `if` of a loop with init_values is not run by pldemu: pypto's "
                "CtrlFlowTransform yields that `if`'s values, dropping what the statements after it compute; write "
                "`if cond: continue` / `if cond: break` at the body's level", exits[0])
    exit_, other = split
    pre, post = body[:at], [*other, *body[at + 1:-1]]
    later, nested = _assigned(post), _assigned(body[:-1]) - _top_assigned(body[:-1])
    slots = [f"_pl_yield_{loop.lineno}_{j}" for j in range(len(carried))]
    escape: list[ast.stmt] = []
    for slot, value in zip(slots, call.args, strict=True):
        names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
        if names & nested:
            return (f"pl.yield_ of `{ast.unparse(value)}`, bound inside a nested block, in a loop that may "
                    f"'{ast.unparse(exit_)}': pypto's CtrlFlowTransform sees only the body's own assignments "
                    "(it would yield the value the iteration began with); bind it at the body's level", value)
        if isinstance(value, ast.Name):
            if value.id in _top_assigned(pre) and value.id not in later:
                escape.append(_set(slot, value, exit_))
        elif isinstance(exit_, ast.Continue):
            if names & later:
                return (f"pl.yield_ of `{ast.unparse(value)}` at a continue reads what is computed after it "
                        "(pypto's CtrlFlowTransform yields the expression there): yield a name", value)
            escape.append(_set(slot, value, exit_))
    flag = f"_pl_break_{loop.lineno}_{loop.col_offset}" if isinstance(exit_, ast.Break) else None
    if flag is not None:
        escape.append(_set(flag, ast.Constant(1), exit_))
    normal = [*post, *(_set(slot, value, body[-1]) for slot, value in zip(slots, call.args, strict=True))]
    branch = body[at]
    lowered = [*pre, *escape]
    if isinstance(branch, ast.If):
        sides = (escape or [ast.Pass()], normal) if exit_ in branch.body else (normal, escape or [ast.Pass()])
        lowered = [*pre, ast.copy_location(ast.If(test=branch.test, body=sides[0], orelse=sides[1]), branch)]
    lowered = [ast.fix_missing_locations(s) for s in lowered]
    start = [_set(slot, ast.Name(id=name, ctx=ast.Load()), loop) for slot, name in zip(slots, carried, strict=True)]
    if flag is not None:
        lowered = [ast.copy_location(ast.If(test=_flag_test(flag, loop), body=lowered, orelse=[]), loop)]
    final = ast.copy_location(ast.Call(func=call.func, args=[ast.Name(id=s, ctx=ast.Load()) for s in slots],
                                       keywords=call.keywords), call)
    last = body[-1]
    ended = (ast.Assign(targets=last.targets, value=final) if isinstance(last, ast.Assign) else ast.Expr(value=final))
    return Rewritten([*start, *lowered, ast.fix_missing_locations(ast.copy_location(ended, last))], flag)


def while_test(test: ast.expr, flag: str | None) -> ast.expr:
    """A ``while`` loop's condition, also false once the body has broken out."""
    if flag is None:
        return test
    both = ast.BoolOp(op=ast.And(), values=[test, _flag_test(flag, test)])
    return ast.copy_location(both, test)


__all__ = ["REFUSED_LOOPS", "Rewritten", "first_exit", "rewrite", "rewrite_carried", "while_test"]
