"""The ``torch.*`` functions of the stand-in: factories, joins, comparisons and reductions."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from pldemu.torchlite import dtypes as dt
from pldemu.torchlite.tensor import MaxMin, Scalar, Tensor, _operands, _shape_args, as_array


def _array(shape: Sequence[Any], dtype: dt.dtype | None, fill: Scalar) -> Tensor:
    target = dtype or dt.DEFAULT_FLOAT
    return Tensor(np.full(_shape_args(shape), fill, dtype=target.numpy))


def zeros(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """``zeros(2, 3)`` or ``zeros((2, 3), dtype=torch.int32)``; float32 by default."""
    return _array(size, dtype, 0)


def ones(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    return _array(size, dtype, 1)


def empty(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """As :func:`zeros` (the stand-in's fresh memory is zero, never garbage)."""
    return _array(size, dtype, 0)


def full(size: Sequence[int], fill_value: Scalar, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """The dtype follows the fill value when not given: bool, int64 or float32 (torch's rule)."""
    inferred = dtype or dt.result_dtype([], [], [fill_value])
    return Tensor(np.full(tuple(int(s) for s in size), fill_value, dtype=inferred.numpy))


def _like(t: Tensor, dtype: dt.dtype | None, fill: Scalar) -> Tensor:
    return Tensor(np.full(t._a.shape, fill, dtype=(dtype or t.dtype).numpy))


def zeros_like(t: Tensor, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    return _like(t, dtype, 0)


def ones_like(t: Tensor, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    return _like(t, dtype, 1)


def empty_like(t: Tensor, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    return _like(t, dtype, 0)


def full_like(t: Tensor, fill_value: Scalar, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    return _like(t, dtype, fill_value)


def arange(start: Scalar, end: Scalar | None = None, step: Scalar = 1, *, dtype: dt.dtype | None = None,
           **_: Any) -> Tensor:
    """``arange(n)``, ``arange(a, b[, step])``: int64 for int arguments, float32 if any is a float.

    Elements are ``start + i * step`` computed in float64, then rounded once to the dtype."""
    if end is None:
        start, end = 0, start
    target = dtype or dt.result_dtype([], [], [start, end, step])
    count = builtins.max(0, math.ceil((float(end) - float(start)) / float(step)))
    if isinstance(start, int) and isinstance(step, int):
        return Tensor((start + np.arange(count, dtype=np.int64) * step).astype(target.numpy))
    values = float(start) + np.arange(count, dtype=np.float64) * float(step)
    return Tensor(values.astype(target.numpy))


def tensor(data: Any, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays or a tensor)."""
    if isinstance(data, Tensor):
        return data.to(dtype, copy=True) if dtype is not None else data.clone()
    raw = np.array(data)
    if dtype is None and isinstance(data, np.ndarray):
        dtype = dt.from_numpy_dtype(data.dtype)
    elif dtype is None:
        kind = raw.dtype.kind
        dtype = dt.bool_ if kind == "b" else dt.DEFAULT_INT if kind in "iu" else dt.DEFAULT_FLOAT
    return Tensor(raw.astype(dtype.numpy))


def eye(n: int, m: int | None = None, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """Ones on the diagonal of an ``n`` x ``m`` (default ``n``) tensor, zeros elsewhere; float32 by default."""
    return Tensor(np.eye(int(n), None if m is None else int(m), dtype=(dtype or dt.DEFAULT_FLOAT).numpy))


def linspace(start: Scalar, end: Scalar, steps: int, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end``; float32 by default. Computed as torch's CPU
    kernel does, in the dtype: ``start + step * i`` for the first half, ``end - step * (steps - 1 - i)``
    for the rest, so both ends are exact."""
    target = dtype or dt.DEFAULT_FLOAT
    calc = np.dtype(np.float64) if not target.is_floating_point else np.dtype(_LINSPACE_CALC.get(target, target.numpy))
    if steps == 1:
        return Tensor(np.full(1, start, dtype=target.numpy))
    first, last = calc.type(start), calc.type(end)
    step = (last - first) / calc.type(steps - 1)
    i = np.arange(steps, dtype=calc)
    values = np.where(i < steps // 2, first + step * i, last - step * (calc.type(steps - 1) - i))
    return Tensor(values.astype(target.numpy))


_LINSPACE_CALC = {dt.float16: np.float32, dt.bfloat16: np.float32}
"""Half types step in float32 (torch's opmath type) and round once."""


def frombuffer(buffer: Any, *, dtype: dt.dtype, count: int = -1, offset: int = 0, **_: Any) -> Tensor:
    """A 1-D tensor over ``buffer``'s memory (no copy): ``count`` elements (all by default) from byte
    ``offset``."""
    return Tensor(np.frombuffer(buffer, dtype=dtype.numpy, count=count, offset=offset))


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory."""
    return Tensor(array)


def as_tensor(data: Any, *, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    if isinstance(data, Tensor):
        return data.to(dtype) if dtype is not None else data
    if isinstance(data, np.ndarray) and dtype is None:
        return Tensor(data)
    return tensor(data, dtype=dtype)


def _joined(tensors: Sequence[Tensor]) -> list[np.ndarray]:
    items = list(tensors)
    if not items:
        raise RuntimeError("expected a non-empty list of Tensors")
    target = dt.promote_all(t.dtype for t in items)
    return [t._a.astype(target.numpy, copy=False) for t in items]


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    return Tensor(np.stack(_joined(tensors), axis=dim))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    return Tensor(np.concatenate(_joined(tensors), axis=dim))


concat = cat


def _close_arrays(a: Tensor, b: Tensor) -> tuple[np.ndarray, np.ndarray]:
    if a.dtype != b.dtype:
        raise RuntimeError(f"{a.dtype.name} did not match {b.dtype.name}")
    return a._a.astype(np.float64), b._a.astype(np.float64)


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    x, y = _close_arrays(a, b)
    return Tensor(np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """``|a - b| <= atol + rtol * |b|`` everywhere (broadcast); the dtypes must match, as in torch."""
    return bool(isclose(a, b, rtol, atol, equal_nan)._a.all())


def equal(a: Tensor, b: Tensor) -> bool:
    """Same shape and the same values."""
    return a._a.shape == b._a.shape and bool((a == b)._a.all())


def all(t: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return t.all(dim, keepdim)


def any(t: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return t.any(dim, keepdim)


def sum(t: Tensor, dim: Any = None, keepdim: bool = False, dtype: dt.dtype | None = None) -> Tensor:
    return t.sum(dim, keepdim, dtype)


def prod(t: Tensor, dim: int | None = None, keepdim: bool = False, dtype: dt.dtype | None = None) -> Tensor:
    return t.prod(dim, keepdim, dtype)


def max(t: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor | MaxMin:
    out: Tensor | MaxMin = t.max(dim, keepdim)
    return out


def min(t: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor | MaxMin:
    out: Tensor | MaxMin = t.min(dim, keepdim)
    return out


def abs(t: Tensor) -> Tensor:
    return t.abs()


def remainder(a: Tensor, b: Any) -> Tensor:
    return a.remainder(b)


def add(a: Any, b: Any, *, alpha: Any = 1) -> Tensor:
    return as_tensor(a).add(b, alpha=alpha)


def sub(a: Any, b: Any, *, alpha: Any = 1) -> Tensor:
    return as_tensor(a).sub(b, alpha=alpha)


def mul(a: Any, b: Any) -> Tensor:
    return as_tensor(a) * b


def div(a: Any, b: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``a / b`` (integers give float32), or rounded toward zero (``"trunc"``) or down (``"floor"``) in
    the promoted dtype."""
    return as_tensor(a).div(b, rounding_mode=rounding_mode)


def true_divide(a: Any, b: Any) -> Tensor:
    return as_tensor(a).div(b)


def pow(a: Any, b: Any) -> Tensor:
    """``a ** b``; ``a`` may be a number (``torch.pow(2.0, t)``)."""
    return a ** b if isinstance(b, Tensor) else as_tensor(a) ** b


def fmod(a: Tensor, b: Any) -> Tensor:
    return a.fmod(b)


def eq(a: Tensor, b: Any) -> Tensor:
    return a.eq(b)


def ne(a: Tensor, b: Any) -> Tensor:
    return a.ne(b)


def lt(a: Tensor, b: Any) -> Tensor:
    return a.lt(b)


def le(a: Tensor, b: Any) -> Tensor:
    return a.le(b)


def gt(a: Tensor, b: Any) -> Tensor:
    return a.gt(b)


def ge(a: Tensor, b: Any) -> Tensor:
    return a.ge(b)


def mm(a: Tensor, b: Tensor) -> Tensor:
    return a.mm(b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    return a.bmm(b)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return a @ b


def einsum(equation: str, *operands: Any) -> Tensor:
    """``torch.einsum(equation, *operands)`` (operands also as one list): numpy's einsum on the torch
    result dtype of the operands. Floats are summed in float32 (float64 for float64) and rounded once, as
    torch's CPU kernels accumulate FP16 / BF16; integers are summed in int64 and wrap into the result type
    (the same residue as torch's accumulation in that type)."""
    items = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    if not builtins.all(isinstance(t, Tensor) for t in items):
        raise TypeError("einsum(): operands must be tensors")
    arrays, result = _operands(items)
    wide = (np.float64 if result is dt.float64 else np.float32) if result.is_floating_point else np.int64
    wide_operands: list[Any] = [a.astype(wide) for a in arrays]
    out = np.einsum(equation, *wide_operands)
    return Tensor(np.asarray(out).astype(result.numpy))


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each of ``elements`` (a tensor or a number) is among ``test_elements``: a bool tensor of
    ``elements``' shape (``invert``: is not)."""
    (x, y), _ = _operands([elements, test_elements])
    return Tensor(np.asarray(np.isin(x, y, invert=invert)))


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max occurs in the 1-D non-negative integer ``input`` (at least ``minlength``
    bins): int64 counts, or the sums of ``weights`` (float32 for float32 weights, else float64), as torch."""
    values = as_array(input)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if values.size and values.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor(np.bincount(values, minlength=minlength).astype(np.int64))
    kind = np.float32 if weights.dtype is dt.float32 else np.float64
    return Tensor(np.bincount(values, weights=as_array(weights).astype(np.float64), minlength=minlength).astype(kind))


def maximum(a: Tensor, b: Tensor) -> Tensor:
    return a.max(b)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    return a.min(b)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """``a[i] * b[j]`` of two 1-D tensors, promoted torch's way."""
    for name, t in (("self", a), ("vec2", b)):
        if as_array(t).ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {as_array(t).ndim}-D")
    (x, y), _ = _operands([a, b])
    return Tensor(np.multiply.outer(x, y))


def exp2(t: Tensor) -> Tensor:
    return t.exp2()


def clamp(t: Tensor, min: Any = None, max: Any = None) -> Tensor:
    return t.clamp(min, max)


clip = clamp


@overload
def where(condition: Tensor) -> tuple[Tensor, ...]: ...


@overload
def where(condition: Tensor, a: Any, b: Any) -> Tensor: ...


def where(condition: Tensor, a: Any = None, b: Any = None) -> Tensor | tuple[Tensor, ...]:
    """``where(condition, a, b)``: ``a`` where true, else ``b`` (promoted torch's way).

    ``where(condition)``: the indices of the true elements, one int64 tensor per dimension (torch's
    ``nonzero(as_tuple=True)``)."""
    mask = as_array(condition).astype(bool)
    if a is None and b is None:
        return tuple(Tensor(i.astype(np.int64)) for i in np.nonzero(np.atleast_1d(mask)))
    if a is None or b is None:
        raise TypeError("where() takes a condition alone, or a condition and two values")
    (x, y), _ = _operands([a, b])
    return Tensor(np.where(mask, x, y))


def roll(t: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Elements shifted ``shifts`` places along ``dims`` (the flattened tensor when None), wrapping round."""
    return Tensor(np.roll(t._a, shifts, axis=dims))


def flip(t: Tensor, dims: Sequence[int]) -> Tensor:
    return Tensor(np.flip(t._a, axis=tuple(dims)).copy())


def cumsum(t: Tensor, dim: int, *, dtype: dt.dtype | None = None) -> Tensor:
    return Tensor(np.cumsum(t._a, axis=dim, dtype=(dtype or t.dtype).numpy))


def is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


def numel(t: Tensor) -> int:
    return t.numel()


def is_floating_point(t: Tensor) -> bool:
    return t.is_floating_point()


def promote_types(a: dt.dtype, b: dt.dtype) -> dt.dtype:
    return dt.promote(a, b)


def set_num_threads(count: int) -> None:
    """Checked as torch checks it (a positive int), then ignored: the count sizes real torch's
    intra-op thread pool, and the stand-in's numpy work has no such pool."""
    if isinstance(count, builtins.bool) or not isinstance(count, (int, np.integer)):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(count).__name__}")
    if count <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")


__all__ = [
    "abs",
    "add",
    "all",
    "allclose",
    "any",
    "arange",
    "as_tensor",
    "bincount",
    "bmm",
    "cat",
    "clamp",
    "clip",
    "concat",
    "div",
    "einsum",
    "empty",
    "empty_like",
    "eq",
    "equal",
    "exp2",
    "eye",
    "fmod",
    "from_numpy",
    "frombuffer",
    "full",
    "full_like",
    "ge",
    "gt",
    "is_floating_point",
    "is_tensor",
    "isclose",
    "isin",
    "le",
    "linspace",
    "lt",
    "matmul",
    "max",
    "maximum",
    "min",
    "minimum",
    "mm",
    "mul",
    "ne",
    "numel",
    "ones",
    "ones_like",
    "outer",
    "pow",
    "prod",
    "promote_types",
    "remainder",
    "set_num_threads",
    "stack",
    "sub",
    "sum",
    "tensor",
    "true_divide",
    "where",
    "zeros",
    "zeros_like",
]
