"""The op handlers: one function per non-collective op, in ONE table checked complete at import.

A handler is called as ``handler(machine, site, args)``: ``args`` are the call's evaluated arguments in
signature order (scalars as Python numbers, ``[lists]`` as int tuples, tensors as ``TensorRef``, tiles
as ``Tile``; absent optional arguments are simply missing), ``site.attrs`` the decoded attributes.
It returns the op's value (``None`` for effect-only ops).

Semantics follow the protocol digest (shared/reference/collectives-protocol.md) and the runtime brief:
valid regions are what loads read and stores write, the rest of a fresh tile is poison; tile math runs
in the tile's dtype over the physical tile; a put/get extent of 0 is a no-op. What a put, get or
remote_load moves is decoded by ``transfer.py`` (the one planner, shared with the deferred-visibility
wrappers and the race detector); the handlers here only carry the plan out.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu import windows
from pldemu.ir import AtomicType, BufferKind, Call, DType, NotifyOp, Op, PadValue, WaitCmp
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Machine
from pldemu.runtime.mx_handlers import MX_HANDLERS
from pldemu.runtime.sites import CallSite
from pldemu.runtime.tile_handlers import TILE_HANDLERS
from pldemu.runtime.transfer import describe, plan_get, plan_put, remote_load_extent, window_of
from pldemu.runtime.values import (
    Shape,
    TensorRef,
    Tile,
    check_valid,
    flat_cell,
    prefix,
    region,
)

Handler = Callable[[Machine, CallSite, tuple[Any, ...]], Any]


def decode_attrs(call: Call) -> Mapping[str, Any]:
    """A call's attributes in the form handlers use (done once per call site, not per execution)."""
    out: dict[str, Any] = {}
    for key, value in call.attrs:
        if isinstance(value, DType):
            out[key] = value.np
        elif isinstance(value, WaitCmp):
            out[key] = value
            out[key + "_code"] = int(value)
        elif isinstance(value, AtomicType):
            out[key] = value is AtomicType.Add
        else:
            out[key] = value
    return MappingProxyType(out)


# ---------------------------------------------------------------------------------------------
# Distributed primitives
# ---------------------------------------------------------------------------------------------


