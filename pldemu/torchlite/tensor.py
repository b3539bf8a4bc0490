"""``torch.Tensor`` of the stand-in: a thin wrapper over one numpy array, with torch's semantics.

The wrapper never copies behind the caller's back: indexing with ints and slices, ``view``,
``reshape`` of a contiguous tensor, ``permute``, ``unsqueeze``, ``expand`` and ``numpy()`` share the
array, exactly as torch's views share storage. That is the write-back contract of a compiled pypto
call: it writes its Out / InOut results into ``tensor.numpy()`` (``np.asarray(tensor)`` is the same
array), so the caller's tensor, and every view of it, sees them. Results follow torch's dtype rules
(:mod:`.dtypes`), not numpy's.
"""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from pldemu.torchlite import dtypes as dt

Scalar = bool | int | float
_CALC_FLOAT = {dt.float16: np.float32, dt.bfloat16: np.float32}
"""Half types are reduced in float32 and rounded once, as torch does on the CPU."""


class MaxMin(NamedTuple):
    """What ``max(dim=)`` / ``min(dim=)`` return: ``.values`` and ``.indices``."""

    values: Tensor
    indices: Tensor


@dataclass(frozen=True, init=False)
class device:
    """``torch.device``: ``device("cpu")``, ``device("cuda", 0)``, ``device("cuda:0")`` or a copy of a device
    (only the cpu holds the stand-in's tensors; the others are names a golden may pass around)."""

    type: str
    index: int | None

    def __init__(self, spec: str | device, index: int | None = None) -> None:
        if isinstance(spec, device):
            index = spec.index if index is None else index
            spec = spec.type
        kind, _, number = spec.partition(":")
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", int(number) if number else index)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


@dataclass(frozen=True)
class _Storage:
    """What ``Tensor.untyped_storage()`` gives: the start address and size in bytes of the memory."""

    address: int
    nbytes_: int

    def data_ptr(self) -> int:
        return self.address

    def nbytes(self) -> int:
        return self.nbytes_


class Size(tuple[int, ...]):
    """``torch.Size``: a tuple of ints with ``numel()``."""

    def numel(self) -> int:
        return int(np.prod(self, dtype=np.int64))

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"


def _shape_args(shape: Sequence[Any]) -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(torch.Size(...))`` all mean shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)


def _dim(dim: int, ndim: int) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                         f"{max(ndim, 1) - 1}], but got {dim})")
    return dim % max(ndim, 1)


def _expand_error(have: tuple[int, ...], want: tuple[int, ...]) -> RuntimeError:
    """torch's message for an ``expand`` to a shape the tensor does not broadcast to."""
    lead = len(want) - len(have)
    if lead < 0:
        return RuntimeError(f"expand: the number of sizes provided ({len(want)}) must be greater or equal to the "
                            f"number of dimensions in the tensor ({len(have)})")
    dim = next((i + lead for i, n in enumerate(have) if n not in (1, want[i + lead])), None)
    if dim is None:  # every size matches: a negative one other than -1 is what numpy refused
        return RuntimeError(f"expand: invalid target sizes {list(want)}")
    return RuntimeError(f"The expanded size of the tensor ({want[dim]}) must match the existing size "
                        f"({have[dim - lead]}) at non-singleton dimension {dim}.  Target sizes: {list(want)}.  "
                        f"Tensor sizes: {list(have)}")


def _index(key: Any) -> Any:
    """A torch index with tensors in it, as a numpy index."""
    if isinstance(key, Tensor):
        return key._a
    if isinstance(key, tuple):
        return tuple(k._a if isinstance(k, Tensor) else k for k in key)
    return key


def _cast(a: np.ndarray, to: dt.dtype) -> np.ndarray:
    return a if a.dtype == to.numpy else a.astype(to.numpy)


def _operands(values: Sequence[Any]) -> tuple[list[np.ndarray], dt.dtype]:
    """Every operand as an array of the torch result dtype."""
    dims = [v.dtype for v in values if isinstance(v, Tensor) and v._a.ndim > 0]
    zero = [v.dtype for v in values if isinstance(v, Tensor) and v._a.ndim == 0]
    scalars = [v for v in values if not isinstance(v, Tensor)]
    result = dt.result_dtype(dims, zero, scalars)
    arrays = [_cast(v._a, result) if isinstance(v, Tensor) else np.asarray(v, dtype=result.numpy) for v in values]
    return arrays, result


def _binary(fn: Callable[..., Any], a: Any, b: Any, *, floating: bool = False) -> Tensor:
    """``fn`` on two operands promoted torch's way (``floating``: an int result becomes float32)."""
    if not isinstance(b, (Tensor, bool, int, float, np.number, np.bool_)):
        return NotImplemented
    (x, y), result = _operands([a, b])
    if floating and not result.is_floating_point:
        x, y, result = x.astype(np.float32), y.astype(np.float32), dt.float32
    out = fn(x, y)
    return Tensor(np.asarray(out))


def _compare(fn: Callable[..., Any], a: Any, b: Any) -> Tensor:
    if not isinstance(b, (Tensor, bool, int, float, np.number, np.bool_)):
        return NotImplemented
    (x, y), _ = _operands([a, b])
    return Tensor(np.asarray(fn(x, y)))


def _inplace(fn: Callable[..., Any], a: Tensor, b: Any) -> Tensor:
    """``a op= b``: computed in the promoted type, then stored into ``a`` if that loses no category."""
    (x, y), result = _operands([a, b])
    if result.category > a.dtype.category:
        raise RuntimeError(f"result type {result.name} can't be cast to the desired output type {a.dtype.name}")
    a._a[...] = np.asarray(fn(x, y)).astype(a._a.dtype)
    return a


