"""pypto's asynchronous GM -> L2 prefetch (``pl.prefetch``): a cache hint that changes no tensor's value.

pypto (python/pypto/language/op/prefetch_ops.py, src/ir/op/prefetch/prefetch_async.cpp): ``make_context()``
binds a runtime-owned SDMA workspace, ``async_prefetch(src, ctx)`` starts pulling a flat GM region into L2,
``session(ctx)`` projects the context's session and ``wait(event, session)`` blocks until it lands and
returns a BOOL done flag. A kernel computes the same with or without it, so pldemu translates each to a
handle of the translation (no IR op, nothing at run time) after pypto's checks of its operands, and
``wait`` to ``True``. pldemu has no caches: what a prefetch would save is not modelled.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir.nodes import TensorType, Var, static_int
from pldemu.pypto.translate.evaluator import bind_call
from pldemu.pypto.translate.level import DeviceLevel
from pldemu.pypto.translate.regions import TensorView


@dataclasses.dataclass(frozen=True)
class Handle:
    """A ``PrefetchAsyncContext``, ``AsyncEvent`` or ``AsyncSession`` (``kind``) of one ``make_context``."""

    kind: str
    context: int


def _make_context(tr: DeviceLevel, node: ast.Call) -> Handle:
    bind_call(tr, node, (), {}, "pl.prefetch.make_context")
    return Handle("PrefetchAsyncContext", id(node))


def _handle(tr: DeviceLevel, value: Any, kind: str, name: str, producer: str, node: ast.AST) -> Handle:
    if not (isinstance(value, Handle) and value.kind == kind):
        raise tr.error(f"pypto refuses it: {name} expects a {kind} (output of {producer}), got {value!r}", node)
    return value


def _async_prefetch(tr: DeviceLevel, node: ast.Call) -> Handle:
    """``async_prefetch(src, ctx)``: ``src`` a GM tensor of a static shape whose dims but the last are 1."""
    name = "pl.prefetch.async_prefetch"
    b = bind_call(tr, node, ("src", "ctx"), {}, name)
    ctx = _handle(tr, b["ctx"], "PrefetchAsyncContext", name, "pl.prefetch.make_context", node)
    _check_flat(tr, b["src"], name, node)
    return Handle("AsyncEvent", ctx.context)


def _check_flat(tr: DeviceLevel, src: Any, name: str, node: ast.AST) -> None:
    if isinstance(src, TensorView):
        dims: list[int | None] = list(src.region.extents)
    elif isinstance(src, Var) and isinstance(src.type, TensorType) and src.name not in tr.emit.tensor_slices:
        dims = [static_int(d) for d in src.type.shape]
    else:
        raise tr.error(f"pypto refuses it: {name} expects src to be a GM Tensor (prefetch reads global memory), "
                       f"got {src!r}", node)
    if not dims:
        raise tr.error(f"pypto refuses it: {name} expects src to have rank >= 1, got a rank-0 tensor", node)
    for axis, d in enumerate(dims):
        if d is None:
            raise tr.error(f"pypto refuses it: {name} expects src to have a fully static shape, but dimension "
                           f"{axis} is dynamic; async prefetch needs a compile-time byte extent", node)
        if axis + 1 < len(dims) and d != 1:
            raise tr.error(f"pypto refuses it: {name} expects src to be a flat contiguous logical 1D GM region (all "
                           f"dimensions except the last must be 1), but dimension {axis} is {d}; reshape the "
                           "tensor to [N] or [1, ..., N] before prefetching", node)


def _session(tr: DeviceLevel, node: ast.Call) -> Handle:
    name = "pl.prefetch.session"
    b = bind_call(tr, node, ("ctx",), {}, name)
    ctx = _handle(tr, b["ctx"], "PrefetchAsyncContext", name, "pl.prefetch.make_context", node)
    return Handle("AsyncSession", ctx.context)


def _wait(tr: DeviceLevel, node: ast.Call) -> bool:
    name = "pl.prefetch.wait"
    b = bind_call(tr, node, ("event", "session_handle"), {}, name)
    _handle(tr, b["event"], "AsyncEvent", name, "pl.prefetch.async_prefetch", node)
    _handle(tr, b["session_handle"], "AsyncSession", name, "pl.prefetch.session", node)
    return True


PREFETCH_OPS: Mapping[str, Callable[[DeviceLevel, ast.Call], Any]] = MappingProxyType({
    "pl.prefetch.make_context": _make_context,
    "pl.prefetch.async_prefetch": _async_prefetch,
    "pl.prefetch.session": _session,
    "pl.prefetch.wait": _wait,
})
"""The ``pl.prefetch`` rules (merged into ``translate.ops.DEVICE_OPS``)."""

__all__ = ["PREFETCH_OPS", "Handle"]