def _put(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    plan = plan_put(m.rank, site, args)
    if plan is not None:
        plan.write(site.attrs["atomic"], args[3] if m.stage_pieces else None)


def _get(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    plan = plan_get(m.rank, site, args)
    if plan is not None:
        plan.read_into_target(args[3] if m.stage_pieces else None)


def _remote_load(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    t: TensorRef = args[0]
    shape: Shape = args[3]
    valid = remote_load_extent(args)
    got = window_of(site, t).remote_load(args[1], t.shape, args[2], valid)
    if valid == shape:
        return Tile(got, shape)
    data = m.poison.array(shape, got.dtype)
    data[prefix(valid)] = got
    return Tile(data, valid)


def _notify(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    sig: TensorRef = args[0]
    peer = args[1]
    cell = flat_cell("notify", m.rank, peer, sig, args[2])
    window_of(site, sig).notify(peer, cell, _wrap_int32(operator.index(args[3])), site.attrs["op"])


def _wrap_int32(value: int) -> int:
    """The notify operand is an INT32 register on the device: wrap like two's complement does.

    This matters for the all_to_all_v reset ``-read(cell)`` of a cell holding INT32_MIN (a poisoned
    data window): on hardware -INT32_MIN == INT32_MIN and the add wraps the cell to 0.
    """
    return ((value + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


def _wait(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    sig: TensorRef = args[0]
    cell = flat_cell("wait", m.rank, m.rank, sig, args[1])
    expected = operator.index(args[2])
    w = window_of(site, sig)
    # Most waits of a running recipe are already satisfied: one poll first, and only a wait that
    # blocks is published on the status board (its record then names the last wait that blocked,
    # which is all the deadlock report needs; publishing every wait cost ~2 us per wait).
    if w.test(cell, expected, site.attrs["cmp"]):
        return
    board = m.status
    assert board is not None
    board.wait_started(site.id, sig.buffer.index, cell, expected, site.attrs["cmp_code"])
    try:
        w.wait(cell, expected, site.attrs["cmp"], time.monotonic() + m.timeout, hook=board.hook,
               policy=m.wait_policy)
    except windows.WaitTimeout as err:
        raise m.deadlock(site, sig.buffer, err) from None
    board.wait_ended()


def _marker(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    """``system.fence`` / ``system.cacheinvalid``: nothing to do where every write is visible at a
    release (eager, deferred); ``runtime/fenced.py`` gives them their meaning in fenced mode."""
    return None


def _get_comm_ctx(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    return m.ctx


def _rank(m: Machine, site: CallSite, args: tuple[Any, ...]) -> int:
    return int(args[0].rank)


def _nranks(m: Machine, site: CallSite, args: tuple[Any, ...]) -> int:
    return int(args[0].size)


# ---------------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------------


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
    t.array[index] = args[2]


# ---------------------------------------------------------------------------------------------
# Tiles
# ---------------------------------------------------------------------------------------------


def _create(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    shape: Shape = args[0]
    return Tile(m.poison.array(shape, site.attrs["dtype"]), shape)


def _load(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    t: TensorRef = args[0]
    shape: Shape = args[2]
    valid = check_valid("tile.load", args[3], shape) if len(args) > 3 else shape
    src = t.array[region("tile.load", m.rank, m.rank, t.buffer, t.shape, args[1], valid)]
    if valid == shape:
        return Tile(src.copy(), shape)
    data = m.poison.array(shape, src.dtype)
    data[prefix(valid)] = src
    return Tile(data, valid)


def _store(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    tile: Tile = args[0]
    t: TensorRef = args[2]
    valid = tile.valid
    data = tile.data if valid == tile.data.shape else tile.data[prefix(valid)]
    t.array[region("tile.store", m.rank, m.rank, t.buffer, t.shape, args[1], valid)] = data


def _set_validshape(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    return Tile(tile.data, check_valid("tile.set_validshape", args[1], tile.data.shape))


def _pad_value(pad: PadValue, dtype: np.dtype[Any]) -> Any:
    if pad is PadValue.zero:
        return 0
    if is_float_dtype(dtype):
        import ml_dtypes  # here: a program without tile.fillpad on floats never loads it

        info: Any = ml_dtypes.finfo(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
    else:
        return pad is PadValue.max
    return info.max if pad is PadValue.max else info.min


def _fillpad(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    shape = tile.data.shape
    if tile.valid == shape:
        return tile
    out = np.full(shape, _pad_value(site.attrs["pad"], tile.data.dtype), tile.data.dtype)
    box = prefix(tile.valid)
    out[box] = tile.data[box]
    return Tile(out, shape)


def _binary(ufunc: np.ufunc) -> Handler:
    """Element-wise over the whole physical tile in the tile's dtype; the result keeps lhs's valid shape."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        lhs: Tile = args[0]
        return Tile(ufunc(lhs.data, args[1].data), lhs.valid)

    return handler


def _scalar(ufunc: np.ufunc) -> Handler:
    """Tile-scalar op; the scalar is converted to the tile's dtype first (FP16 math stays FP16)."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        return Tile(ufunc(tile.data, tile.data.dtype.type(args[1])), tile.valid)

    return handler


HANDLERS: Mapping[Op, Handler] = MappingProxyType(
    {
        Op.PUT: _put,
        Op.GET: _get,
        Op.REMOTE_LOAD: _remote_load,
        Op.NOTIFY: _notify,
        Op.WAIT: _wait,
        Op.FENCE: _marker,
        Op.CACHEINVALID: _marker,
        Op.GET_COMM_CTX: _get_comm_ctx,
        Op.RANK: _rank,
        Op.NRANKS: _nranks,
        Op.TENSOR_VIEW: _view,
        Op.TENSOR_READ: _read,
        Op.TENSOR_WRITE: _write,
        Op.TILE_CREATE: _create,
        Op.TILE_LOAD: _load,
        Op.TILE_STORE: _store,
        Op.TILE_SET_VALIDSHAPE: _set_validshape,
        Op.TILE_FILLPAD: _fillpad,
        Op.TILE_ADD: _binary(np.add),
        Op.TILE_SUB: _binary(np.subtract),
        Op.TILE_MUL: _binary(np.multiply),
        Op.TILE_MAXIMUM: _binary(np.maximum),
        Op.TILE_MINIMUM: _binary(np.minimum),
        Op.TILE_ADDS: _scalar(np.add),
        Op.TILE_MULS: _scalar(np.multiply),
        **TILE_HANDLERS,
        **MX_HANDLERS,
    }
)
"""The one dispatch table: every non-collective op; collectives must be lowered before running."""

_missing = sorted(op.text for op in Op if not op.is_composite and op not in HANDLERS)
_collective = sorted(op.text for op in HANDLERS if op.is_composite)
if _missing or _collective:  # pragma: no cover - import-time completeness check
    raise RuntimeError(f"runtime handler table: missing {_missing}, collectives that must not run {_collective}")

__all__ = ["HANDLERS", "Handler", "decode_attrs"]
