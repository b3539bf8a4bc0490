"""``torch.testing`` of the stand-in: ``assert_close`` with torch's per-dtype default tolerances."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.torchlite import dtypes as dt
from pldemu.torchlite.functions import as_tensor

_DEFAULT_TOLERANCE = MappingProxyType({
    dt.float16: (1e-3, 1e-5), dt.bfloat16: (1.6e-2, 1e-5), dt.float32: (1.3e-6, 1e-5), dt.float64: (1e-7, 1e-7),
})
"""dtype -> (rtol, atol) when neither is given; integer and bool tensors compare exactly."""


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_dtype: bool = True, msg: str | None = None) -> None:
    """AssertionError unless ``actual`` and ``expected`` have one shape (and dtype) and close values."""
    a, e = as_tensor(actual), as_tensor(expected)
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    if check_dtype and a.dtype != e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}.")
    default_rtol, default_atol = _DEFAULT_TOLERANCE.get(a.dtype, (0.0, 0.0))
    r = default_rtol if rtol is None else rtol
    t = default_atol if atol is None else atol
    x, y = a.numpy().astype(np.float64), e.numpy().astype(np.float64)
    close = np.isclose(x, y, rtol=r, atol=t, equal_nan=equal_nan)
    if not close.all():
        bad = int((~close).sum())
        where = tuple(int(i) for i in np.argwhere(~close)[0])
        raise AssertionError(msg or f"Tensor-likes are not close!\n\nMismatched elements: {bad} / {close.size}\n"
                             f"First mismatch at index {where}: {x[where]} vs {y[where]} (rtol={r}, atol={t})")


__all__ = ["assert_close"]
