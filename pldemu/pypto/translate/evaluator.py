"""The one expression evaluator both levels share: Python-subset semantics over the captured AST.

Values are Python objects (ints, closure values, DSL enums, host views) or, at device level, pldemu IR
expressions; arithmetic and comparisons go through ``binary`` / ``compare``, which the device level
extends to IR. Names resolve in the local environment, then the program's closure, then a few
builtins. Anything else is a :class:`FrontendError` at the node's line.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pldemu.pypto.capture import HOST_LEVEL, CapturedFunction, CapturedProgram, Kind
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.types import DslOp, DynExpr, DynVar, PyDType, dtype_of_ir

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv,  # of Python numbers (``1.0 / D``): Python's value
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,  # pypto folds ``1 << 17`` of constants too
}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_BUILTINS: dict[str, Any] = {"True": True, "False": False, "None": None, "range": range, "len": len,
                             "min": min, "max": max, "int": int, "abs": abs}


_PY_CALLABLES = (range, len, min, max, int, abs)

_UNBOUND = object()
"""A comprehension's loop name that had no binding before it."""


def dsl_callee(ev: Any, node: ast.expr) -> str | None:
    """The pypto name a call ``node`` calls (``pl.at``, ``pl.spmd``), when it calls one of pypto's DSL
    names; None for anything else, or a callee that does not evaluate."""
    if not isinstance(node, ast.Call):
        return None
    try:
        callee = ev.eval(node.func)
    except FrontendError:
        return None
    return callee.name if isinstance(callee, DslOp) else None