def _matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x @ y`` in the operands' (common) dtype: FP16 / BF16 accumulated in float32 and rounded once, as
    torch's CPU kernels do (and through BLAS: numpy has none for ml_dtypes' bfloat16, whose matmul is an
    element loop)."""
    wide = _CALC_FLOAT.get(dt.from_numpy_dtype(x.dtype))
    if wide is None:
        return np.matmul(x, y)
    return np.matmul(x.astype(wide), y.astype(wide)).astype(x.dtype)


def _check_matmul(name: str, a: Tensor, b: Tensor, ndim: builtins.int) -> None:
    """torch's checks of ``mm`` (``ndim`` 2) / ``bmm`` (3): no broadcasting, one dtype, inner sizes equal."""
    for which, t in (("self", a), ("mat2", b)):
        if t.ndim != ndim:
            raise RuntimeError(f"{which} must be a {ndim}D tensor")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}")
    batch_ok = ndim == 2 or a.shape[0] == b.shape[0]
    if not batch_ok or a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"{name}: Expected size for first two dimensions of batch2 tensor to match, got "
                           f"{list(a.shape)} and {list(b.shape)}" if ndim == 3 else
                           f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")


def _int_quotient(x: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """Integer division rounded toward zero (``trunc``) or down (``floor``); torch refuses a zero divisor."""
    if np.any(y == 0):
        raise RuntimeError("ZeroDivisionError")
    q = np.floor_divide(x, y)
    if mode == "trunc":  # floor is one below trunc where the exact quotient is negative and inexact
        q = q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))
    return np.asarray(q, x.dtype)


_ROUNDED_DIVISION: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "trunc": lambda x, y: np.trunc(x / y),
    "floor": np.floor_divide,  # Python's float floor division (fmod-based), which torch's kernel follows
}
"""``div(rounding_mode=)`` on floats, computed in float32 for FP16 / BF16 and rounded once, as torch."""


def _divide(a: Any, b: Any, rounding_mode: str | None) -> Tensor:
    """torch.div: true division (float32 for integers) or the quotient rounded in the promoted dtype."""
    if rounding_mode is None:
        return _binary(np.true_divide, a, b, floating=True)
    if rounding_mode not in _ROUNDED_DIVISION:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    (x, y), result = _operands([a, b])
    if not result.is_floating_point:
        return Tensor(_int_quotient(x, y, rounding_mode))
    wide = _CALC_FLOAT.get(result, x.dtype)
    with np.errstate(all="ignore"):
        out = _ROUNDED_DIVISION[rounding_mode](x.astype(wide), y.astype(wide))
    return Tensor(np.asarray(out).astype(result.numpy))


def _fmod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's fmod (the dividend's sign); an integer zero divisor is torch's ZeroDivisionError."""
    if x.dtype.kind in "iub" and np.any(y == 0):
        raise RuntimeError("ZeroDivisionError")
    wide = _CALC_FLOAT.get(dt.from_numpy_dtype(x.dtype), x.dtype)
    with np.errstate(all="ignore"):
        return np.asarray(np.fmod(x.astype(wide), y.astype(wide))).astype(x.dtype)


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function element by element (math.erf: numpy has none, and scipy is not a dependency)."""
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), x.dtype)


def as_array(value: Any) -> np.ndarray:
    """The array of a tensor, or a value as an array (for functions taking tensors or data)."""
    return value._a if isinstance(value, Tensor) else np.asarray(value)


def _float_math(fn: Callable[[np.ndarray], np.ndarray], a: np.ndarray, dtype: dt.dtype) -> Tensor:
    """A float function torch's way: an int or bool tensor gives float32 (the default float); FP16 / BF16
    are computed in float32 and rounded once, as torch's CPU kernels upcast them."""
    target = dtype if dtype.is_floating_point else dt.DEFAULT_FLOAT
    wide = np.float64 if target is dt.float64 else np.float32
    with np.errstate(all="ignore"):
        return Tensor(np.asarray(fn(a.astype(wide))).astype(target.numpy))


_FLOAT_MATH: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "cos": np.cos, "sin": np.sin, "exp": np.exp, "log": np.log, "log2": np.log2, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "reciprocal": lambda x: 1 / x, "erf": _erf,
}
"""torch's float-valued unary functions (an integer input gives float32)."""

_INTEGRAL_MATH: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ceil": np.ceil, "floor": np.floor, "round": np.rint, "trunc": np.trunc,
}
"""Rounding functions: an integer tensor is returned unchanged (a copy), a float one rounds in its dtype
(``round`` is half to even, as torch's)."""


