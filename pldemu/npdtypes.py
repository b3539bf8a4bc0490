"""NumPy-level facts about the element types pldemu stores, shared by the IR, windows and runtime.

BF16 is ``ml_dtypes.bfloat16``: a real 2-byte numpy extension type (kind 'V', not 'f'), so "is this a
float array" must be asked here rather than through ``dtype.kind``. No MPI, no IR imports.

``ml_dtypes`` is imported on first use of :data:`BFLOAT16`, :data:`FLOAT8_E4M3FN` or
:data:`FLOAT8_E8M0` (module attributes resolved lazily): a program without those types never pays
for it (30 ms of every rank's start-up; docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_ML_DTYPES = {"BFLOAT16": "bfloat16", "FLOAT8_E4M3FN": "float8_e4m3fn", "FLOAT8_E8M0": "float8_e8m0fnu"}
"""Module attribute -> the ml_dtypes type (and numpy dtype name) it stands for.

BFLOAT16: 1 sign, 8 exponent, 7 mantissa bits. FLOAT8_E4M3FN: MXFP8 data, 1 sign, 4 exponent, 3
mantissa bits, no infinities, NaN = S.1111.111 (0x7F / 0xFF). FLOAT8_E8M0: the MX shared scale, an
unsigned biased exponent byte, value 2^(b - 127), 0xFF = NaN."""

_EXTENSION_FLOATS = frozenset(_ML_DTYPES.values())


def __getattr__(name: str) -> Any:
    kind = _ML_DTYPES.get(name)
    if kind is None:
        raise AttributeError(f"module 'pldemu.npdtypes' has no attribute {name!r}")
    return dtype_named(kind)


def dtype_named(name: str) -> np.dtype[Any]:
    """The numpy dtype called ``name``: numpy's own, or one of the ml_dtypes types (``"bfloat16"``,
    ``"float8_e4m3fn"``, ``"float8_e8m0fnu"``; ml_dtypes is imported on the first such ask)."""
    if name not in _EXTENSION_FLOATS:
        return np.dtype(name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


def is_float_dtype(dtype: np.dtype[Any]) -> bool:
    """True for numpy's float types and the ml_dtypes ones pldemu holds (bfloat16, the two FP8 types);
    asked by name, so that it never imports ml_dtypes (an array of those types already has)."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name in _EXTENSION_FLOATS)


def scalar_as(dtype: np.dtype[Any], value: Any) -> Any:
    """``value`` (a Python or numpy scalar) converted to ``dtype`` as the device's scalar registers hold it:
    an integer wraps in two's complement (a float is truncated toward zero first, a NaN is 0), where
    numpy would raise on an out-of-range int; a float type rounds to nearest, ties to even."""
    if dtype.kind not in "iu":
        return dtype.type(value)
    if isinstance(value, (float, np.floating)):
        value = 0 if value != value else int(value)  # NaN != NaN
    bits = 8 * dtype.itemsize
    low = -(1 << (bits - 1)) if dtype.kind == "i" else 0
    return dtype.type((int(value) - low) % (1 << bits) + low)


BFLOAT16: np.dtype[Any]
FLOAT8_E4M3FN: np.dtype[Any]
FLOAT8_E8M0: np.dtype[Any]

__all__ = ["BFLOAT16", "FLOAT8_E4M3FN", "FLOAT8_E8M0", "dtype_named", "is_float_dtype", "scalar_as"]
