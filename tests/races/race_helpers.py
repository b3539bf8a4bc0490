"""Helpers of the single-process race/trace tests (unique module name: test directories share sys.path)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.ir import BufferKind, DType, Program
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.values import Buffer


@contextmanager
def instance(program: Program, **options: Any) -> Iterator[ProgramInstance]:
    """The program on COMM_SELF (one rank), closed afterwards even when a test fails."""
    inst = ProgramInstance(program, MPI.COMM_SELF, RuntimeOptions(**options))
    try:
        yield inst
    finally:
        inst.close()


def data_buffer(index: int = 0, name: str = "data", shape: tuple[int, ...] = (4, 8)) -> Buffer:
    """A data-window buffer description (no storage) for the pure-Python detector functions."""
    return Buffer(index, name, BufferKind.WINDOW, DType.FP32, shape, None, np.empty(0, np.float32))
