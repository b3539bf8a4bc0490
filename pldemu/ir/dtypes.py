"""Element types of the IR: one enum, with the numpy dtype and text name of each."""

from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    """Element type of a scalar, tensor or tile. The value is the text-form name."""

    BOOL = "bool"
    INT8 = "int8"
    UINT8 = "uint8"
    INT32 = "int32"
    INT64 = "int64"
    INDEX = "index"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"

    @property
    def itemsize(self) -> int:
        """Physical storage bytes per element (BF16 is 2 bytes, INDEX is 8)."""
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.FP16, DType.BF16, DType.FP32)

    @property
    def is_int(self) -> bool:
        return self in (DType.INT8, DType.UINT8, DType.INT32, DType.INT64, DType.INDEX)

    def int_range(self) -> tuple[int, int]:
        """The smallest and largest value of an integer dtype (a literal outside is refused)."""
        info = np.iinfo(self.np)
        return int(info.min), int(info.max)

    @property
    def np(self) -> np.dtype:
        """The numpy dtype used to hold values of this type (BF16 is held as float32)."""
        return np.dtype(_NUMPY[self])

    @classmethod
    def parse(cls, text: str) -> DType:
        try:
            return cls(text.lower())
        except ValueError:
            names = ", ".join(d.value for d in cls)
            raise ValueError(f"unknown dtype {text!r}; expected one of {names}") from None


_ITEMSIZE: dict[DType, int] = {
    DType.BOOL: 1,
    DType.INT8: 1,
    DType.UINT8: 1,
    DType.INT32: 4,
    DType.INT64: 8,
    DType.INDEX: 8,
    DType.FP16: 2,
    DType.BF16: 2,
    DType.FP32: 4,
}

# BF16 has no numpy type; it is stored widened. Its byte geometry still uses itemsize 2.
_NUMPY: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.UINT8: "uint8",
    DType.INT32: "int32",
    DType.INT64: "int64",
    DType.INDEX: "int64",
    DType.FP16: "float16",
    DType.BF16: "float32",
    DType.FP32: "float32",
}
