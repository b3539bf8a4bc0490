"""The elementwise functions instructions name (``func=``): one table each, shared by verifier and interpreter.

Arithmetic runs in the compute dtype the interpreter chooses (fp32 on the machine, float64 for the
reference); bitvec ops need integer dtypes and see raw integers, with no cast (neuron-casts.md section 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

Unary = Callable[[np.ndarray], np.ndarray]
Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _gelu(x: np.ndarray) -> np.ndarray:
    # tanh approximation; constants in x's own dtype so fp32 stays fp32
    c = x.dtype.type(np.sqrt(2.0 / np.pi))
    return x.dtype.type(0.5) * x * (x.dtype.type(1.0) + np.tanh(c * (x + x.dtype.type(0.044715) * x * x * x)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1.0)
    return one / (one + np.exp(-x))


ACTIVATIONS: Mapping[str, Unary] = MappingProxyType({
    "copy": lambda x: x.copy(),
    "exp": np.exp,
    "tanh": np.tanh,
    "gelu": _gelu,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "square": np.square,
})
"""``ActivationOp`` functions (ScalarE)."""

ARITH: Mapping[str, Binary] = MappingProxyType({
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
})
"""Arithmetic ALU ops: computed in the compute dtype, then cast on write."""

BITVEC: Mapping[str, Binary] = MappingProxyType({
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
})
"""Bitvec ALU ops (``TensorScalarPtrOp`` only): integer dtypes, raw bits."""

__all__ = ["ACTIVATIONS", "ARITH", "BITVEC"]
