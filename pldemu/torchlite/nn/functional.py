"""``torch.nn.functional`` of the stand-in: ``cosine_similarity`` (pypto-lib's golden/validation.py report)."""

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


__all__ = ["cosine_similarity"]
