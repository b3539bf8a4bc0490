"""Helpers of the single-process race/trace tests (unique module name: test directories share sys.path)."""

from __future__ import annotations

import numpy as np

from pldemu.ir import BufferKind, DType
from pldemu.runtime.values import Buffer


def data_buffer(index: int = 0, name: str = "data", shape: tuple[int, ...] = (4, 8)) -> Buffer:
    """A data-window buffer description (no storage) for the pure-Python detector functions."""
    return Buffer(index, name, BufferKind.WINDOW, DType.FP32, shape, None, np.empty(0, np.float32))