def _uniform_bounds(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[builtins.float, builtins.float]:
    low = kwargs.pop("from", args[0] if args else 0.0)
    high = kwargs.pop("to", args[1] if len(args) > 1 else 1.0)
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={low} > to={high}")
    return builtins.float(low), builtins.float(high)


class Tensor:
    """A torch tensor on the CPU, held as one numpy array (see the module docstring).

    Annotations inside the class spell ``builtins.int`` / ``bool`` / ``float``: the methods named after
    torch's conversions (``int()``, ``bool()``, ``float()``) shadow them in the class scope."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # numpy operands defer to the Tensor's reflected operators

    def __init__(self, array: np.ndarray) -> None:
        dt.from_numpy_dtype(array.dtype)  # refuses dtypes torch has no counterpart of
        self._a = array

    # -- metadata ---------------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._a.shape)

    @property
    def dtype(self) -> dt.dtype:
        return dt.from_numpy_dtype(self._a.dtype)

    @property
    def ndim(self) -> builtins.int:
        return self._a.ndim

    @property
    def device(self) -> str:
        return "cpu"

    def size(self, dim: builtins.int | None = None) -> Size | int:
        return self.shape if dim is None else self._a.shape[_dim(dim, self.ndim)]

    def dim(self) -> builtins.int:
        return self._a.ndim

    def numel(self) -> builtins.int:
        return int(self._a.size)

    def data_ptr(self) -> builtins.int:
        """The address of the first element (what a prepared worker's ``copy_from`` / ``copy_to`` take)."""
        return builtins.int(self._a.ctypes.data)

    def element_size(self) -> builtins.int:
        return int(self._a.itemsize)

    def is_floating_point(self) -> builtins.bool:
        return self.dtype.is_floating_point

    def is_contiguous(self) -> builtins.bool:
        return bool(self._a.flags.c_contiguous)

    # -- conversion -------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The backing array itself (not a copy): writing into it writes into this tensor."""
        return self._a

    def __array__(self, dtype: Any = None, copy: builtins.bool | None = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self._a.dtype:
            return self._a.astype(dtype)
        return self._a.copy() if copy else self._a

    def item(self) -> Scalar:
        if self._a.size != 1:
            raise RuntimeError(f"a Tensor with {self._a.size} elements cannot be converted to Scalar")
        value = self._a.reshape(-1)[0]
        category = self.dtype.category
        return bool(value) if category == 0 else int(value) if category == 1 else float(value)

    def tolist(self) -> Any:
        a = self._a.astype(np.float32) if self.dtype == dt.bfloat16 else self._a
        return a.tolist()

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """``to(dtype)``, ``to("cpu")``, ``to(other_tensor)``, ``to(dtype=..., copy=...)``."""
        target = kwargs.get("dtype")
        for arg in args:
            if isinstance(arg, dt.dtype):
                target = arg
            elif isinstance(arg, Tensor):
                target = arg.dtype
            elif arg not in ("cpu", None) and arg != device("cpu"):
                raise RuntimeError(f"pldemu's torch stand-in only has the cpu device, not {arg!r}")
        if target is None or target == self.dtype:
            return self.clone() if kwargs.get("copy") else self
        return Tensor(self._a.astype(target.numpy))

    def type(self, target: dt.dtype) -> Tensor:
        return self.to(target)

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def half(self) -> Tensor:
        return self.to(dt.float16)

    def bfloat16(self) -> Tensor:
        return self.to(dt.bfloat16)

    def int(self) -> Tensor:
        return self.to(dt.int32)

    def long(self) -> Tensor:
        return self.to(dt.int64)

    def bool(self) -> Tensor:
        return self.to(dt.bool_)

    def clone(self) -> Tensor:
        return Tensor(self._a.copy())

    def detach(self) -> Tensor:
        return self

    def cpu(self) -> Tensor:
        return self

    def share_memory_(self) -> Tensor:
        """Already shared: the stand-in's tensors live in this process and write-back is in place."""
        return self

    def is_shared(self) -> builtins.bool:
        """Always True, where torch says False until ``share_memory_()``: what sharing is for (a compiled
        call's results reaching this tensor) always holds here, so a harness that shares only unshared
        tensors (pypto-lib's ``_share_in_place``) keeps the stand-in's as they are."""
        return True

    def contiguous(self) -> Tensor:
        return self if self._a.flags.c_contiguous else Tensor(np.ascontiguousarray(self._a))

    # -- shape ------------------------------------------------------------------------------------
    def view(self, *shape: Any) -> Tensor:
        """A view with another shape (RuntimeError where torch would need a copy) or another dtype."""
        if len(shape) == 1 and isinstance(shape[0], dt.dtype):
            return Tensor(self._a.view(shape[0].numpy))
        out = self._a.view()
        try:
            out.shape = _shape_args(shape)
        except AttributeError:
            raise RuntimeError("view size is not compatible with input tensor's size and stride; use "
                               ".reshape(...) instead") from None
        return Tensor(out)

    def reshape(self, *shape: Any) -> Tensor:
        return Tensor(self._a.reshape(_shape_args(shape)))

    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Tensor:
        if self.ndim == 0:
            return Tensor(self._a.reshape(1))
        s, e = _dim(start_dim, self.ndim), _dim(end_dim, self.ndim)
        shape = self._a.shape
        return Tensor(self._a.reshape((*shape[:s], -1, *shape[e + 1:])))

    def unsqueeze(self, dim: builtins.int) -> Tensor:
        return Tensor(np.expand_dims(self._a, _dim(dim, self.ndim + 1)))

    def squeeze(self, dim: builtins.int | None = None) -> Tensor:
        if dim is None:
            return Tensor(self._a.squeeze())
        d = _dim(dim, self.ndim)
        return Tensor(self._a.squeeze(d)) if self._a.shape[d] == 1 else self

    def permute(self, *dims: Any) -> Tensor:
        return Tensor(self._a.transpose([_dim(d, self.ndim) for d in _shape_args(dims)]))

    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Tensor:
        return Tensor(np.swapaxes(self._a, _dim(dim0, self.ndim), _dim(dim1, self.ndim)))

    def expand(self, *sizes: Any) -> Tensor:
        """A broadcast view (``-1`` keeps a dimension); write to a ``.contiguous()`` copy."""
        want = _shape_args(sizes)
        lead = len(want) - self.ndim
        shape = tuple(self._a.shape[i - lead] if s == -1 else s for i, s in enumerate(want))
        try:
            return Tensor(np.broadcast_to(self._a, shape))
        except ValueError:
            raise _expand_error(self._a.shape, shape) from None

    def expand_as(self, other: Tensor) -> Tensor:
        """``expand(other.size())``: a broadcast view with ``other``'s shape."""
        return self.expand(other.shape)

    # -- reductions -------------------------------------------------------------------------------
    def _reduce(self, fn: Callable[..., Any], dim: Any, keepdim: builtins.bool, dtype: dt.dtype | None) -> Tensor:
        target = dtype or (dt.int64 if self.dtype.category < 2 else self.dtype)
        calc = _CALC_FLOAT.get(target, target.numpy)
        axis = None if dim is None else tuple(_dim(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list))
                                                                           else (dim,)))
        out = fn(self._a.astype(calc), axis=axis, keepdims=keepdim)
        return Tensor(np.asarray(out).astype(target.numpy))

    def sum(self, dim: Any = None, keepdim: builtins.bool = False, dtype: dt.dtype | None = None) -> Tensor:
        return self._reduce(np.sum, dim, keepdim, dtype)

    def prod(self, dim: builtins.int | None = None, keepdim: builtins.bool = False, dtype: dt.dtype | None = None) -> Tensor:
        return self._reduce(np.prod, dim, keepdim, dtype)

    def mean(self, dim: Any = None, keepdim: builtins.bool = False, dtype: dt.dtype | None = None) -> Tensor:
        if not (dtype or self.dtype).is_floating_point:
            raise RuntimeError(f"mean(): could not infer output dtype; input dtype is {self.dtype.name}, "
                               "use a floating point or complex dtype")
        return self._reduce(np.mean, dim, keepdim, dtype or self.dtype)

    def _extreme(self, pick: Callable[..., Any], arg: Callable[..., Any], dim: Any, keepdim: builtins.bool) -> Any:
        if isinstance(dim, Tensor):  # max(other): element-wise
            return _binary(np.maximum if pick is np.max else np.minimum, self, dim)
        if dim is None:
            if self._a.size == 0:
                raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0")
            return Tensor(np.asarray(pick(self._a)))
        d = _dim(dim, self.ndim)
        values = np.asarray(pick(self._a, axis=d, keepdims=keepdim))
        indices = np.asarray(arg(self._a, axis=d, keepdims=keepdim)).astype(np.int64)
        return MaxMin(Tensor(values), Tensor(indices))

    def max(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
        """``max()``: a 0-d tensor; ``max(dim=)``: ``(values, indices)``; ``max(other)``: element-wise."""
        return self._extreme(np.max, np.argmax, dim, keepdim)

    def min(self, dim: Any = None, keepdim: builtins.bool = False) -> Any:
        """``min()``: a 0-d tensor; ``min(dim=)``: ``(values, indices)``; ``min(other)``: element-wise."""
        return self._extreme(np.min, np.argmin, dim, keepdim)

    def all(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
        axis = None if dim is None else _dim(dim, self.ndim)
        return Tensor(np.asarray(np.all(self._a.astype(bool), axis=axis, keepdims=keepdim)))

    def any(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
        axis = None if dim is None else _dim(dim, self.ndim)
        return Tensor(np.asarray(np.any(self._a.astype(bool), axis=axis, keepdims=keepdim)))

    # -- element-wise -----------------------------------------------------------------------------
    def abs(self) -> Tensor:
        return Tensor(np.abs(self._a))

    def remainder(self, other: Any) -> Tensor:
        """Python's ``%`` (the result has the divisor's sign), as torch.remainder."""
        return _binary(np.mod, self, other)

    def exp2(self) -> Tensor:
        """``2 ** x``; an integer or bool tensor gives float32 (torch's default float). FP16 / BF16 are
        computed in FP32 and rounded once, as torch's CPU kernels upcast them."""
        target = self.dtype if self.dtype.is_floating_point else dt.DEFAULT_FLOAT
        wide = np.float64 if target is dt.float64 else np.float32
        return Tensor(np.exp2(self._a.astype(wide)).astype(target.numpy))

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        """Each element limited to ``[min, max]`` (tensors or numbers, promoted torch's way); a NaN stays NaN;
        where ``min > max`` the result is ``max``, as torch's."""
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        bounds = [b for b in (min, max) if b is not None]
        arrays, result = _operands([self, *bounds])
        out = arrays[0]
        if min is not None:
            out = np.maximum(out, arrays[1])
        if max is not None:
            out = np.minimum(out, arrays[-1])
        return Tensor(np.asarray(out, dtype=result.numpy))

    clip = clamp

    def repeat(self, *sizes: Any) -> Tensor:
        """The tensor tiled ``sizes[i]`` times along each dim (extra leading sizes add dims), a copy."""
        reps = _shape_args(sizes)
        if len(reps) < self.ndim:
            raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                               "of tensor")
        return Tensor(np.tile(self._a.reshape((1,) * (len(reps) - self.ndim) + self._a.shape), reps))

    def eq(self, other: Any) -> Tensor:
        return _compare(np.equal, self, other)

    def ne(self, other: Any) -> Tensor:
        return _compare(np.not_equal, self, other)

    # -- element-wise math (torch's dtype rules: .ceil of an int tensor is that tensor) ---------------
    def _math(self, name: str) -> Tensor:
        if name in _FLOAT_MATH:
            return _float_math(_FLOAT_MATH[name], self._a, self.dtype)
        if not self.dtype.is_floating_point:
            return Tensor(self._a.copy())
        return Tensor(np.asarray(_INTEGRAL_MATH[name](self._a), self._a.dtype))

    def cos(self) -> Tensor:
        return self._math("cos")

    def sin(self) -> Tensor:
        return self._math("sin")

    def exp(self) -> Tensor:
        return self._math("exp")

    def log(self) -> Tensor:
        return self._math("log")

    def log2(self) -> Tensor:
        return self._math("log2")

    def log1p(self) -> Tensor:
        return self._math("log1p")

    def sqrt(self) -> Tensor:
        return self._math("sqrt")

    def rsqrt(self) -> Tensor:
        return self._math("rsqrt")

    def sigmoid(self) -> Tensor:
        return self._math("sigmoid")

    def reciprocal(self) -> Tensor:
        return self._math("reciprocal")

    def erf(self) -> Tensor:
        return self._math("erf")

    def ceil(self) -> Tensor:
        return self._math("ceil")

    def floor(self) -> Tensor:
        return self._math("floor")

    def round(self, decimals: builtins.int = 0) -> Tensor:
        """Half to even; ``decimals`` scales by ``10 ** decimals`` around it, as torch."""
        if decimals == 0 or not self.dtype.is_floating_point:
            return self._math("round")
        scale = self._a.dtype.type(10.0 ** decimals)
        return Tensor(np.asarray(np.rint(self._a * scale) / scale, self._a.dtype))

    def isnan(self) -> Tensor:
        return Tensor(np.isnan(self._a.astype(np.float32)) if self.dtype.is_floating_point
                      else np.zeros(self._a.shape, bool))

    def isinf(self) -> Tensor:
        return Tensor(np.isinf(self._a.astype(np.float32)) if self.dtype.is_floating_point
                      else np.zeros(self._a.shape, bool))

    def isfinite(self) -> Tensor:
        return Tensor(np.isfinite(self._a.astype(np.float32)) if self.dtype.is_floating_point
                      else np.ones(self._a.shape, bool))

    def amax(self, dim: Any = (), keepdim: builtins.bool = False) -> Tensor:
        """The largest value over ``dim`` (an int, a tuple, or ``()`` for every dim); a NaN propagates."""
        return self._amaxmin(np.max, "amax", dim, keepdim)

    def amin(self, dim: Any = (), keepdim: builtins.bool = False) -> Tensor:
        """The smallest value over ``dim`` (an int, a tuple, or ``()`` for every dim); a NaN propagates."""
        return self._amaxmin(np.min, "amin", dim, keepdim)

    def _amaxmin(self, pick: Callable[..., Any], name: str, dim: Any, keepdim: builtins.bool) -> Tensor:
        dims = (dim,) if isinstance(dim, builtins.int) else tuple(dim)
        axis = tuple(_dim(d, self.ndim) for d in dims) if dims else None
        if self._a.size == 0 and axis is None:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        return Tensor(np.asarray(pick(self._a, axis=axis, keepdims=keepdim)))

    def argmax(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
        """Index of the (first) largest value (a NaN counts as largest), int64; over the flattened tensor
        without ``dim``."""
        return self._arg(np.argmax, dim, keepdim)

    def argmin(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
        """Index of the (first) smallest value (a NaN counts as smallest), int64; over the flattened tensor
        without ``dim``."""
        return self._arg(np.argmin, dim, keepdim)

    def _arg(self, pick: Callable[..., Any], dim: builtins.int | None, keepdim: builtins.bool) -> Tensor:
        if self._a.size == 0 and dim is None:
            raise RuntimeError("argmax/argmin: Expected reduction dim to be specified for input.numel() == 0.")
        if dim is None:  # keepdim keeps every dim as size 1
            return Tensor(np.asarray(pick(self._a, keepdims=keepdim), np.int64))
        return Tensor(np.asarray(pick(self._a, axis=_dim(dim, self.ndim), keepdims=keepdim), np.int64))

    def uniform_(self, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        """Fill in place from U[from, to) (``uniform_(from=0, to=1)``), drawn from ``generator`` or the
        global stream (numpy's numbers, not torch's)."""
        low, high = _uniform_bounds(args, kwargs)
        stream = np.random if generator is None else generator._state
        self._a[...] = (low + (high - low) * stream.random_sample(self._a.shape)).astype(self._a.dtype)
        return self

    def clamp_min(self, min: Any) -> Tensor:
        return self.clamp(min=min)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        """``clamp`` in place (the result stored back in this tensor's dtype)."""
        return self._store(self.clamp(min, max))

    def clamp_min_(self, min: Any) -> Tensor:
        return self.clamp_(min=min)

    def clamp_max_(self, max: Any) -> Tensor:
        return self.clamp_(max=max)

    def _store(self, result: Tensor) -> Tensor:
        """An in-place op's result written back, refused (as torch does) where it would lose a category."""
        if result.dtype.category > self.dtype.category:
            raise RuntimeError(f"result type {result.dtype.name} can't be cast to the desired output type "
                               f"{self.dtype.name}")
        np.copyto(self._a, result._a, casting="unsafe")  # no temporary: model-scale tensors are GBs
        return self

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self + alpha * other``."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self - alpha * other``."""
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other: Any) -> Tensor:
        return self * other

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other`` (integers give float32), or the quotient rounded toward zero (``"trunc"``) or
        down (``"floor"``) in the promoted dtype, as torch.div."""
        return _divide(self, other, rounding_mode)

    def fmod(self, other: Any) -> Tensor:
        """C's fmod: the remainder with the dividend's sign (``remainder`` takes the divisor's)."""
        return _binary(_fmod, self, other)

    def mm(self, mat2: Tensor) -> Tensor:
        """The product of two 2-D tensors of one dtype (no broadcasting), as torch.mm."""
        _check_matmul("mm", self, mat2, 2)
        return Tensor(_matmul(self._a, mat2._a))

    def bmm(self, mat2: Tensor) -> Tensor:
        """Batched products of two 3-D tensors of one dtype and batch size (no broadcasting), as torch.bmm."""
        _check_matmul("bmm", self, mat2, 3)
        return Tensor(_matmul(self._a, mat2._a))

    def lt(self, other: Any) -> Tensor:
        return self < other

    def le(self, other: Any) -> Tensor:
        return self <= other

    def gt(self, other: Any) -> Tensor:
        return self > other

    def ge(self, other: Any) -> Tensor:
        return self >= other

    def relu(self) -> Tensor:
        """``max(x, 0)`` in the tensor's dtype (a NaN stays NaN)."""
        if self.dtype is dt.bool_:
            raise RuntimeError('"clamp_min_scalar_cpu" not implemented for \'Bool\'')
        return Tensor(np.maximum(self._a, self._a.dtype.type(0)))

    def bitwise_not(self) -> Tensor:
        """``~x`` of an integer or bool tensor (logical not for bool)."""
        if self.dtype.is_floating_point:
            raise RuntimeError(f'"bitwise_not_cpu" not implemented for \'{self.dtype.name}\'')
        return Tensor(np.invert(self._a))

    def triu(self, diagonal: builtins.int = 0) -> Tensor:
        """The elements on and above the ``diagonal``-th diagonal of the last two dims, the rest zero."""
        return self._triangle(np.triu, diagonal)

    def tril(self, diagonal: builtins.int = 0) -> Tensor:
        """The elements on and below the ``diagonal``-th diagonal of the last two dims, the rest zero."""
        return self._triangle(np.tril, diagonal)

    def _triangle(self, keep: Callable[..., np.ndarray], diagonal: builtins.int) -> Tensor:
        if self.ndim < 2:
            raise RuntimeError("tril/triu: input tensor must have at least 2 dimensions")
        return Tensor(np.asarray(keep(self._a, diagonal), self._a.dtype))

    def cummin(self, dim: builtins.int) -> MaxMin:
        """Running minimum along ``dim`` and the index each came from: on a tie the later index; a NaN
        replaces the minimum and stays (torch's rule)."""
        return self._running(np.less_equal, dim)

    def cummax(self, dim: builtins.int) -> MaxMin:
        """Running maximum along ``dim`` with indices, ties and NaNs as :meth:`cummin`."""
        return self._running(np.greater_equal, dim)

    def _running(self, takes: Callable[..., np.ndarray], dim: builtins.int) -> MaxMin:
        d = _dim(dim, self.ndim)
        a = np.moveaxis(self._a, d, 0)
        values, indices = a.copy(), np.zeros(a.shape, np.int64)
        for i in range(1, a.shape[0]):
            best = values[i - 1]
            take = np.isnan(a[i]) | (~np.isnan(best) & takes(a[i], best))
            values[i] = np.where(take, a[i], best)
            indices[i] = np.where(take, i, indices[i - 1])
        return MaxMin(Tensor(np.moveaxis(values, 0, d)), Tensor(np.moveaxis(indices, 0, d)))

    def add_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return self._store(self.add(other, alpha=alpha))

    def sub_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return self._store(self.sub(other, alpha=alpha))

    def mul_(self, other: Any) -> Tensor:
        return self._store(self * other)

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return self._store(self.div(other, rounding_mode=rounding_mode))

    def normal_(self, mean: builtins.float = 0.0, std: builtins.float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill in place from N(mean, std²), drawn from ``generator`` or the global stream (numpy's numbers,
        not torch's)."""
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        stream = np.random if generator is None else generator._state
        self._a[...] = (mean + std * stream.standard_normal(self._a.shape)).astype(self._a.dtype)
        return self

    def repeat_interleave(self, repeats: Any, dim: builtins.int | None = None) -> Tensor:
        """Each element repeated ``repeats`` times (an int, or one count per element) along ``dim``; over the
        flattened tensor without ``dim``, as torch."""
        counts = repeats if isinstance(repeats, builtins.int) else as_array(repeats).astype(np.int64)
        if dim is None:
            return Tensor(np.repeat(self._a.reshape(-1), counts))
        return Tensor(np.repeat(self._a, counts, axis=_dim(dim, self.ndim)))

    def scatter_(self, dim: builtins.int, index: Any, src: Any = None, *, value: Any = None) -> Tensor:
        """``self[..., index[i][j], ...] = src[i][j]`` along ``dim`` (``value``: one number everywhere), in
        place; ``index`` may be smaller than ``self`` in every dim, as torch's."""
        if (src is None) == (value is None):
            raise TypeError("scatter_() takes either src or value")
        d = _dim(dim, self.ndim)
        idx = as_array(index).astype(np.int64)
        region = self._a[tuple(slice(None) if i == d else slice(0, n) for i, n in enumerate(idx.shape))]
        if src is None:
            values = np.broadcast_to(np.asarray(value).astype(self._a.dtype), idx.shape)
        else:
            values = as_array(src)[tuple(slice(0, n) for n in idx.shape)].astype(self._a.dtype)
        np.put_along_axis(region, idx, values, axis=d)
        return self

    def scatter(self, dim: builtins.int, index: Any, src: Any = None, *, value: Any = None) -> Tensor:
        """:meth:`scatter_` on a copy."""
        return self.clone().scatter_(dim, index, src, value=value)

    def untyped_storage(self) -> _Storage:
        """The memory this tensor views (shared by every view of one array): its ``data_ptr()`` is where the
        storage starts, which for a view may be before the view's first element."""
        root = self._a
        while isinstance(root.base, np.ndarray):
            root = root.base
        return _Storage(builtins.int(root.ctypes.data), builtins.int(root.nbytes))

    def sign(self) -> Tensor:
        """-1, 0 or 1 by the element's sign (a NaN stays NaN, a bool is itself), in the tensor's dtype."""
        if self.dtype is dt.bool_:
            return self.clone()
        return Tensor(np.sign(self._a.astype(_CALC_FLOAT.get(self.dtype, self._a.dtype))).astype(self._a.dtype))

    def std(self, dim: Any = None, unbiased: builtins.bool | None = None, keepdim: builtins.bool = False, *,
            correction: Any = None) -> Tensor:
        """The standard deviation over ``dim`` (all elements by default) with Bessel's correction unless
        ``unbiased=False`` / ``correction=0``; FP16 / BF16 computed in float32 and rounded once."""
        if not self.dtype.is_floating_point:
            raise RuntimeError(f"std and var only support floating point and complex dtypes, got {self.dtype.name}")
        ddof = (0 if unbiased is False else 1) if correction is None else correction
        return self._reduce(lambda a, axis, keepdims: np.std(a, axis=axis, keepdims=keepdims, ddof=ddof),
                            dim, keepdim, None)

    def clamp_max(self, max: Any) -> Tensor:
        return self.clamp(max=max)

    def neg(self) -> Tensor:
        return Tensor(np.negative(self._a))

    def square(self) -> Tensor:
        return self * self

    def pow(self, exponent: Any) -> Tensor:
        return self ** exponent

    def count_nonzero(self, dim: Any = None) -> Tensor:
        """The number of non-zero elements (over ``dim``, an int or a tuple), int64."""
        axis = None if dim is None else tuple(_dim(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list))
                                                                           else (dim,)))
        return Tensor(np.asarray(np.count_nonzero(self._a, axis=axis)).astype(np.int64))

    def movedim(self, source: Any, destination: Any) -> Tensor:
        """A view with the ``source`` dims moved to ``destination`` (ints or sequences), as numpy.moveaxis."""
        return Tensor(np.moveaxis(self._a, source, destination))

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: builtins.bool = False) -> Tensor:
        """The 2-norm (``p`` = 2 or ``"fro"``) over all elements or ``dim``; float32 for half inputs."""
        if p not in (2, 2.0, "fro"):
            raise NotImplementedError(f"Tensor.norm(p={p!r}) is not in pldemu's torch stand-in; install torch")
        if not self.dtype.is_floating_point:
            raise RuntimeError(f"norm(): input dtype should be floating point, got {self.dtype.name}")
        return self._reduce(lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims)),
                            dim, keepdim, None)

    @property
    def T(self) -> Tensor:
        """The dims reversed (a view), as torch's ``.T``."""
        return Tensor(self._a.T)

    def t(self) -> Tensor:
        """The transpose of a tensor of at most two dims."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return Tensor(self._a.T)

    def softmax(self, dim: builtins.int, dtype: dt.dtype | None = None) -> Tensor:
        """``exp(x - max) / sum`` along ``dim``; FP16 / BF16 computed in float32 and rounded once."""
        src = self.to(dtype) if dtype is not None else self
        wide = np.float64 if src.dtype is dt.float64 else np.float32
        x = src._a.astype(wide)
        e = np.exp(x - np.max(x, axis=dim, keepdims=True))
        return Tensor((e / np.sum(e, axis=dim, keepdims=True)).astype(src._a.dtype))

    def masked_fill(self, mask: Any, value: Any) -> Tensor:
        return Tensor(np.where(as_array(mask), np.asarray(value).astype(self._a.dtype), self._a))

    def index_select(self, dim: builtins.int, index: Any) -> Tensor:
        return Tensor(np.take(self._a, as_array(index).astype(np.int64), axis=_dim(dim, self.ndim)))

    def gather(self, dim: builtins.int, index: Any) -> Tensor:
        return Tensor(np.take_along_axis(self._a, as_array(index).astype(np.int64), axis=_dim(dim, self.ndim)))

    def reshape_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def view_as(self, other: Tensor) -> Tensor:
        return self.view(other.shape)

    def unflatten(self, dim: builtins.int, sizes: Sequence[builtins.int]) -> Tensor:
        d = _dim(dim, self.ndim)
        shape = self._a.shape
        inner = list(sizes)
        if -1 in inner:
            known = int(np.prod([v for v in inner if v != -1]))
            inner[inner.index(-1)] = shape[d] // known
        return self.reshape(*shape[:d], *inner, *shape[d + 1:])

    def narrow(self, dim: builtins.int, start: builtins.int, length: builtins.int) -> Tensor:
        d = _dim(dim, self.ndim)
        key = (slice(None),) * d + (slice(start, start + length),)
        return Tensor(self._a[key])

    def split(self, size: Any, dim: builtins.int = 0) -> tuple[Tensor, ...]:
        """Pieces of ``size`` along ``dim`` (the last may be shorter), or of the listed sizes: views."""
        d = _dim(dim, self.ndim)
        n = self._a.shape[d]
        sizes = [size] * -(-n // size) if isinstance(size, builtins.int) else list(size)
        bounds = np.cumsum([0, *sizes])
        return tuple(Tensor(self._a[(slice(None),) * d + (slice(int(a), min(int(b), n)),)])
                     for a, b in itertools.pairwise(bounds))

    def sort(self, dim: builtins.int = -1, descending: builtins.bool = False, stable: builtins.bool = False) -> MaxMin:
        """``(values, indices)``, stably (torch's CPU sort keeps equal values in order when ``stable``)."""
        idx = self.argsort(dim, descending)
        return MaxMin(Tensor(np.take_along_axis(self._a, idx._a, axis=_dim(dim, self.ndim))), idx)

    def argsort(self, dim: builtins.int = -1, descending: builtins.bool = False,
                stable: builtins.bool = False) -> Tensor:
        d = _dim(dim, self.ndim)
        if descending:
            # A stable descending order: ascending on the negated rank keeps ties in source order.
            order = np.argsort(-self._a.astype(np.float64) if self.dtype.is_floating_point
                               else -self._a.astype(object), axis=d, kind="stable")
        else:
            order = np.argsort(self._a, axis=d, kind="stable")
        return Tensor(np.asarray(order, np.int64))

    def topk(self, k: builtins.int, dim: builtins.int = -1, largest: builtins.bool = True,
             sorted: builtins.bool = True) -> MaxMin:
        """The ``k`` largest (smallest) along ``dim`` in order, ties in index order."""
        values, indices = self.sort(dim, descending=largest)
        key = (slice(None),) * _dim(dim, self.ndim) + (slice(0, k),)
        return MaxMin(Tensor(values._a[key]), Tensor(indices._a[key]))

    def nonzero(self, as_tuple: builtins.bool = False) -> Any:
        found = np.nonzero(self._a)
        if as_tuple:
            return tuple(Tensor(i.astype(np.int64)) for i in found)
        return Tensor(np.stack(found, axis=1).astype(np.int64))

    def fill_(self, value: Scalar) -> Tensor:
        self._a[...] = np.asarray(value).astype(self._a.dtype)
        return self

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def copy_(self, src: Any) -> Tensor:
        self._a[...] = as_array(src).astype(self._a.dtype)
        return self

    # -- indexing ---------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tensor:
        key = _index(key)
        out = self._a[key]
        if not isinstance(out, np.ndarray):  # an element: keep it a 0-d view, as torch does
            has_ellipsis = key is Ellipsis or (isinstance(key, tuple) and Ellipsis in key)
            out = np.asarray(out) if has_ellipsis else self._a[(*(key if isinstance(key, tuple) else (key,)), ...)]
        return Tensor(out)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[_index(key)] = as_array(value).astype(self._a.dtype) if isinstance(value, Tensor) else value

    def __len__(self) -> builtins.int:
        if self._a.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self._a)

    def __iter__(self) -> Iterator[Tensor]:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self._a)))

    # -- Python protocol --------------------------------------------------------------------------
    def __bool__(self) -> builtins.bool:
        if self._a.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._a.size} values is ambiguous")
        return bool(self._a.reshape(-1)[0])

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> builtins.int:
        return int(self.item())

    def __index__(self) -> builtins.int:
        if self.dtype.category == 2:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self) -> builtins.int:
        return id(self)

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if self._a.size == 1 and self._a.ndim == 0 else repr(self)

    def __repr__(self) -> str:
        body = np.array2string(self._a.astype(np.float32) if self.dtype == dt.bfloat16 else self._a,
                               separator=", ", prefix="tensor(")
        default = self.dtype in (dt.float32, dt.int64, dt.bool_)
        return f"tensor({body})" if default else f"tensor({body}, dtype={self.dtype!r})"

    # -- operators (torch's promotion; see .dtypes) --------------------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return _binary(np.add, self, o)

    def __radd__(self, o: Any) -> Tensor:
        return _binary(np.add, o, self)

    def __sub__(self, o: Any) -> Tensor:
        return _binary(np.subtract, self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return _binary(np.subtract, o, self)

    def __mul__(self, o: Any) -> Tensor:
        return _binary(np.multiply, self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return _binary(np.multiply, o, self)

    def __truediv__(self, o: Any) -> Tensor:
        return _binary(np.true_divide, self, o, floating=True)

    def __rtruediv__(self, o: Any) -> Tensor:
        return _binary(np.true_divide, o, self, floating=True)

    def __floordiv__(self, o: Any) -> Tensor:
        return _binary(np.floor_divide, self, o)

    def __rfloordiv__(self, o: Any) -> Tensor:
        return _binary(np.floor_divide, o, self)

    def __mod__(self, o: Any) -> Tensor:
        return _binary(np.mod, self, o)

    def __rmod__(self, o: Any) -> Tensor:
        return _binary(np.mod, o, self)

    def __pow__(self, o: Any) -> Tensor:
        return _binary(np.power, self, o)

    def __rpow__(self, o: Any) -> Tensor:
        return _binary(np.power, o, self)

    def __matmul__(self, o: Any) -> Tensor:
        return _binary(_matmul, self, o)

    def __rmatmul__(self, o: Any) -> Tensor:
        return _binary(_matmul, o, self)

    def __and__(self, o: Any) -> Tensor:
        return _binary(np.bitwise_and, self, o)

    def __or__(self, o: Any) -> Tensor:
        return _binary(np.bitwise_or, self, o)

    def __xor__(self, o: Any) -> Tensor:
        return _binary(np.bitwise_xor, self, o)

    def __invert__(self) -> Tensor:
        return Tensor(np.invert(self._a))

    def __neg__(self) -> Tensor:
        return Tensor(np.negative(self._a))

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    def __iadd__(self, o: Any) -> Tensor:
        return _inplace(np.add, self, o)

    def __isub__(self, o: Any) -> Tensor:
        return _inplace(np.subtract, self, o)

    def __imul__(self, o: Any) -> Tensor:
        return _inplace(np.multiply, self, o)

    def __itruediv__(self, o: Any) -> Tensor:
        return _inplace(np.true_divide, self, o)

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return _compare(np.equal, self, o)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return _compare(np.not_equal, self, o)

    def __lt__(self, o: Any) -> Tensor:
        return _compare(np.less, self, o)

    def __le__(self, o: Any) -> Tensor:
        return _compare(np.less_equal, self, o)

    def __gt__(self, o: Any) -> Tensor:
        return _compare(np.greater, self, o)

    def __ge__(self, o: Any) -> Tensor:
        return _compare(np.greater_equal, self, o)


__all__ = ["MaxMin", "Size", "Tensor", "as_array", "device"]
