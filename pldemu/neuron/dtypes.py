"""Element types of the Neuron instruction IR (the NKI dtypes the cast pass sees), one enum.

Storage goes through ``ml_dtypes`` for the narrow floats, whose float32 -> bfloat16 / fp8 casts round to
nearest even: the hardware's default rounding (neuron-casts.md section 3).
"""

from __future__ import annotations

import enum
from typing import Any

import ml_dtypes
import numpy as np


class NDType(enum.Enum):
    """A Neuron dtype. The value is the text-form name."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    INT32 = "int32"
    UINT32 = "uint32"

    @property
    def np(self) -> np.dtype:
        """The NumPy (or ml_dtypes) storage dtype: bit-exact, so a bf16 value really has 8 mantissa bits."""
        return np.dtype(_NUMPY[self])

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.np.itemsize

    @classmethod
    def parse(cls, text: str) -> NDType:
        """The dtype called ``text`` (ValueError naming the accepted spellings)."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown dtype {text!r}; expected one of {', '.join(d.value for d in cls)}") from None


def is_int_type(dtype: NDType) -> bool:
    """True for the integer dtypes: the predicate gate 4 applies to both sides (neuronxcc.starfish.support.dtype)."""
    return dtype in _INT


_INT = frozenset({NDType.INT8, NDType.UINT8, NDType.INT16, NDType.INT32, NDType.UINT32})

_NUMPY: dict[NDType, Any] = {
    NDType.FP32: np.float32,
    NDType.BF16: ml_dtypes.bfloat16,
    NDType.FP16: np.float16,
    NDType.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    NDType.FP8_E5M2: ml_dtypes.float8_e5m2,
    NDType.INT8: np.int8,
    NDType.UINT8: np.uint8,
    NDType.INT16: np.int16,
    NDType.INT32: np.int32,
    NDType.UINT32: np.uint32,
}

__all__ = ["NDType", "is_int_type"]
