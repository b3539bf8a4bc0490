"""``torch.manual_seed`` / ``rand`` / ``randn`` / ``randint`` of the stand-in, as pypto's tests make inputs.

The numbers come from numpy's global generator (``numpy.random``), seeded by ``manual_seed``: the same
seed gives the same inputs run after run, but not torch's numbers. A test's golden is computed from
the inputs it made, so it does not care which numbers they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pldemu.pypto.torchlite import dtypes as dt
from pldemu.pypto.torchlite.tensor import Tensor, _shape_args


def manual_seed(seed: int) -> None:
    """Seed the generator the stand-in's random factories draw from."""
    np.random.seed(int(seed) % 2**32)


def rand(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """Uniform on [0, 1); float32 by default."""
    return Tensor(np.random.random_sample(_shape_args(size)).astype((dtype or dt.DEFAULT_FLOAT).numpy))


def randn(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """Standard normal; float32 by default."""
    return Tensor(np.random.standard_normal(_shape_args(size)).astype((dtype or dt.DEFAULT_FLOAT).numpy))


def randint(low: int, high: int | None = None, size: Any = (), *, dtype: dt.dtype | None = None,
            **_: Any) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high); int64 by default."""
    if high is None or isinstance(high, (tuple, list)):
        low, high, size = 0, low, high if high is not None else size
    values = np.random.randint(int(low), int(high), size=_shape_args((size,)))
    return Tensor(values.astype((dtype or dt.DEFAULT_INT).numpy))


__all__ = ["manual_seed", "rand", "randint", "randn"]
