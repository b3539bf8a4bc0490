"""The tensor ops: run-time creation, view, element read and write.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir import BufferKind, NotifyOp, Op, TensorType
from pldemu.npdtypes import scalar_as
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.transfer import describe
from pldemu.runtime.values import (
    Shape,
    TensorRef,
    check_valid,
    flat_cell,
)

# ---------------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------------


def _create(m: Machine, site: CallSite, args: tuple[Any, ...]) -> TensorRef:
    shape: Shape = tuple(args[0])
    if any(d <= 0 for d in shape):
        raise ProgramError(f"tensor.create: extents {list(shape)} are not all positive")
    t = site.call.type
    assert isinstance(t, TensorType)
    buf = m.local_buffer(site.attrs["name"], t.dtype, shape)
    return TensorRef(buf, shape, None, buf.array)


def _view(m: Machine, site: CallSite, args: tuple[Any, ...]) -> TensorRef:
    t: TensorRef = args[0]
    shape: Shape = args[1]
    if any(d < 0 for d in shape) or math.prod(shape) != t.buffer.numel:
        raise ProgramError(f"tensor.view: shape {list(shape)} does not hold the {t.buffer.numel} elements "
                           f"of {describe(t)}")
    valid = check_valid("tensor.view", args[2], shape) if len(args) > 2 else None
    return TensorRef(t.buffer, shape, valid, t.buffer.array.reshape(shape))


def _read(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    t: TensorRef = args[0]
    index: Shape = args[1]
    cell = flat_cell("tensor.read", m.rank, m.rank, t, index)
    if t.buffer.kind is BufferKind.SIGNAL and t.buffer.window is not None:
        return t.buffer.window.read_cell(cell)  # atomic with respect to peers' notifies
    return t.array[index].item()


def _write(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    t: TensorRef = args[0]
    index: Shape = args[1]
    cell = flat_cell("tensor.write", m.rank, m.rank, t, index)
    if t.buffer.kind is BufferKind.SIGNAL and t.buffer.window is not None:
        # A signal cell only changes through MPI atomics, so a plain store cannot tear a peer's add.
        t.buffer.window.notify(m.rank, cell, operator.index(args[2]), NotifyOp.Set)
        return
    t.array[index] = scalar_as(t.array.dtype, args[2])  # a scalar wider than the element wraps


TENSOR_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TENSOR_CREATE: _create,
    Op.TENSOR_VIEW: _view,
    Op.TENSOR_READ: _read,
    Op.TENSOR_WRITE: _write,
})


__all__ = ["TENSOR_HANDLERS"]
