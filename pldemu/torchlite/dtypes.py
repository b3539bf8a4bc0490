"""torch's dtypes over numpy's (bfloat16 through ml_dtypes), and torch's type-promotion rules.

torch and numpy promote differently: an int32 tensor plus a Python float is float32 in torch (float64
in numpy), int / int is float32, float16 + bfloat16 is float32, and an integer tensor mixed with a
float tensor takes the float's dtype whatever its width. :func:`result_dtype` is torch's rule with
its three priority levels (tensors with dimensions, zero-dimensional tensors, Python scalars).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.npdtypes import BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E8M0


@dataclasses.dataclass(frozen=True)
class dtype:
    """One torch element type: ``torch.float32``, ``torch.bfloat16``, ... (``numpy`` is its array dtype)."""

    name: str
    numpy: np.dtype[Any]
    category: int
    """0 bool, 1 integer, 2 floating point: torch promotes across categories upwards."""

    @property
    def is_floating_point(self) -> bool:
        return self.category == 2

    @property
    def is_signed(self) -> bool:
        return self.category == 2 or self.numpy.kind == "i"

    @property
    def itemsize(self) -> int:
        return int(self.numpy.itemsize)

    def __repr__(self) -> str:
        return f"torch.{self.name}"


bool_ = dtype("bool", np.dtype(np.bool_), 0)
uint8 = dtype("uint8", np.dtype(np.uint8), 1)
uint16 = dtype("uint16", np.dtype(np.uint16), 1)
uint32 = dtype("uint32", np.dtype(np.uint32), 1)
"""torch's "barebones" unsigned types: storage and bit patterns, promoted only with a float type."""
int8 = dtype("int8", np.dtype(np.int8), 1)
int16 = dtype("int16", np.dtype(np.int16), 1)
int32 = dtype("int32", np.dtype(np.int32), 1)
int64 = dtype("int64", np.dtype(np.int64), 1)
float16 = dtype("float16", np.dtype(np.float16), 2)
bfloat16 = dtype("bfloat16", BFLOAT16, 2)
float32 = dtype("float32", np.dtype(np.float32), 2)
float64 = dtype("float64", np.dtype(np.float64), 2)
float8_e4m3fn = dtype("float8_e4m3fn", FLOAT8_E4M3FN, 2)
float8_e8m0fnu = dtype("float8_e8m0fnu", FLOAT8_E8M0, 2)
"""The FP8 types pypto-lib's goldens round through (``x.to(torch.float8_e4m3fn).float()``): ml_dtypes'
conversions are torch's (nearest, ties to even; past the largest finite value e4m3fn gives NaN, as
torch's non-saturating cast does)."""

ALL_DTYPES = (bool_, uint8, uint16, uint32, int8, int16, int32, int64, float16, bfloat16, float32, float64, float8_e4m3fn,
              float8_e8m0fnu)
_BY_NUMPY: Mapping[np.dtype[Any], dtype] = MappingProxyType({d.numpy: d for d in ALL_DTYPES})

DEFAULT_FLOAT = float32
"""torch's default dtype: what float data, float scalars and int / int become."""
DEFAULT_INT = int64
_SCALAR_DEFAULT = (bool_, DEFAULT_INT, DEFAULT_FLOAT)
_HALF = frozenset({float16, bfloat16})
FLOAT8 = frozenset({float8_e4m3fn, float8_e8m0fnu})
"""Types torch refuses to promote with any other ("Promotion for Float8 Types is not supported")."""
BAREBONES_UNSIGNED = frozenset({uint16, uint32})
"""Types torch promotes with a float type (giving the float) and refuses to promote with any other."""


def from_numpy_dtype(np_dtype: np.dtype[Any]) -> dtype:
    """The torch dtype of a numpy array dtype (TypeError for one torch has no counterpart of)."""
    found = _BY_NUMPY.get(np.dtype(np_dtype))
    if found is None:
        raise TypeError(f"pldemu's torch stand-in has no dtype for numpy {np.dtype(np_dtype)}")
    return found


def promote(a: dtype, b: dtype) -> dtype:
    """torch.promote_types for two dtypes."""
    if a == b:
        return a
    if a in FLOAT8 or b in FLOAT8:
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote {a.name} and {b.name}")
    if a in BAREBONES_UNSIGNED or b in BAREBONES_UNSIGNED:
        # torch leaves these out of integer promotion (uint32 + int32 has no lossless int64 rule it keeps).
        if a.is_floating_point or b.is_floating_point:
            return a if a.is_floating_point else b
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                           f"{a.name} and {b.name}")
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2:
        if {a, b} == _HALF:
            return float32
        return a if a.itemsize >= b.itemsize else b
    return from_numpy_dtype(np.promote_types(a.numpy, b.numpy))


def promote_all(dtypes: Iterable[dtype]) -> dtype:
    """The promotion of one or more dtypes."""
    items = list(dtypes)
    result = items[0]
    for d in items[1:]:
        result = promote(result, d)
    return result


def scalar_category(value: Any) -> int:
    """Category of a Python (or numpy) scalar: 0 bool, 1 int, 2 float."""
    if isinstance(value, (bool, np.bool_)):
        return 0
    if isinstance(value, (int, np.integer)):
        return 1
    if isinstance(value, (float, np.floating)) or type(value).__name__ == "bfloat16":
        return 2
    raise TypeError(f"unsupported operand type {type(value).__name__} for a tensor operation")


def result_dtype(dimensioned: list[dtype], zero_dim: list[dtype], scalars: list[Any]) -> dtype:
    """torch's result type of an operation on tensors with dimensions, 0-d tensors and scalars.

    A lower priority group only changes the result when its category is higher (an int tensor plus a
    float scalar is float32; a float16 tensor plus a float scalar stays float16)."""
    result: dtype | None = None
    for group in (dimensioned, zero_dim):
        if group:
            d = promote_all(group)
            if result is None or d.category > result.category:
                result = d
    if scalars:
        category = max(scalar_category(s) for s in scalars)
        if result is None or category > result.category:
            result = _SCALAR_DEFAULT[category]
    if result is None:
        raise TypeError("an operation needs at least one operand")
    return result


__all__ = [
    "ALL_DTYPES",
    "BAREBONES_UNSIGNED",
    "DEFAULT_FLOAT",
    "DEFAULT_INT",
    "bfloat16",
    "bool_",
    "dtype",
    "float8_e4m3fn",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "float64",
    "from_numpy_dtype",
    "int8",
    "int16",
    "int32",
    "int64",
    "promote",
    "promote_all",
    "result_dtype",
    "scalar_category",
    "uint8",
    "uint16",
    "uint32",
]
