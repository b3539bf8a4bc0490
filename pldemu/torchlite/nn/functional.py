"""``torch.nn.functional`` of the stand-in: ``cosine_similarity`` (pypto-lib's golden/validation.py report),
``silu`` and ``relu`` (pypto-lib's model goldens)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pldemu.torchlite.tensor import Tensor


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``x1 . x2 / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim`` (torch's formula), float32 for half
    and integer inputs."""
    wide = np.float64 if x1.numpy().dtype == np.float64 else np.float32
    a: np.ndarray[Any, np.dtype[np.floating[Any]]] = x1.numpy().astype(wide)
    b: np.ndarray[Any, np.dtype[np.floating[Any]]] = x2.numpy().astype(wide)
    na = np.maximum(np.sqrt(np.sum(a * a, axis=dim)), eps)
    nb = np.maximum(np.sqrt(np.sum(b * b, axis=dim)), eps)
    return Tensor(np.asarray(np.sum(a * b, axis=dim) / (na * nb)).astype(wide))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``; FP16 / BF16 computed in float32 and rounded once, as torch's CPU kernel."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f'"silu_cpu" not implemented for \'{input.dtype.name}\'')
    wide = np.float64 if input.dtype.name == "float64" else np.float32
    x: np.ndarray[Any, np.dtype[np.floating[Any]]] = input.numpy().astype(wide)
    with np.errstate(over="ignore"):
        out = Tensor(np.asarray(x / (1 + np.exp(-x))).astype(input.numpy().dtype))
    return input.copy_(out) if inplace else out


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)`` in the input's dtype."""
    out = input.relu()
    return input.copy_(out) if inplace else out


__all__ = ["cosine_similarity", "relu", "silu"]
