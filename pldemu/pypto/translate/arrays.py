"""pypto's on-core scalar arrays (``pl.array``): a LOCAL ``[extent]`` buffer of the rank.

``pl.array.create(extent, dtype)`` is a small C-stack array on the AI core (pypto:
python/pypto/language/op/array_ops.py, src/ir/op/array_ops/memory.cpp). Its IR is SSA-functional
(``arr[i] = v`` is ``arr = array.update_element(arr, i, v)``) and pypto's code generator lowers each chain
of updates back to in-place stores; pldemu keeps the in-place form: the array is a LOCAL ``[extent]`` tensor
of the rank (one per ``create`` site, in the rank's block; a fresh ``tensor.create`` each time it runs in a
task's body, whose blocks each have their own, or in a loop), ``arr[i]`` a ``tensor.read`` and ``arr[i] = v``
a ``tensor.write`` (existing IR ops: the signature table checks the index's region, the precheck counts the
buffer). pypto leaves the initial contents undefined; pldemu's array starts poisoned each run (the dtype's minimum,
as every fresh LOCAL buffer: ``RuntimeOptions.poison``; zero with it off), so a counter read before it is zeroed
shows as a wild value rather than the zero a lucky device stack might hold.
"""

from __future__ import annotations

import ast
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import INVALID_TASK, Const, ScalarType, TensorType, Var, as_expr
from pldemu.pypto.translate.evaluator import bind_call
from pldemu.pypto.translate.level import DeviceLevel, fresh_buffers
from pldemu.pypto.types import TASK_ID, PyDType

ELEMENT_DTYPES = frozenset({DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32,
                            DType.INT64, DType.INDEX, DType.BOOL})
"""pypto's deducer: an integer type, BOOL or TASK_ID (pldemu's TASK_ID is an INT64)."""


def is_array(tr: DeviceLevel, value: Any) -> bool:
    """Whether ``value`` is an array ``pl.array.create`` made."""
    return isinstance(value, Var) and value.name in tr.emit.arrays


