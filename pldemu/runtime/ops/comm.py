"""The distributed primitives: put, get, remote_load, notify, wait, and the communicator queries.

What a put, get or remote_load moves is decoded by ``pldemu.runtime.transfer`` (the one planner,
shared with the deferred-visibility wrappers and the race detector); the handlers here carry the plan out.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pldemu import windows
from pldemu.ir import Op
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.groups import group_ctx
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.transfer import plan_get, plan_put, remote_load_extent, window_of
from pldemu.runtime.values import (
    Buffer,
    Shape,
    TensorRef,
    Tile,
    buffer_tensor,
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
    valid = remote_load_extent(args)
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
        _block(m, site, sig.buffer, w, cell, expected)


def _block(m: Machine, site: CallSite, buf: Buffer, w: windows.Window, cell: int, expected: int) -> None:
    """The rest of a wait on ``w`` (``buf``'s window) that its first poll did not satisfy: published
    on the status board."""
    if m.park is not None:  # a task's block parks on its core until the condition holds (runtime.tasksched)
        m.park(site, buf, w, cell, expected)
    board = m.status
    assert board is not None
    board.wait_started(site.id, buf.index, cell, expected, site.attrs["cmp_code"])
    try:
        w.wait(cell, expected, site.attrs["cmp"], time.monotonic() + m.timeout, hook=board.hook,
               policy=m.wait_policy)
    except windows.WaitTimeout as err:
        raise m.deadlock(site, buf, err) from None
    board.wait_ended()


# ---------------------------------------------------------------------------------------------
# Bound signal ops: a call site whose signal is a program buffer, specialised once
# ---------------------------------------------------------------------------------------------

Bound = Callable[..., Any]
"""A call site's specialised entry: the call's operands after the signal, with the index list spelled
out (``notify(peer, i, j, value)``, ``wait(i, j, expected)``)."""


@dataclass(frozen=True)
class Binding:
    """How the compiler may specialise a call site of an op whose first operand is a program buffer
    named directly (``pld.system.notify(sig, ...)`` with ``sig`` a buffer the function never rebinds):
    ``bind(machine, site, buffer)`` returns the site's :data:`Bound` entry, or None where the buffer's
    shape is not one it handles; ``index_arg`` is the position of the index list it takes spelled out.

    The entry does what the handler does for the common case (in-range index, a plain INT32 int) with
    the decoding done once: a barrier round is nine signal ops, and the handler's argument tuples,
    index decoding and attribute lookups were a fifth of its CPU (docs/benchmarks.md, issue 23). Any
    other call goes to the handler itself, which indexes, wraps or refuses it as always."""

    index_arg: int
    bind: Callable[[Machine, CallSite, Buffer], Bound | None]


def _bind_notify(m: Machine, site: CallSite, buf: Buffer) -> Bound | None:
    if len(buf.shape) != 2:
        return None
    rows, cols = buf.shape
    op = site.attrs["op"]

    def notify(peer: int, i: int, j: int, value: int) -> None:
        w = buf.window
        if (w is not None and 0 <= i < rows and 0 <= j < cols and type(value) is int
                and INT32_MIN <= value <= INT32_MAX):
            w.notify(peer, i * cols + j, value, op)
        else:
            _notify(m, site, (buffer_tensor(buf), peer, (i, j), value))

    return notify


def _bind_wait(m: Machine, site: CallSite, buf: Buffer) -> Bound | None:
    if len(buf.shape) != 2:
        return None
    rows, cols = buf.shape
    cmp = site.attrs["cmp"]

    def wait(i: int, j: int, expected: int) -> None:
        w = buf.window
        if w is not None and 0 <= i < rows and 0 <= j < cols and type(expected) is int:
            cell = i * cols + j
            if not w.test(cell, expected, cmp):
                _block(m, site, buf, w, cell, expected)
        else:
            _wait(m, site, (buffer_tensor(buf), (i, j), expected))

    return wait


def _marker(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    """``system.fence`` / ``system.cacheinvalid``: nothing to do where every write is visible at a
    release (eager, deferred); ``runtime/instrument/fenced.py`` gives them their meaning in fenced mode."""
    return None


def _host_task(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
    """``system.host_task``: the embedding runs it (a resident job hands it to the process that called the
    program); anywhere else there is nobody to run it."""
    if m.host_task is None:
        raise ProgramError(f"{site.where}: host task {site.attrs['task']} (a SubWorker) needs the process that "
                           "called the program: it runs only in a resident job (a pypto call or prepared worker)")
    m.host_task(site.attrs["task"])


def _get_comm_ctx(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
    group = args[0].buffer.group
    return m.ctx if group is None else group_ctx(group, m.rank, m.ctx)


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
    Op.DEFER_WAIT: _wait,  # the compiler runs it as a wait; the task scheduler defers it
    Op.FENCE: _marker,
    Op.BAR_ALL: _marker,
    Op.CACHEINVALID: _marker,
    Op.HOST_TASK: _host_task,
    Op.DISPATCH_END: _marker,
    Op.AIV_LANE: _marker,
    Op.GET_COMM_CTX: _get_comm_ctx,
    Op.RANK: _rank,
    Op.NRANKS: _nranks,
})


COMM_BINDINGS: Mapping[Op, Binding] = MappingProxyType({
    Op.NOTIFY: Binding(2, _bind_notify),
    Op.WAIT: Binding(1, _bind_wait),
})
"""The ops whose call sites the compiler may specialise (``Binding``); every other op, and every site
not eligible, calls its handler."""


__all__ = ["COMM_BINDINGS", "COMM_HANDLERS", "Binding", "Bound"]
