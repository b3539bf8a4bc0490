"""``torch.cos`` / ``ceil`` / ``amax`` / ... and ``torch.iinfo`` / ``finfo`` of the stand-in: the element-wise
math and type limits pypto-lib's goldens and input builders call, with torch's dtype rules (the
methods of :class:`~pldemu.torchlite.tensor.Tensor` do the work)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pldemu.torchlite import dtypes as dt
from pldemu.torchlite.tensor import Tensor, as_array

inf = math.inf
nan = math.nan


def cos(t: Tensor) -> Tensor:
    return t.cos()


def sin(t: Tensor) -> Tensor:
    return t.sin()


def exp(t: Tensor) -> Tensor:
    return t.exp()


def log(t: Tensor) -> Tensor:
    return t.log()


def log2(t: Tensor) -> Tensor:
    return t.log2()


def log1p(t: Tensor) -> Tensor:
    return t.log1p()


def sqrt(t: Tensor) -> Tensor:
    return t.sqrt()


def rsqrt(t: Tensor) -> Tensor:
    return t.rsqrt()


def sigmoid(t: Tensor) -> Tensor:
    return t.sigmoid()


def reciprocal(t: Tensor) -> Tensor:
    return t.reciprocal()


def erf(t: Tensor) -> Tensor:
    return t.erf()


def relu(t: Tensor) -> Tensor:
    return t.relu()


def bitwise_not(t: Tensor) -> Tensor:
    return t.bitwise_not()


def triu(t: Tensor, diagonal: int = 0) -> Tensor:
    return t.triu(diagonal)


def tril(t: Tensor, diagonal: int = 0) -> Tensor:
    return t.tril(diagonal)


def cummin(t: Tensor, dim: int) -> Any:
    return t.cummin(dim)


def cummax(t: Tensor, dim: int) -> Any:
    return t.cummax(dim)


def ceil(t: Tensor) -> Tensor:
    return t.ceil()


def floor(t: Tensor) -> Tensor:
    return t.floor()


def round(t: Tensor, *, decimals: int = 0) -> Tensor:
    return t.round(decimals)


def isnan(t: Tensor) -> Tensor:
    return t.isnan()


def isinf(t: Tensor) -> Tensor:
    return t.isinf()


def isfinite(t: Tensor) -> Tensor:
    return t.isfinite()


def amax(t: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return t.amax(dim, keepdim)


def amin(t: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return t.amin(dim, keepdim)


def argmax(t: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return t.argmax(dim, keepdim)


def argmin(t: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return t.argmin(dim, keepdim)


def mean(t: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: dt.dtype | None = None) -> Tensor:
    return t.mean(dim, keepdim, dtype)


def softmax(t: Tensor, dim: int, dtype: dt.dtype | None = None) -> Tensor:
    return t.softmax(dim, dtype)


def topk(t: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    return t.topk(k, dim, largest, sorted)


def sort(t: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    return t.sort(dim, descending, stable)


def argsort(t: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return t.argsort(dim, descending, stable)


def gather(t: Tensor, dim: int, index: Tensor) -> Tensor:
    return t.gather(dim, index)


def index_select(t: Tensor, dim: int, index: Tensor) -> Tensor:
    return t.index_select(dim, index)


def nonzero(t: Tensor, *, as_tuple: bool = False) -> Any:
    return t.nonzero(as_tuple=as_tuple)


def neg(t: Tensor) -> Tensor:
    return t.neg()


def square(t: Tensor) -> Tensor:
    return t.square()


def sign(t: Tensor) -> Tensor:
    return t.sign()


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Any:
    """The distinct elements in ascending order (torch's CPU unique sorts whatever ``sorted`` says), with
    the inverse indices (int64, the input's shape) and counts (int64) when asked, in torch's tuple order."""
    if dim is not None:
        raise NotImplementedError("torch.unique(dim=) is not in pldemu's torch stand-in; install torch to use it")
    values, inverse, counts = np.unique(input.numpy(), return_inverse=True, return_counts=True)
    out = [Tensor(values)]
    if return_inverse:
        out.append(Tensor(inverse.reshape(input.shape).astype(np.int64)))
    if return_counts:
        out.append(Tensor(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def count_nonzero(t: Tensor, dim: Any = None) -> Tensor:
    return t.count_nonzero(dim)


def unravel_index(indices: Any, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates of flat ``indices`` in ``shape``: one int64 tensor per dim (numpy.unravel_index)."""
    return tuple(Tensor(np.asarray(c).astype(np.int64))
                 for c in np.unravel_index(as_array(indices).astype(np.int64), tuple(int(d) for d in shape)))


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q`` quantiles (a float or a 1-D tensor; leading result dim for a tensor) of all elements or
    along ``dim``, interpolated as torch (numpy's methods of the same names); float inputs only."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"quantile() input tensor must be either float or double dtype, got {input.dtype.name}")
    a = input.numpy()
    quantile_of: Any = np.quantile  # method= is a Literal of names in numpy's stubs; torch's names are those
    out = quantile_of(a, as_array(q).astype(np.float64), axis=dim, keepdims=keepdim, method=interpolation)
    return Tensor(np.asarray(out).astype(a.dtype))


_FEW_EDGES = 16
"""``bucketize`` counts edges (one pass each) up to this many; a binary search per element beyond."""


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """For each element the index of its bucket in the ascending 1-D ``boundaries``: the first ``i`` with
    ``x <= boundaries[i]`` (``right=True``: ``x < boundaries[i]``), ``len(boundaries)`` past the last;
    int64 (``out_int32``: int32), as torch.bucketize."""
    edges = as_array(boundaries)
    if edges.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({edges.ndim})")
    x = as_array(input)
    kind = np.int32 if out_int32 else np.int64
    if edges.size > _FEW_EDGES:
        return Tensor(np.asarray(np.searchsorted(edges, x, side="right" if right else "left")).astype(kind))
    # Few edges (a quantisation grid's): counting the edges each element passes is one vectorised pass per
    # edge, several times faster than a binary search per element; "not <=" counts a NaN past every edge,
    # as searchsorted places it.
    found = np.zeros(np.shape(x), kind)
    passed = np.empty(np.shape(x), np.bool_)
    for edge in edges:
        (np.less if right else np.less_equal)(x, edge, out=passed)
        found += ~passed
    return Tensor(found)


@dataclass(frozen=True)
class iinfo:
    """``torch.iinfo(dtype)``: ``bits``, ``min``, ``max`` and ``dtype`` (its name) of an integer dtype."""

    bits: int
    min: int
    max: int
    dtype: str

    def __new__(cls, dtype: dt.dtype) -> iinfo:
        if dtype.is_floating_point or dtype is dt.bool_:
            raise TypeError(f"torch.{dtype.name} is not supported by torch.iinfo")
        self = object.__new__(cls)
        info = np.iinfo(dtype.numpy)
        for name, value in (("bits", info.bits), ("min", int(info.min)), ("max", int(info.max)),
                            ("dtype", dtype.name)):
            object.__setattr__(self, name, value)
        return self

    def __init__(self, dtype: dt.dtype) -> None:
        pass


@dataclass(frozen=True)
class finfo:
    """``torch.finfo(dtype=float32)``: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution`` and ``dtype`` of a float dtype (BF16's from ml_dtypes)."""

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str

    def __new__(cls, dtype: dt.dtype | None = None) -> finfo:
        dtype = dtype or dt.DEFAULT_FLOAT
        if not dtype.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            f"'torch.finfo' of torch.{dtype.name}")
        import ml_dtypes  # BF16's limits; float types only

        info: Any = ml_dtypes.finfo(dtype.numpy)
        self = object.__new__(cls)
        values = {"bits": int(info.bits), "eps": float(info.eps), "max": float(info.max), "min": float(info.min),
                  "tiny": float(info.tiny), "smallest_normal": float(info.smallest_normal),
                  "resolution": float(info.resolution), "dtype": dtype.name}
        for name, value in values.items():
            object.__setattr__(self, name, value)
        return self

    def __init__(self, dtype: dt.dtype | None = None) -> None:
        pass


__all__ = [
    "amax",
    "amin",
    "argmax",
    "argmin",
    "bitwise_not",
    "bucketize",
    "ceil",
    "cos",
    "count_nonzero",
    "cummax",
    "cummin",
    "erf",
    "exp",
    "finfo",
    "floor",
    "iinfo",
    "inf",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log1p",
    "log2",
    "mean",
    "nan",
    "quantile",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "tril",
    "triu",
    "unique",
    "unravel_index",
]
