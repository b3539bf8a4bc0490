"""``pypto.runtime.tensor_spec``: the tensor and scalar specifications of pypto's golden files."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

SCALAR_CTYPES = ("int64", "int32", "uint64", "uint32", "float", "double")
"""The ctypes names a ``ScalarSpec`` may carry (pypto's)."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """pypto's runtime ``TensorSpec``: a tensor of a test's golden by name, shape, torch dtype, initial
    value (None: zeros; a number: filled; a tensor; ``torch.randn`` / ``rand`` / ``zeros`` / ``ones``,
    called with the shape; another callable, called without arguments) and whether it is an output."""

    name: str
    shape: list[int]
    dtype: Any
    init_value: int | float | Any | Callable[..., Any] | None = None
    is_output: bool = False

    def create_tensor(self) -> Any:
        """The tensor the spec describes."""
        torch = importlib.import_module("torch")
        value = self.init_value
        if value is None:
            return torch.zeros(self.shape, dtype=self.dtype)
        if isinstance(value, (int, float)):
            return torch.full(self.shape, value, dtype=self.dtype)
        if isinstance(value, torch.Tensor):
            return value.to(dtype=self.dtype)
        if value in (torch.randn, torch.rand, torch.zeros, torch.ones):
            return value(self.shape, dtype=self.dtype)
        if callable(value):
            return torch.as_tensor(value(), dtype=self.dtype)
        raise TypeError(f"Unsupported init_value type {type(value)!r} for tensor {self.name!r}")


@dataclasses.dataclass(frozen=True)
class ScalarSpec:
    """pypto's ``ScalarSpec``: a scalar argument after the tensors, with its ctypes type name."""

    name: str
    value: int | float
    ctype: str = "int64"

    def __post_init__(self) -> None:
        if self.ctype not in SCALAR_CTYPES:
            raise ValueError(f"Unsupported ctype {self.ctype!r} for scalar {self.name!r}. "
                             f"Supported: {list(SCALAR_CTYPES)}")


__all__ = ["SCALAR_CTYPES", "ScalarSpec", "TensorSpec"]
