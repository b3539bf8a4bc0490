"""Element types of the IR: one enum, with the numpy dtype and text name of each.

NumPy-free at import: the launcher of ``pldemu run`` parses, verifies and checks programs without
numpy (tests/launcher/test_launcher_imports.py); each type's numpy dtype is resolved on first use of
:attr:`DType.np` (:func:`pldemu.npdtypes.dtype_named`).
"""

from __future__ import annotations

import enum
import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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
        """The smallest and largest value of an integer dtype (a literal outside is refused): those of
        ``numpy.iinfo(self.np)``, from the storage width (tests/ir/test_dtypes_numpy_free.py)."""
        if not self.is_int:
            raise ValueError(f"{self.value} is not an integer dtype")
        bits = 8 * self.itemsize
        if self in _UNSIGNED:
            return 0, (1 << bits) - 1
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    @property
    def numpy_name(self) -> str:
        """The name of :attr:`np` (``"float32"``, ``"bfloat16"``), known without importing numpy."""
        return _NUMPY_NAME[self]

    @property
    def np(self) -> np.dtype:
        """The numpy dtype used to hold values of this type (BF16 is ``ml_dtypes.bfloat16``, imported
        on first use)."""
        return _numpy_of(self)

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

_UNSIGNED = frozenset((DType.UINT8, DType.UINT16, DType.UINT32))

# The numpy dtype name of each type. BF16 is a real 2-byte type: ml_dtypes' bfloat16 numpy extension
# (round-to-nearest-even casts); it and the FP8 types are ml_dtypes', imported on first use.
_NUMPY_NAME: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.UINT8: "uint8",
    DType.INT16: "int16",
    DType.UINT16: "uint16",
    DType.INT32: "int32",
    DType.UINT32: "uint32",
    DType.INT64: "int64",
    DType.INDEX: "int64",
    DType.FP16: "float16",
    DType.BF16: "bfloat16",
    DType.FP32: "float32",
    DType.FP8E4M3FN: "float8_e4m3fn",
    DType.FP8E8M0: "float8_e8m0fnu",
}


@functools.cache
def _numpy_of(dtype: DType) -> np.dtype:
    # Memoised: the interpreter asks per buffer and per call site; numpy is imported on the first ask.
    from pldemu.npdtypes import dtype_named

    return dtype_named(_NUMPY_NAME[dtype])


def numpy_dtype(value: DType | str | np.dtype | type) -> np.dtype:
    """The NumPy dtype of a :class:`DType`, of its text (``"bf16"``), or of a NumPy dtype itself."""
    if isinstance(value, DType):
        return value.np
    if isinstance(value, str):
        return DType.parse(value).np
    import numpy as np

    return np.dtype(value)