def create(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.array.create(extent, dtype)``: a fresh LOCAL ``[extent]`` buffer (pypto's deducer: a positive
    compile-time extent; an integer, BOOL or TASK_ID element type)."""
    name = "pl.array.create"
    b = bind_call(tr, node, ("extent", "dtype"), {}, name)
    extent, dtype = b["extent"], b["dtype"]
    if isinstance(extent, Const) and isinstance(extent.value, int):
        extent = extent.value
    if isinstance(extent, bool) or not isinstance(extent, int):
        raise tr.error(f"pypto refuses it: array.create extent must be a compile-time ConstInt, got {extent!r}", node)
    if extent <= 0:
        raise tr.error(f"pypto refuses it: array.create extent must be positive, got {extent}", node)
    if not isinstance(dtype, PyDType) or dtype.ir not in ELEMENT_DTYPES:
        got = dtype.name if isinstance(dtype, PyDType) else repr(dtype)
        raise tr.error(f"pypto refuses it: array.create dtype must be integer, BOOL, or TASK_ID, got {got}", node)
    if fresh_buffers(tr.emit, bool(tr.emit.tasks.depth)):
        # each block of a task has its own (its core's), each iteration of a loop its own: see fresh_buffers
        arr = tr.fb.pld.tensor.create([extent], dtype.ir, hint=tr.hint("array"))
    else:
        arr = Var(tr.fb.fresh(tr.hint("array")), TensorType(dtype.ir, (Const(extent),)))
        tr.emit.scratch[arr.name] = (arr, (extent,))
    tr.emit.arrays.add(arr.name)
    if dtype is TASK_ID:
        _fill_invalid(tr, arr, extent, node)
    return arr


def _fill_invalid(tr: DeviceLevel, arr: Var, extent: int, node: ast.AST) -> None:
    """pypto fills a TASK_ID array with the invalid id where it is made (not the poison of other arrays):
    a slot not written yet is no edge of a ``deps=[arr]``."""
    tr.emit.task_arrays.add(arr.name)
    for i in range(extent):
        write(tr, arr, i, Const(INVALID_TASK, TASK_ID.ir), node)


def extent_of(arr: Var) -> int:
    """A ``pl.array``'s number of slots (a compile-time constant: ``create`` checks it)."""
    assert isinstance(arr.type, TensorType)
    extent = arr.type.shape[0]
    assert isinstance(extent, Const) and isinstance(extent.value, int)
    return extent.value


def is_task_array(tr: DeviceLevel, value: Any) -> bool:
    """Whether ``value`` is a ``pl.array.create(n, pl.TASK_ID)`` array (its slots: task ids)."""
    return isinstance(value, Var) and value.name in tr.emit.task_arrays


def _array(tr: DeviceLevel, value: Any, name: str, node: ast.AST) -> Var:
    if not is_array(tr, value):
        raise tr.error(f"{name}: the first argument must be a pl.array (pl.array.create), got {value!r}", node)
    assert isinstance(value, Var)
    return value


def _index(tr: DeviceLevel, index: Any, name: str, node: ast.AST) -> Any:
    """The element index: a Python int or an integer device scalar (pypto's deducer)."""
    if isinstance(index, bool) or not (isinstance(index, int) or _int_scalar(index)):
        raise tr.error(f"pypto refuses it: {name} index must have integer dtype, got {index!r}", node)
    return index


def _int_scalar(v: Any) -> bool:
    t = getattr(v, "type", None)
    return isinstance(t, ScalarType) and t.dtype.is_int


def read(tr: DeviceLevel, arr: Var, index: Any, node: ast.AST, name: str = "array.get_element") -> Any:
    """``arr[i]``: the element, a scalar of the array's dtype."""
    return tr.fb.pld.tensor.read(arr, [_index(tr, index, name, node)])


def write(tr: DeviceLevel, arr: Var, index: Any, value: Any, node: ast.AST,
          name: str = "array.update_element") -> Var:
    """``arr[i] = v``: the element replaced in place (pypto's functional update, as its code generator lowers
    it). The value's dtype must be the element dtype, or INDEX against an integer array (pypto's rule)."""
    dtype = arr.type.dtype if isinstance(arr.type, TensorType) else DType.INT32
    if isinstance(value, Const) and value.type.dtype.is_int and dtype.is_int:
        value = value.value  # a typed constant (pl.const, a scalar parameter's value) stored as a literal
    if isinstance(value, (bool, int)):
        value = _literal(tr, value, dtype, name, node)
    t = getattr(value, "type", None)
    have = t.dtype if isinstance(t, ScalarType) else None
    ok = have is dtype or (dtype.is_int and have is DType.INDEX) or (dtype is DType.INDEX and have is not None
                                                                       and have.is_int)
    if not ok:
        raise tr.error(f"pypto refuses it: {name} value dtype ({have.value if have else repr(value)}) must match "
                       f"array dtype ({dtype.value})", node)
    tr.fb.pld.tensor.write(arr, [_index(tr, index, name, node)], as_expr(value))
    return arr


def _literal(tr: DeviceLevel, value: int, dtype: DType, name: str, node: ast.AST) -> Const:
    """A Python int stored into the array: a constant of its dtype (pypto wraps it as ``ConstInt(v, dtype)``);
    one the dtype cannot hold is refused."""
    if dtype is DType.BOOL:
        if value not in (0, 1):
            raise tr.error(f"{name}: {value} is not a BOOL", node)
        return Const(bool(value), DType.BOOL)
    lo, hi = dtype.int_range()
    if not lo <= value <= hi:
        raise tr.error(f"{name}: {value} is not a value of the array's {dtype.value}", node)
    return Const(int(value), dtype)


def copy(tr: DeviceLevel, dst: Var, src: Var, node: ast.AST) -> None:
    """``dst``'s slots replaced by ``src``'s (a loop carry yielded as another array of the same extent and
    dtype: pypto's arrays are values, so the next iteration sees ``src``'s contents under ``dst``'s name)."""
    if dst.type != src.type:
        raise tr.error(f"pl.yield_: the carried pl.array {dst.name} ({dst.type}) yielded as {src.name} "
                       f"({src.type}): pypto requires the same extent and dtype", node)
    for i in range(extent_of(dst)):
        tr.fb.pld.tensor.write(dst, [i], as_expr(read(tr, src, i, node)))


def get_element(tr: DeviceLevel, node: ast.Call) -> Any:
    """``pl.array.get_element(array, index)``."""
    name = "pl.array.get_element"
    b = bind_call(tr, node, ("array", "index"), {}, name)
    return read(tr, _array(tr, b["array"], name, node), b["index"], node, name)


def update_element(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.array.update_element(array, index, value)``: the array, its element replaced."""
    name = "pl.array.update_element"
    b = bind_call(tr, node, ("array", "index", "value"), {}, name)
    return write(tr, _array(tr, b["array"], name, node), b["index"], b["value"], node, name)


__all__ = ["ELEMENT_DTYPES", "copy", "create", "extent_of", "get_element", "is_array", "is_task_array", "read", "update_element", "write"]
