"""pypto's compile-time statements: ``pl.static_assert``, ``pl.static_print``, ``pl.func_attr``, ``pl.dump_tag``.

pypto's parser consumes them when it parses a function and emits no IR (``ast_parser.py``:
``_handle_static_assert``, ``_handle_static_print``, ``_handle_dump_tag``; ``dsl_api.func_attr``); pldemu
handles them when it translates the body: an assertion is checked there (its condition must fold to a
Python value, as pypto's must be compile-time evaluable), a print goes to stdout once (every rank's block
translates the body), the attribute dict and the dump mark change no value.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir.nodes import (
    Const,
    ExprOps,
    ScalarType,
    TensorType,
    TileType,
    Var,
    as_expr,
    format_dims,
    format_expr,
)
from pldemu.pypto.capture import Kind
from pldemu.pypto.translate.level import DeviceLevel
from pldemu.pypto.translate.regions import TensorView


def check_static_assert(ev: Any, node: ast.Call) -> None:
    """``pl.static_assert(condition[, "message"])``: the condition must fold when the program is translated (a
    closure value, a shape, a constant) and hold; each refusal in pypto's words, at the line."""
    if not 1 <= len(node.args) <= 2 or node.keywords:
        raise ev.error("pypto refuses it: static_assert() requires 1 or 2 arguments: pl.static_assert(condition) or "
                       "pl.static_assert(condition, 'message')", node)
    msg = ""
    if len(node.args) == 2:
        if not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            raise ev.error("pypto refuses it: static_assert() message must be a string literal", node.args[1])
        msg = node.args[1].value
    value = ev.eval(node.args[0])
    if isinstance(value, Const):
        value = value.value
    if isinstance(value, (ExprOps, TensorView)):
        raise ev.error(f"pypto refuses it: static_assert condition must be compile-time evaluable: "
                       f"`{ast.unparse(node.args[0])}` is a run-time value", node)
    if not value:
        raise ev.error(f"pypto refuses it: static_assert failed{': ' + msg if msg else ''} (condition "
                       f"`{ast.unparse(node.args[0])}` evaluated to {value!r})", node)


def static_print_line(ev: Any, node: ast.Call, file: str) -> str:
    """What ``pl.static_print(...)`` prints, as pypto's parser prints it: string literals as they are, any other
    argument as its value (a variable as ``name: type`` in pldemu's IR text), f-strings with their values
    formatted so."""
    if not node.args:
        raise ev.error("pypto refuses it: static_print() requires at least 1 argument: pl.static_print(variable) or "
                       "pl.static_print('label', variable)", node)
    parts = [_part(ev, a) for a in node.args]
    return f"static_print [{file}:{node.lineno}]: {' '.join(parts)}"


def _part(ev: Any, arg: ast.expr) -> str:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        out = []
        for piece in arg.values:
            if isinstance(piece, ast.FormattedValue):
                if piece.conversion != -1 or piece.format_spec is not None:
                    raise ev.error("pypto refuses it: F-string conversion (!r, !s, !a) and format specs (:.2f) are "
                                   "not supported in static_print", piece)
                out.append(_formatted(ev.eval(piece.value)))
            else:
                out.append(str(getattr(piece, "value", "")))
        return "".join(out)
    return _formatted(ev.eval(arg))


def _type_text(t: Any) -> str:
    """A type as pldemu's IR text names it (pypto prints its own type annotations)."""
    if isinstance(t, TileType):
        valid = f" valid {format_dims(t.valid_shape)}" if t.valid_shape is not None else ""
        return f"tile {t.dtype.value}{list(t.shape)}{valid} in {t.memory.name}"
    if isinstance(t, TensorType):
        return f"tensor {t.dtype.value}{format_dims(t.shape)}"
    return t.dtype.value if isinstance(t, ScalarType) else str(t)