class Evaluator:
    """Evaluates expressions of one function body in ``env``. A level says what a call means there:
    ``call_self`` (``self.f(...)``: a dispatch at HOST level, an inlined body in a device function) and
    ``call_dsl`` (a ``pl.*`` / ``pld.*`` name); ``WHERE`` ends its "cannot be called" error."""

    WHERE = "here"

    def __init__(self, prog: CapturedProgram, env: dict[str, Any], dims: Mapping[str, int],
                 fn: CapturedFunction | None = None) -> None:
        self.prog = prog
        self.closure: Mapping[str, Any] = fn.closure if fn is not None else prog.closure
        """The names the body sees beyond its locals: its function's module and enclosing scopes."""
        self.env = env
        self.dims = dims
        """The dynamic dims bound at call time: ``pl.dynamic`` values in the closure evaluate to them."""
        self.own_dims = False
        """A called function's dims (a dict of its own): ``bind_dynamic`` binds its name to this call's
        extent instead of checking the caller's binding."""
        self.lhs: str | None = None

    def error(self, message: str, node: ast.AST) -> FrontendError:
        return self.prog.error(message, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.env:
            return self.env[name]
        if name in self.closure:
            value = self.closure[name]
            if isinstance(value, (DynVar, DynExpr)):
                try:
                    return value.evaluate(self.dims)
                except KeyError:
                    raise self.error(f"dynamic dim {value!r} is not bound by the host tensors' shapes",
                                     node) from None
            return value
        if name in _BUILTINS:
            return _BUILTINS[name]
        raise self.error(f"unknown name {name!r}", node)

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            raise self.error(f"unsupported expression {type(node).__name__} "
                             f"({ast.unparse(node)!r}) in a pypto program", node)
        return method(node)

    # -- statements: ``stmt_<Kind>``, as ``eval_<Kind>`` for expressions --------------------------------

    def stmt(self, s: ast.stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise self.error(f"unsupported statement {type(s).__name__} {self.WHERE}", s)
        method(s)

    def stmt_Expr(self, s: ast.Expr) -> None:
        if not isinstance(s.value, ast.Constant):  # a docstring or a bare literal does nothing
            self.eval(s.value)

    def stmt_Assign(self, s: ast.Assign | ast.AnnAssign) -> None:
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        # The name being bound, while its value is evaluated: it names what the value allocates.
        self.lhs = targets[0].id if isinstance(targets[0], ast.Name) and targets[0].id != "_" else None
        value = self.eval(s.value) if s.value is not None else None
        self.lhs = None
        for t in targets:
            self.assign(t, value)

    stmt_AnnAssign = stmt_Assign

    def stmt_Pass(self, s: ast.Pass) -> None:
        return None

    def stmt_For(self, s: ast.For) -> None:
        self.loop(s)

    def stmt_If(self, s: ast.If) -> None:
        self.branch(s)

    def loop(self, s: ast.For) -> None:
        raise self.error(f"a for loop cannot be used {self.WHERE}", s)

    def branch(self, s: ast.If) -> None:
        raise self.error(f"an if cannot be used {self.WHERE}", s)

    def assign(self, target: ast.expr, value: Any) -> None:
        """Bind ``target`` (a name, or a tuple of targets unpacking a tuple value) to ``value``."""
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        elif isinstance(target, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value, strict=True):
                self.assign(t, v)
        else:
            raise self.error(f"cannot assign {type(value).__name__} to {ast.unparse(target)!r} {self.WHERE}", target)

    def bind(self, name: str, value: Any) -> None:
        self.env[name] = value

    def eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def eval_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        meta = self.tensor_meta(base, node.attr, node)
        if meta is not None:
            return meta
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise self.error(f"{ast.unparse(node)}: no attribute {node.attr!r}", node) from None

    def eval_List(self, node: ast.List) -> list[Any]:
        return [self.eval(e) for e in node.elts]

    def eval_ListComp(self, node: ast.ListComp) -> list[Any]:
        """``[e for x in <static iterable> if c]`` (pypto-lib's ``deps=[tids[g] for g in range(G)]``): Python
        unrolls it as pypto's parser does; the loop names are bound only while it runs."""
        out: list[Any] = []
        self._comprehend(node, list(node.generators), out)
        return out

    def _comprehend(self, node: ast.ListComp, gens: list[ast.comprehension], out: list[Any]) -> None:
        if not gens:
            out.append(self.eval(node.elt))
            return
        gen = gens[0]
        items = self.eval(gen.iter)
        if gen.is_async or not isinstance(gen.target, ast.Name) or not isinstance(items, (range, list, tuple)):
            raise self.error(f"a list comprehension over a static range, list or tuple with one loop name "
                             f"({ast.unparse(node)!r})", node)
        name, saved = gen.target.id, self.env.get(gen.target.id, _UNBOUND)
        try:
            for item in items:
                self.env[name] = item
                if all(self.eval(c) for c in gen.ifs):
                    self._comprehend(node, gens[1:], out)
        finally:
            if saved is _UNBOUND:
                self.env.pop(name, None)
            else:
                self.env[name] = saved

    def eval_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.eval(e) for e in node.elts)

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, ast.USub):
            return self.negate(value, node)
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Not):
            return self.logical_not(value, node)
        raise self.error(f"unsupported unary operator in {ast.unparse(node)!r}", node)

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node.op, self.eval(node.left), self.eval(node.right), node)

    def eval_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.error(f"chained comparison {ast.unparse(node)!r}: write one comparison at a time", node)
        return self.compare(node.ops[0], self.eval(node.left), self.eval(node.comparators[0]), node)

    def eval_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.eval(v) for v in node.values]
        out = values[0]
        for v in values[1:]:
            out = self.logical(isinstance(node.op, ast.And), out, v, node)
        return out

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        return self.subscript(self.eval(node.value), node)

    def subscript(self, base: Any, node: ast.Subscript) -> Any:
        """``base[...]`` once ``base`` is evaluated (the device level reads tensors' regions here)."""
        index = self.eval(node.slice)
        try:
            return base[index]
        except (TypeError, IndexError, KeyError) as err:
            raise self.error(f"{ast.unparse(node)}: {err}", node) from None

    # -- operators (the device level extends these to IR expressions) -----------------------------

    def eval_Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return self.call_self(node, func.attr)
        if isinstance(func, ast.Attribute) and func.attr == "bind_dynamic":
            return self.bind_dynamic(node, func)
        callee = self.eval(func)
        if isinstance(callee, DslOp):
            return self.call_dsl(callee.name, node)
        name = self.prog.function_named(callee)
        if name is not None:  # a pl.jit function called by its bare name: pypto's `self.<name>(...)`
            return self.call_self(node, name)
        if callable(callee) and (isinstance(getattr(callee, "__self__", None), PyDType) or callee in _PY_CALLABLES):
            return callee(*[self.eval(a) for a in node.args])
        raise self.error(f"{ast.unparse(func)} cannot be called {self.WHERE}", node)

    def call_self(self, node: ast.Call, name: str) -> Any:
        raise self.error(f"self.{name}(...) cannot be called {self.WHERE}", node)

    def tensor_shape(self, value: Any) -> tuple[int, ...] | None:
        """The shape of a tensor value of this level (ints; ``NR``-aware where symbolic), or None."""
        return None

    def tensor_meta(self, value: Any, attr: str, node: ast.AST) -> Any:
        """``t.shape`` / ``t.dtype`` of a tensor value, as pypto's ``pl.jit`` specializer folds them into
        literals; None when ``value`` is not a tensor or ``attr`` is neither."""
        if attr not in ("shape", "dtype"):
            return None
        shape = self.tensor_shape(value)
        if shape is None:
            return None
        if attr == "shape":
            return shape
        return dtype_of_ir(value.type.dtype if hasattr(value, "type") else value.dtype.ir)

    def dynamic_dim(self, node: ast.expr) -> Any:
        """A ``pl.dynamic`` value: its bound extent, or the unbound :class:`DynVar` itself (a dim that
        only ``bind_dynamic`` declares has no other binding)."""
        value = self.closure.get(node.id) if isinstance(node, ast.Name) and node.id not in self.env else None
        if isinstance(value, DynVar) and value.name not in self.dims:
            return value
        return self.eval(node)

    def bind_dynamic(self, node: ast.Call, func: ast.Attribute) -> None:
        """``t.bind_dynamic(i, M)``: pypto's specializer deletes the statement (``M`` is bound from the
        shapes already); checked here: a tensor, a dim index in range, a ``pl.dynamic`` name whose bound
        extent is that dim's."""
        shape = self.tensor_shape(self.eval(func.value))
        args = [self.eval(a) if i == 0 else self.dynamic_dim(a) for i, a in enumerate(node.args)]
        if shape is None or len(args) != 2 or not isinstance(args[0], int) or not 0 <= args[0] < len(shape):
            raise self.error(f"{ast.unparse(node)}: bind_dynamic(dim, pl.dynamic(...)) takes a dim index of a "
                             "tensor and a dynamic dim", node)
        declared = self.closure.get(node.args[1].id) if isinstance(node.args[1], ast.Name) else None
        if self.own_dims and isinstance(declared, DynVar) and isinstance(self.dims, dict):
            # pypto specialises a dependency from its call's arguments: the dim it declares dynamic is its
            # own variable, whatever the caller bound a dim of that name to
            self.dims[declared.name] = shape[args[0]]
            return None
        if isinstance(args[1], int) and args[1] != shape[args[0]]:
            raise self.error(f"{ast.unparse(node)}: dim {args[0]} is {shape[args[0]]}, the dynamic dim is "
                             f"bound to {args[1]}", node)
        return None

    def call_dsl(self, name: str, node: ast.Call) -> Any:
        raise self.error(f"{name} cannot be called {self.WHERE}", node)

    def callee_function(self, node: ast.Call, name: str) -> CapturedFunction:
        """``self.name``: an Orchestration or InCore function of the program (HOST functions are not called)."""
        fn = self.prog.functions.get(name)
        if fn is None or fn.kind in HOST_LEVEL:
            what = "a SubWorker, which only the HOST orchestrator calls" if fn is not None and fn.kind is \
                Kind.SUB_WORKER else "not an Orchestration or InCore function of the program"
            raise self.error(f"self.{name} is {what}", node)
        return fn

    def operator(self, table: Mapping[type, Callable[[Any, Any], Any]], op: ast.AST, what: str,
                 node: ast.AST) -> Callable[[Any, Any], Any]:
        """The Python function of ``op`` in ``table``; an unsupported ``what`` at ``node`` otherwise."""
        fn = table.get(type(op))
        if fn is None:
            raise self.error(f"unsupported {what} in {ast.unparse(node)!r}", node)
        return fn

    def binary(self, op: ast.operator, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        fn = self.operator(_BINOPS, op, "operator", node)
        try:
            return fn(lhs, rhs)
        except (TypeError, ZeroDivisionError) as err:
            raise self.error(f"{ast.unparse(node)}: {err}", node) from None

    def compare(self, op: ast.cmpop, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        fn = self.operator(_CMPOPS, op, "comparison", node)
        try:
            return fn(lhs, rhs)
        except TypeError:
            raise self.error(f"cannot compare {type(lhs).__name__} and {type(rhs).__name__} in "
                             f"{ast.unparse(node)!r}: host control flow must not depend on tensor data", node) from None

    def logical(self, is_and: bool, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        return (lhs and rhs) if is_and else (lhs or rhs)

    def negate(self, value: Any, node: ast.AST) -> Any:
        """``-value``."""
        return self.binary(ast.Sub(), 0, value, node)

    def logical_not(self, value: Any, node: ast.AST) -> Any:
        return not value


class Evaluates(Protocol):
    """What binding a call's arguments needs: evaluating them, and erring at the user's line."""

    def error(self, message: str, node: ast.AST) -> FrontendError: ...

    def eval(self, node: ast.expr) -> Any: ...


def bind_call(ev: Evaluates, node: ast.Call, names: tuple[str, ...], defaults: dict[str, Any],
              what: str) -> dict[str, Any]:
    """Bind a call's positional and keyword arguments to ``names`` (pypto's signature of ``what``)."""
    out: dict[str, Any] = {}
    if len(node.args) > len(names):
        raise ev.error(f"{what} takes at most {len(names)} positional arguments, got {len(node.args)}", node)
    for name, arg in zip(names, node.args, strict=False):
        out[name] = ev.eval(arg)
    for kw in node.keywords:
        if kw.arg is None or (kw.arg not in names and kw.arg not in defaults):
            raise ev.error(f"{what}: unknown keyword argument {kw.arg!r}", kw)
        if kw.arg in out:
            raise ev.error(f"{what}: argument {kw.arg!r} given twice", kw)
        out[kw.arg] = ev.eval(kw.value)
    for name in names:
        if name not in out:
            if name not in defaults:
                raise ev.error(f"{what}: missing argument {name!r}", node)
            out[name] = defaults[name]
    for name, value in defaults.items():
        out.setdefault(name, value)
    return out


def dotted(node: ast.expr) -> str:
    """``pld.system.notify`` for the callee of a call (text, for messages)."""
    return ast.unparse(node)


__all__ = ["Evaluates", "Evaluator", "bind_call", "dotted", "dsl_callee"]
