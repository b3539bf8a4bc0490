"""What a HOST dispatch evaluates to: the host values its Orchestration returns.

pypto's dispatch ``top, data = self.orch(x, top, data, device=r)`` returns tensors the host may pass on
(``pld.tensor.allreduce(data, ...)``, a later dispatch). Tensors are references, so what an
Orchestration returns is one of its tensor parameters, reached through rebinding: ``pl.store``,
``pl.assemble`` and the collectives return their target, ``pl.yield_`` what it carries, a loop's ``init_values`` target
its initial value, an inlined call what its callee returns. This module follows those aliases on the
captured AST, without translating anything, so the result is the same on every rank (also where the
dispatch runs on another device). A returned value that is not a parameter is :class:`Unresolved`:
the host may name it, and passing it on is an error at its use.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from pldemu.pypto.capture import CapturedFunction, CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.translate.evaluator import Evaluator
from pldemu.pypto.translate.ops import TILE_ALIASES
from pldemu.pypto.translate.values import Unresolved
from pldemu.pypto.types import DslOp

_TARGET: Mapping[str, tuple[int, str]] = {
    "pl.store": (2, "output_tensor"),
    "pl.assemble": (0, "target"),
    "pl.tensor.assemble": (0, "target"),
    "pld.tensor.allreduce": (0, "target"),
    "pld.tensor.reduce_scatter": (0, "target"),
    "pld.tensor.broadcast": (0, "target"),
    "pld.tensor.barrier": (0, "signal"),
    "pld.tensor.allgather": (1, "target"),
    "pld.tensor.all_to_all": (1, "target"),
    "pld.tensor.all_to_all_v": (1, "target"),
}
"""DSL ops that return one of their arguments (position, keyword)."""

Alias = str | tuple[Any, ...] | None
"""A parameter name, a tuple of aliases, or None (not a parameter)."""


def dispatch_result(prog: CapturedProgram, fn: CapturedFunction, bound: Mapping[str, Any], line: int) -> Any:
    """The host value of ``self.<fn>(...)`` whose parameters are ``bound`` to host values."""
    return _to_value(_returns(prog, fn, {p: p for p in fn.params}, 0), bound, fn.name, line)


def _to_value(alias: Alias, bound: Mapping[str, Any], name: str, line: int) -> Any:
    if isinstance(alias, tuple):
        return tuple(_to_value(a, bound, name, line) for a in alias)
    if alias is None or alias not in bound:
        return Unresolved(name, line)
    return bound[alias]


def _returns(prog: CapturedProgram, fn: CapturedFunction, env: dict[str, Alias], depth: int) -> Alias:
    """The alias of ``fn``'s return value, its parameters aliased as ``env`` says."""
    if depth > len(prog.functions):  # a call cycle: pypto refuses recursion, and so does the inliner
        return None
    found: list[Alias] = []
    _block(_Walk(prog, env, depth), fn.node.body, found)
    return found[0] if found and all(f == found[0] for f in found) else None


class _Walk:
    def __init__(self, prog: CapturedProgram, env: dict[str, Alias], depth: int) -> None:
        self.prog = prog
        self.env = env
        self.depth = depth

    def expr(self, node: ast.expr | None) -> Alias:
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Call):
            return self.call(node)
        return None

    def call(self, node: ast.Call) -> Alias:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            callee = self.prog.functions.get(func.attr)
            if callee is None:
                return None
            env = {p: self.expr(a) for p, a in zip(callee.params, node.args, strict=False)}
            env.update({kw.arg: self.expr(kw.value) for kw in node.keywords if kw.arg in callee.params})
            return _returns(self.prog, callee, env, self.depth + 1)
        try:
            op = Evaluator(self.prog, {}, {}).eval(func)
        except FrontendError:
            return None
        name = op.name if isinstance(op, DslOp) else None
        if name is not None and name.startswith("pl.tile."):
            name = TILE_ALIASES.get(name.removeprefix("pl.tile."), name)
        if name == "pl.yield_":
            values = tuple(self.expr(a) for a in node.args)
            return values[0] if len(values) == 1 else values
        if name is None or name not in _TARGET:
            return None
        pos, kw = _TARGET[name]
        given = [k.value for k in node.keywords if k.arg == kw]
        return self.expr(given[0] if given else node.args[pos] if len(node.args) > pos else None)

    def bind(self, target: ast.expr, alias: Alias) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = alias
        elif isinstance(target, ast.Tuple):
            parts = alias if isinstance(alias, tuple) and len(alias) == len(target.elts) else (None,) * len(target.elts)
            for t, a in zip(target.elts, parts, strict=True):
                self.bind(t, a)


def _block(w: _Walk, body: list[ast.stmt], found: list[Alias]) -> None:
    for s in body:
        if isinstance(s, ast.Return):
            found.append(w.expr(s.value))
        elif isinstance(s, ast.Assign):
            alias = w.expr(s.value)
            for t in s.targets:
                w.bind(t, alias)
        elif isinstance(s, ast.AnnAssign):
            w.bind(s.target, w.expr(s.value))
        elif isinstance(s, ast.For):
            _loop_carry(w, s)
            _block(w, s.body, found)
        elif isinstance(s, ast.If):
            _block(w, s.body, found)
            _block(w, s.orelse, found)


def _loop_carry(w: _Walk, s: ast.For) -> None:
    """``for i, (a, b) in pl.range(..., init_values=(x, y))``: ``a`` and ``b`` alias ``x`` and ``y``."""
    inits = [kw.value for kw in getattr(s.iter, "keywords", []) if kw.arg == "init_values"]
    if inits and isinstance(s.target, ast.Tuple) and len(s.target.elts) == 2:
        carried = w.expr(inits[0])
        w.bind(s.target.elts[1], carried if isinstance(carried, tuple) else (carried,))


__all__ = ["dispatch_result"]
