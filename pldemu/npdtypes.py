"""NumPy-level facts about the element types pldemu stores, shared by the IR, windows and runtime.

BF16 is ``ml_dtypes.bfloat16``: a real 2-byte numpy extension type (kind 'V', not 'f'), so "is this a
float array" must be asked here rather than through ``dtype.kind``. No MPI, no IR imports.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

BFLOAT16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
FLOAT8_E4M3FN: np.dtype[Any] = np.dtype(ml_dtypes.float8_e4m3fn)
"""MXFP8 data: 1 sign, 4 exponent, 3 mantissa bits, no infinities, NaN = S.1111.111 (0x7F / 0xFF)."""
FLOAT8_E8M0: np.dtype[Any] = np.dtype(ml_dtypes.float8_e8m0fnu)
"""MX shared scale: an unsigned biased exponent byte, value 2^(b - 127), 0xFF = NaN."""


_EXTENSION_FLOATS = frozenset({BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E8M0})


def is_float_dtype(dtype: np.dtype[Any]) -> bool:
    """True for numpy's float types and the ml_dtypes ones pldemu holds (bfloat16, the two FP8 types)."""
    return dtype.kind == "f" or dtype in _EXTENSION_FLOATS


__all__ = ["BFLOAT16", "FLOAT8_E4M3FN", "FLOAT8_E8M0", "is_float_dtype"]