def _formatted(value: Any) -> str:
    if isinstance(value, Var):
        return f"{value.name}: {_type_text(value.type)}"
    if isinstance(value, Const):
        return f"{value.value}: {_type_text(value.type)}"
    if isinstance(value, ExprOps):
        return format_expr(as_expr(value))
    if isinstance(value, TensorView):
        return f"a view of {value.base.name} at {list(value.region.offsets)} of {list(value.region.extents)}"
    return str(value)


def _static_assert(tr: DeviceLevel, node: ast.Call) -> None:
    check_static_assert(tr, node)


def _static_print(tr: DeviceLevel, node: ast.Call) -> None:
    line = static_print_line(tr, node, tr.fn.file)
    if line not in tr.emit.printed:
        tr.emit.printed.add(line)
        print(line)


def _func_attr(tr: DeviceLevel, node: ast.Call) -> None:
    """``pl.func_attr({"key": value, ...})``: pypto's function attributes (a bare name is a parameter reference),
    written before every other statement of the body; they change no value here."""
    body = [s for s in tr.fn.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    prologue = next((i for i, s in enumerate(body) if not _is_func_attr(tr, s)), len(body))
    if not any(isinstance(s, ast.Expr) and s.value is node for s in body[:prologue]):
        raise tr.error("pypto refuses it: pl.func_attr must precede every other statement of the function body "
                       "(its prologue)", node)
    attrs = node.args[0] if len(node.args) == 1 and not node.keywords else None
    if not isinstance(attrs, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                  for k in attrs.keys):
        raise tr.error("pypto refuses it: pl.func_attr takes one dict whose keys are string literals", node)
    for value in attrs.values:
        if isinstance(value, ast.Name) and value.id not in tr.fn.params:
            raise tr.error(f"pypto refuses it: pl.func_attr: a bare name is a parameter reference, and {value.id!r} "
                           f"is not a parameter of {tr.fn.name} (write constants as literals)", value)


def _is_func_attr(tr: DeviceLevel, s: ast.stmt) -> bool:
    return (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
            and s.value.func.attr == "func_attr")


def _dump_tag(tr: DeviceLevel, node: ast.Call) -> Any:
    """``pl.dump_tag(t)``: marks a tensor for simpler's selective dump (no value changes); pypto's rules."""
    if tr.fn.kind not in (Kind.ORCHESTRATION, Kind.INLINE) or tr.emit.tasks.depth:
        raise tr.error("pypto refuses it: pl.dump_tag() is only valid inside an Orchestration or Inline function", node)
    if len(node.args) != 1 or node.keywords:
        raise tr.error("pypto refuses it: pl.dump_tag() takes exactly one positional argument (no keywords)", node)
    if not isinstance(node.args[0], ast.Name):
        raise tr.error("pypto refuses it: pl.dump_tag() argument must be a bare variable name", node)
    value = tr.eval(node.args[0])
    if not (isinstance(value, TensorView) or (isinstance(value, Var) and isinstance(value.type, TensorType))):
        raise tr.error(f"pypto refuses it: pl.dump_tag() argument '{node.args[0].id}' is not a tensor", node)
    return value


def _misplaced(where: str) -> Callable[[DeviceLevel, ast.Call], Any]:
    def rule(tr: DeviceLevel, node: ast.Call) -> Any:
        raise tr.error(f"{ast.unparse(node.func)}(...) is {where}", node)

    return rule


STATIC_OPS: Mapping[str, Callable[[DeviceLevel, ast.Call], Any]] = MappingProxyType({
    "pl.static_assert": _static_assert, "pl.static_print": _static_print, "pl.func_attr": _func_attr,
    "pl.dump_tag": _dump_tag, "pl.tensor.dump_tag": _dump_tag,
    "pl.cond": _misplaced("the first statement of a pl.while_() loop's body (pypto's parser reads it there only)"),
    "pl.while_": _misplaced("the iterable of a loop: for (x, ...) in pl.while_(init_values=(...,))"),
})
"""The compile-time statements of a device body (merged into ``translate.ops.DEVICE_OPS``)."""

__all__ = ["STATIC_OPS", "check_static_assert", "static_print_line"]
