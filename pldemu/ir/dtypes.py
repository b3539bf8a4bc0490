"""Element types of the IR: one enum, with the numpy dtype and text name of each."""

from __future__ import annotations

import enum

import numpy as np

from pldemu import npdtypes


class DType(enum.Enum):
    """Element type of a scalar, tensor or tile. The value is the text-form name."""

    BOOL = "bool"
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    INDEX = "index"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"
    FP8E4M3FN = "fp8e4m3fn"
    FP8E8M0 = "fp8e8m0"

    @property
    def itemsize(self) -> int:
        """Physical storage bytes per element (BF16 is 2 bytes, INDEX is 8)."""
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.FP16, DType.BF16, DType.FP32)

    @property
    def is_fp8(self) -> bool:
        """The MX element types (data and shared scale); they only come from tile.reinterpret_view."""
        return self in (DType.FP8E4M3FN, DType.FP8E8M0)

    @property
    def is_int(self) -> bool:
        return self in (DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32, DType.INT64,
                        DType.INDEX)

    def int_range(self) -> tuple[int, int]:
        """The smallest and largest value of an integer dtype (a literal outside is refused)."""
        info = np.iinfo(self.np)
        return int(info.min), int(info.max)

    @property
    def np(self) -> np.dtype:
        """The numpy dtype used to hold values of this type (BF16 is ``ml_dtypes.bfloat16``, imported
        on first use)."""
        found = _NUMPY.get(self)
        return found if found is not None else getattr(npdtypes, _ML_DTYPES[self])

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
    DType.INT16: 2,
    DType.UINT16: 2,
    DType.INT32: 4,
    DType.UINT32: 4,
    DType.INT64: 8,
    DType.INDEX: 8,
    DType.FP16: 2,
    DType.BF16: 2,
    DType.FP32: 4,
    DType.FP8E4M3FN: 1,
    DType.FP8E8M0: 1,
}

# BF16 is a real 2-byte type: ml_dtypes' bfloat16 numpy extension (round-to-nearest-even casts).
_NUMPY: dict[DType, np.dtype] = {
    DType.BOOL: np.dtype("bool"),
    DType.INT8: np.dtype("int8"),
    DType.UINT8: np.dtype("uint8"),
    DType.INT16: np.dtype("int16"),
    DType.UINT16: np.dtype("uint16"),
    DType.INT32: np.dtype("int32"),
    DType.UINT32: np.dtype("uint32"),
    DType.INT64: np.dtype("int64"),
    DType.INDEX: np.dtype("int64"),
    DType.FP16: np.dtype("float16"),
    DType.FP32: np.dtype("float32"),
}
# The ml_dtypes types, by their pldemu.npdtypes name (resolved on first use: importing ml_dtypes costs).
_ML_DTYPES: dict[DType, str] = {DType.BF16: "BFLOAT16", DType.FP8E4M3FN: "FLOAT8_E4M3FN", DType.FP8E8M0: "FLOAT8_E8M0"}


def numpy_dtype(value: DType | str | np.dtype | type) -> np.dtype:
    """The NumPy dtype of a :class:`DType`, of its text (``"bf16"``), or of a NumPy dtype itself."""
    if isinstance(value, DType):
        return value.np
    if isinstance(value, str):
        return DType.parse(value).np
    return np.dtype(value)
