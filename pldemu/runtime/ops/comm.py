"""The distributed primitives: put, get, remote_load, notify, wait, and the communicator queries.

What a put, get or remote_load moves is decoded by ``pldemu.runtime.transfer`` (the one planner,
shared with the deferred-visibility wrappers and the race detector); the handlers here carry the plan out.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pldemu import windows
from pldemu.ir import Op
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.transfer import plan_get, plan_put, remote_load_extent, window_of
from pldemu.runtime.values import (
    Shape,
    TensorRef,
    Tile,
    flat_cell,
    prefix,
    wrap_int32,
)
from pldemu.windows.base import INT32_MAX, INT32_MIN

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
    valid = remote_load_extent(args) if len(args) > 4 and args[4] != shape else shape
    w = t.buffer.window
    if w is None:
        w = window_of(site, t)  # raises: a rank-local tensor
    got = w.remote_load(args[1], t.shape, args[2], valid)
    if valid == shape:
        return Tile(got, shape)
    data = m.poison.array(shape, got.dtype)
    data[prefix(valid)] = got
    return Tile(data, valid)


def _notify(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    sig: TensorRef
    sig, peer, index, value = args
    cell = flat_cell("notify", m.rank, peer, sig, index)
    w = sig.buffer.window
    if w is None:
        w = window_of(site, sig)  # raises: a rank-local tensor
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:  # plain INT32 values skip the calls
        value = wrap_int32(operator.index(value))
    w.notify(peer, cell, value, site.attrs["op"])


def _wait(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    sig: TensorRef
    sig, index, expected = args
    cell = flat_cell("wait", m.rank, m.rank, sig, index)
    if type(expected) is not int:
        expected = operator.index(expected)
    w = sig.buffer.window
    if w is None:
        w = window_of(site, sig)  # raises: a rank-local tensor
    # Most waits of a running recipe are already satisfied: one poll first, and only a wait that
    # blocks is published on the status board (its record then names the last wait that blocked,
    # which is all the deadlock report needs; publishing every wait cost ~2 us per wait).
    if not w.test(cell, expected, site.attrs["cmp"]):
        _block(m, site, sig, w, cell, expected)


def _block(m: Machine, site: CallSite, sig: TensorRef, w: windows.Window, cell: int, expected: int) -> None:
    """The rest of a wait on ``w`` (``sig``'s window) that its first poll did not satisfy: published
    on the status board."""
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
    release (eager, deferred); ``runtime/instrument/fenced.py`` gives them their meaning in fenced mode."""
    return None


def _get_comm_ctx(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    return m.ctx


def _rank(m: Machine, site: CallSite, args: tuple[Any, ...]) -> int:
    return int(args[0].rank)


def _nranks(m: Machine, site: CallSite, args: tuple[Any, ...]) -> int:
    return int(args[0].size)


COMM_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
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
})


__all__ = ["COMM_HANDLERS"]
