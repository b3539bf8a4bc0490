"""A ``pl.jit`` function's dependencies and each one's source, as pypto's ``_discover_deps`` finds them.

A dependency is a ``pl.jit`` function a body calls by its bare name (``f(...)``) or as ``self.f(...)``
(pypto-lib relies on the generated class), resolved in the function's module globals merged with its
closure cells, so helpers defined in a factory or imported from another module are found. Which kinds
a caller admits: every caller takes incore / inline / opaque helpers; only a HOST caller also takes
the per-device Orchestrations it dispatches (a ``@pl.jit`` entry never absorbs another). Found
transitively, leaf first, each function once.
"""

from __future__ import annotations

import ast
import collections
import inspect
import linecache
from collections.abc import Iterator, Mapping
from typing import Any

from pldemu.pypto.capture import CapturedFunction, annotation
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.jit.kinds import JitFunctionLike, JitKind, is_jit_function

_HELPERS = frozenset({JitKind.INCORE, JitKind.INLINE, JitKind.OPAQUE})


def closure_of(fn: JitFunctionLike) -> Mapping[str, Any]:
    """The names ``fn``'s body sees: its closure cells over its module's globals."""
    func = fn._func
    cells = dict(zip(func.__code__.co_freevars, (c.cell_contents for c in func.__closure__ or ()), strict=True))
    return collections.ChainMap(cells, func.__globals__)


def source_file(fn: JitFunctionLike) -> str:
    return inspect.getsourcefile(fn._func) or fn._func.__code__.co_filename


def function_node(fn: JitFunctionLike) -> ast.FunctionDef:
    """``fn``'s ``def`` statement, parsed from its file so that every line is the user's (once)."""
    if "node" not in fn._memo:
        fn._memo["node"] = _parse_def(fn)
    node: ast.FunctionDef = fn._memo["node"]
    return node


def _parse_def(fn: JitFunctionLike) -> ast.FunctionDef:
    file = source_file(fn)
    linecache.checkcache(file)
    text = "".join(linecache.getlines(file))
    first = fn._func.__code__.co_firstlineno
    if not text:
        raise FrontendError(f"@pl.jit {fn.__name__}: cannot read the source of {file}", file, first)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == fn._func.__name__ and first in (
                node.lineno, *(d.lineno for d in node.decorator_list)):
            return node
    raise FrontendError(f"@pl.jit {fn.__name__}: its def statement is not found in {file}", file, first)


def _called(node: ast.FunctionDef) -> Iterator[str]:
    """The names a body calls bare (``f(...)``) or on ``self`` (``self.f(...)``), in source order."""
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Name):
            yield n.func.id
        elif isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
            yield n.func.attr


def _admits(caller: JitFunctionLike, callee: JitFunctionLike) -> bool:
    if callee._kind in _HELPERS:
        return True
    return caller._kind is JitKind.HOST and callee._kind is JitKind.ORCHESTRATION


def dependency_order(entry: JitFunctionLike) -> list[JitFunctionLike]:
    """Every function ``entry`` reaches through admitted calls, leaf first, ``entry`` last (once)."""
    if "deps" not in entry._memo:
        entry._memo["deps"] = _discover(entry)
    order: list[JitFunctionLike] = entry._memo["deps"]
    return order


def _discover(entry: JitFunctionLike) -> list[JitFunctionLike]:
    order: list[JitFunctionLike] = []
    seen: set[int] = set()

    def visit(fn: JitFunctionLike, trail: tuple[int, ...]) -> None:
        if id(fn) in seen or id(fn) in trail:
            return
        scope = closure_of(fn)
        for name in _called(function_node(fn)):
            callee = scope.get(name)
            if is_jit_function(callee) and callee is not fn and _admits(fn, callee):
                visit(callee, (*trail, id(fn)))
        seen.add(id(fn))
        order.append(fn)

    visit(entry, ())
    return order


def captured(fn: JitFunctionLike) -> CapturedFunction:
    """``fn`` as a function of a captured program, its annotations as written (once)."""
    if "captured" not in fn._memo:
        fn._memo["captured"] = _capture(fn)
    found: CapturedFunction = fn._memo["captured"]
    return found


def _capture(fn: JitFunctionLike) -> CapturedFunction:
    node = function_node(fn)
    file = source_file(fn)
    scope = closure_of(fn)
    signature = inspect.signature(fn._func)
    anns = {k: annotation(v, scope, file, node) for k, v in fn._func.__annotations__.items() if k != "return"}
    defaults = {p.name: p.default for p in signature.parameters.values() if p.default is not inspect.Parameter.empty}
    params = tuple(p for p in signature.parameters if p != "self")
    return CapturedFunction(fn.__name__, fn._kind.kind, node, params, anns, file, scope, defaults)


__all__ = ["captured", "closure_of", "dependency_order", "function_node", "source_file"]
