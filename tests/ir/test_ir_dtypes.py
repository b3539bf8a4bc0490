"""The IR's dtype facts are held without numpy (the launcher of ``pldemu run`` never imports it) and
agree with the numpy dtypes the runtime holds values in: widths, integer ranges, names."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.ir import DType
from pldemu.ir.dtypes import numpy_dtype
from pldemu.npdtypes import BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E8M0, dtype_named

INTEGERS = [d for d in DType if d.is_int]


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_width_and_name_are_numpys(dtype: DType) -> None:
    assert dtype.itemsize == dtype.np.itemsize
    assert dtype.numpy_name == dtype.np.name == str(dtype.np)
    assert dtype_named(dtype.numpy_name) == dtype.np == numpy_dtype(dtype) == numpy_dtype(dtype.value)


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: d.value)
def test_int_range_is_numpys_iinfo(dtype: DType) -> None:
    info = np.iinfo(dtype.np)
    assert dtype.int_range() == (int(info.min), int(info.max))


@pytest.mark.parametrize("dtype", [d for d in DType if not d.is_int], ids=lambda d: d.value)
def test_int_range_refuses_a_non_integer_type(dtype: DType) -> None:
    with pytest.raises(ValueError):
        np.iinfo(dtype.np)  # numpy refuses them too
    with pytest.raises(ValueError, match="not an integer dtype"):
        dtype.int_range()


def test_the_extension_types_are_ml_dtypes() -> None:
    assert (DType.BF16.np, DType.FP8E4M3FN.np, DType.FP8E8M0.np) == (BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E8M0)
    assert numpy_dtype(np.float32) == np.dtype(np.float32)
