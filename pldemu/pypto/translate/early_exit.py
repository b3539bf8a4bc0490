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


def while_test(test: ast.expr, flag: str | None) -> ast.expr:
    """A ``while`` loop's condition, also false once the body has broken out."""
    if flag is None:
        return test
    both = ast.BoolOp(op=ast.And(), values=[test, _flag_test(flag, test)])
    return ast.copy_location(both, test)


__all__ = ["REFUSED_LOOPS", "Rewritten", "first_exit", "rewrite", "while_test"]
