"""Assemble the per-rank event lists into one pldemu Program, plus its inputs and write-backs.

Buffers: one per allocation (WINDOW, or SIGNAL when some op uses it as a signal; the dtype and shape
of its first view), one LOCAL per host slice a rank uses (``inputs[r]`` -> ``inputs`` on rank r; a
second slice of the same parameter on one rank is ``inputs_1``). The function is
``me = rank(ctx); if me == 0 {events of rank 0} else if me == 1 {...}``, one rank's events in its
program order, nothing between them.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import NR, BufferDecl, BufferKind, Program, SourcePos, Task, TensorType, Var
from pldemu.ir.walk import walk_stmts
from pldemu.pypto.capture import CapturedFunction, CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.translate.device import DeviceTranslator, Emit, inline
from pldemu.pypto.translate.devices import uncovered
from pldemu.pypto.translate.groups import collective_devices, window_groups
from pldemu.pypto.translate.ops import COLLECTIVE_PARAMS, collective
from pldemu.pypto.translate.values import (
    Alloc,
    Dispatch,
    Event,
    HostCollective,
    HostTask,
    HostTensor,
    HostView,
    Unresolved,
)
from pldemu.pypto.types import INT32, Direction, TensorAnn, dim_expr


@dataclasses.dataclass(frozen=True)
class WriteBack:
    """After the run: rank ``rank``'s buffer ``buffer`` goes to host ``param[key]``."""

    rank: int
    buffer: str
    param: str
    key: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class HostTaskPlan:
    """A SubWorker call of the translated program: the task, and per rank the buffers that hold its host
    tensors (sent to the calling process before the task, loaded with what it left after)."""

    task: HostTask
    buffers: tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Built:
    """A translated call: the program, each rank's inputs, the write-backs, the host collectives."""

    program: Program
    inputs: tuple[dict[str, np.ndarray], ...]
    writebacks: tuple[WriteBack, ...]
    collectives: tuple[HostCollective, ...]
    truncating: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(origin, ``tdiv`` / ``trem`` as printed) -> the user's ``//`` / ``%`` text (``Emit.truncating``)."""
    sources: tuple[Mapping[str, tuple[str, tuple[int, ...]]], ...] = ()
    """Per rank: each host-slice buffer -> the host parameter and index it holds (``inputs[r]`` -> ``("inputs",
    (r,))``)."""
    host_tasks: tuple[HostTaskPlan, ...] = ()
    """The SubWorker calls, by task number."""


@dataclasses.dataclass
class _Plan:
    prog: CapturedProgram
    nranks: int
    windows: dict[Alloc, Var] = dataclasses.field(default_factory=dict)
    locals_: dict[str, Var] = dataclasses.field(default_factory=dict)
    slices: list[dict[tuple[str, tuple[int, ...]], str]] = dataclasses.field(default_factory=list)
    arrays: dict[tuple[str, tuple[int, ...]], HostTensor] = dataclasses.field(default_factory=dict)
    users: dict[tuple[str, tuple[int, ...]], dict[int, bool]] = dataclasses.field(default_factory=dict)
    """Per Out / InOut host slice: the devices that use it, and whether each writes it."""
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    """Every buffer's numeric shape at this call's rank count."""

    def error(self, message: str, line: int) -> FrontendError:
        return FrontendError(message, self.prog.file, line)

    def window(self, view: HostView) -> Var:
        var = self.windows.get(view.alloc)
        t = TensorType(view.dtype.ir, tuple(dim_expr(d) for d in view.shape), None, True)
        if var is None:
            var = self.windows[view.alloc] = Var(view.alloc.name, t)
            self.shapes[var.name] = tuple(int(d) for d in view.shape)
        elif var.type != t:
            raise self.error(f"pld.window of {view.alloc.name} as {list(view.shape)} {view.dtype!r}: pldemu "
                             f"needs every view of one buffer to have the first view's shape and dtype", view.line)
        return var

    def host_slice(self, rank: int, t: HostTensor, line: int, writes: bool) -> Var:
        mine = self.slices[rank]
        key = (t.param, t.key)
        name = mine.get(key)
        if name is None:
            k = sum(1 for p, _ in mine if p == t.param)
            name = mine[key] = t.param if k == 0 else f"{t.param}_{k}"
            self.arrays[key] = t
        if t.direction is not Direction.IN:
            self.share(rank, t, line, writes)
        dims = t.dims if len(t.dims) == len(t.shape) else t.shape
        t_ir = TensorType(t.dtype.ir, tuple(dim_expr(d) for d in dims))
        var = self.locals_.setdefault(name, Var(name, t_ir))
        self.shapes[name] = t.shape
        if var.type != t_ir:
            raise self.error(f"host slice {name} has shape {list(t.shape)} on device {rank} and another "
                             "shape on another device", line)
        return var

    def share(self, rank: int, t: HostTensor, line: int, writes: bool) -> None:
        """A host slice that one device writes is used by no other device."""
        users = self.users.setdefault((t.param, t.key), {})
        users[rank] = users.get(rank, False) or writes
        others = [r for r in users if r != rank]
        writer = next((r for r in others if users[r]), None)
        if writer is not None:
            how = f"device {writer} and device {rank}" if writes else f"device {writer} and read by device {rank}"
        elif writes and others:
            how = f"device {rank} and read by device {others[0]}"
        else:
            return
        raise self.error(f"host tensor {t.param}{list(t.key)} is written by {how}: pypto would order them "
                         "through host memory, pldemu projects each device onto its own rank (give each device "
                         "its own slice, or pass the data through a window)", line)

    def bind(self, rank: int, value: Any, line: int, writes: bool = True) -> Any:
        if isinstance(value, HostView):
            return self.window(value)
        if isinstance(value, HostTensor):
            return self.host_slice(rank, value, line, writes)
        if isinstance(value, Alloc):
            raise self.error(f"{value.name} is an alloc_window_buffer: pass pld.window({value.name}, shape, "
                             "dtype=) to a device function", line)
        if isinstance(value, Unresolved):
            raise self.error(f"this passes on a result of self.{value.func} (line {value.line}) that is not one "
                             "of its tensor arguments: pldemu's projection passes a dispatch's result on only "
                             "when the Orchestration returns one of its tensor parameters", line)
        if isinstance(value, (list, tuple)):
            return type(value)(self.bind(rank, v, line, writes) for v in value)
        return value


def build(prog: CapturedProgram, events: list[list[Event]], dims: Mapping[str, int],
          resident: frozenset[str] = frozenset()) -> Built:
    """The program for ``len(events)`` ranks (``events[d]``: rank d's projection). The host parameters in
    ``resident`` hold tensors that stay on the devices (a prepared worker's): they get no input array."""
    nranks = len(events)
    plan = _Plan(prog, nranks, slices=[{} for _ in range(nranks)])
    groups = window_groups(events)
    bound = [[_bind_event(plan, d, ev) for ev in evs if _runs_on(ev, d, groups)] for d, evs in enumerate(events)]
    names = [v.name for v in plan.windows.values()] + list(plan.locals_)
    fb = FunctionBuilder("main", used_names=[*names, NR.name])
    emit = Emit(prog, fb, nranks, set(), dims)
    host_fn = prog.host()
    fb.origin = SourcePos(host_fn.file, host_fn.node.lineno)
    me: Var | None = None
    if nranks > 1:
        world = [v for a, v in plan.windows.items() if a not in groups]
        if not world:
            # Devices that share no world window still need their global rank to pick their dispatches.
            ctx_window = Alloc(fb.fresh("device_ctx"), 4, host_fn.node.lineno)
            world = [plan.window(HostView(ctx_window, (1, 1), INT32, host_fn.node.lineno))]
        me = fb.pld.system.rank(fb.pld.system.get_comm_ctx(world[0]), hint="device")
    _emit_ranks(emit, host_fn, bound, me, 0)
    idle = next((d for d, evs in enumerate(events) if not evs), None)
    if idle is not None:  # after the translation: a mistake at a line of its own is reported first
        raise FrontendError(uncovered(idle, nranks), prog.file, host_fn.node.lineno)
    signals = {emit.views.get(s, s) for s in emit.signals}
    decls = [BufferDecl(v, _kind(plan, v, signals), groups.get(a)) for a, v in plan.windows.items()]
    decls += [BufferDecl(v, BufferKind.LOCAL) for v in plan.locals_.values()]
    decls += [BufferDecl(v, BufferKind.LOCAL) for v, _ in emit.scratch.values()]
    program = Program(prog.name, tuple(decls), (fb.build(),), "main", nranks)
    zeros = {d.var.name: _zeros(plan.shapes[d.var.name], d.var.type.dtype.np)
             for d in decls if d.kind is BufferKind.WINDOW and isinstance(d.var.type, TensorType)}
    zeros.update({v.name: _zeros(shape, v.type.dtype.np) for v, shape in emit.scratch.values()
                  if isinstance(v.type, TensorType)})
    inputs = tuple({**zeros, **_inputs(plan, d, resident)} for d in range(nranks))
    writebacks = tuple(WriteBack(d, name, p, k) for d in range(nranks) for (p, k), name in plan.slices[d].items()
                       if plan.arrays[(p, k)].direction is not Direction.IN)
    hosts = tuple(ev for ev in events[0] if isinstance(ev, HostCollective))
    sources = tuple({name: key for key, name in plan.slices[d].items()} for d in range(nranks))
    tasks = tuple(_task_plan(ev, sources) for ev in events[0] if isinstance(ev, HostTask))
    return Built(program, inputs, writebacks, hosts, dict(emit.truncating), sources, tasks)


def _zeros(shape: Sequence[int], dtype: np.dtype[Any]) -> np.ndarray:
    """A buffer's zero start as one element seen ``shape`` times: the caller holds none of a model's windows
    and scratch tensors (the memory check before launch sizes them; a rank makes its own)."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def _task_plan(task: HostTask, sources: tuple[dict[str, tuple[str, tuple[int, ...]]], ...]) -> HostTaskPlan:
    """Which buffers of each rank hold a host tensor ``task`` takes (any slice of it)."""
    params = {v.param for v in _flat_values([*task.args, *(v for _, v in task.kwargs)]) if isinstance(v, HostTensor)}
    return HostTaskPlan(task, tuple(tuple(sorted(n for n, (p, _) in mine.items() if p in params)) for mine in sources))


def _flat_values(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat_values(list(v)) if isinstance(v, (list, tuple)) else [v])
    return out


def _runs_on(ev: Event, rank: int, groups: Mapping[Alloc, tuple[int, ...]]) -> bool:
    """A dispatch runs where the projection put it; a host task on every rank (each meets it); a host
    collective on the devices of its comm domain."""
    if isinstance(ev, (Dispatch, HostTask)):
        return True
    devices = collective_devices(ev, groups)
    return devices is None or rank in devices


def _bind_event(plan: _Plan, rank: int, ev: Event) -> Event:
    if isinstance(ev, HostTask):
        return ev  # its tensors stay host tensors: the calling process runs it
    fn = plan.prog.functions[ev.func] if isinstance(ev, Dispatch) else None
    params = fn.params if fn is not None else ()
    args = tuple(plan.bind(rank, a, ev.line, _writes(fn, params[i] if i < len(params) else ""))
                 for i, a in enumerate(ev.args))
    kwargs = tuple((k, plan.bind(rank, v, ev.line, _writes(fn, k))) for k, v in ev.kwargs)
    return dataclasses.replace(ev, args=args, kwargs=kwargs)


def _writes(fn: CapturedFunction | None, param: str) -> bool:
    """Whether a dispatch of ``fn`` may write its argument ``param`` (a host collective may write any)."""
    ann = fn.annotations.get(param) if fn is not None else None
    return not (isinstance(ann, TensorAnn) and ann.direction is Direction.IN)


def _kind(plan: _Plan, var: Var, signals: set[str]) -> BufferKind:
    if var.name not in signals:
        return BufferKind.WINDOW
    assert isinstance(var.type, TensorType)
    if var.type.dtype != DType.INT32:
        alloc = next(a for a, v in plan.windows.items() if v is var)
        raise plan.error(f"{var.name} is used as a signal but viewed as {var.type.dtype.value}: signals are "
                         "pl.INT32", alloc.line)
    return BufferKind.SIGNAL


def _emit_ranks(emit: Emit, host_fn: Any, bound: list[list[Event]], me: Var | None, rank: int) -> None:
    if me is None or rank == len(bound) - 1:
        _emit_events(emit, host_fn, bound[rank])
        return
    with emit.fb.if_(me.eq(rank)):
        _emit_events(emit, host_fn, bound[rank])
    with emit.fb.else_():
        _emit_ranks(emit, host_fn, bound, me, rank + 1)


def _emit_events(emit: Emit, host_fn: Any, events: list[Event]) -> None:
    for ev in events:
        at = ast.Pass(lineno=ev.line, col_offset=0)
        emit.fb.origin = SourcePos(host_fn.file, ev.line)
        if isinstance(ev, Dispatch):
            _dispatch(emit, ev, at)
        elif isinstance(ev, HostTask):
            emit.fb.pld.system.host_task(ev.index)
        else:
            tr = DeviceTranslator(emit, host_fn, {})
            names, defaults = COLLECTIVE_PARAMS[ev.op]
            b = dict(defaults)
            b.update(zip(names, ev.args, strict=False))
            b.update(ev.kwargs)
            missing = [n for n in names if n not in b]
            if missing:
                raise emit.prog.error(f"{ev.op}: missing {', '.join(missing)} (pypto synthesises the signal "
                                      "of a HOST pld.tensor.allreduce only)", at)
            collective(tr, ev.op, b, at)


def _dispatch(emit: Emit, ev: Dispatch, at: ast.stmt) -> None:
    """One HOST dispatch inlined; when it submits tasks, a ``system.dispatch_end`` after it: they complete
    before the rank's next dispatch starts (pypto keeps a rank's dispatches in program order)."""
    with emit.fb.block() as body:
        inline(emit, emit.prog.functions[ev.func], list(ev.args), dict(ev.kwargs), at, dispatched=True)
    for st in body:
        emit.fb.emit(st)
    if any(isinstance(s, Task) for s in walk_stmts(body)):
        emit.fb.pld.system.dispatch_end()


def _inputs(plan: _Plan, rank: int, resident: frozenset[str]) -> dict[str, np.ndarray]:
    mine = {name: key for key, name in plan.slices[rank].items()}
    out: dict[str, np.ndarray] = {}
    for name, var in plan.locals_.items():
        assert isinstance(var.type, TensorType)
        want = var.type.dtype.np
        if name in mine and mine[name][0] in resident:
            continue
        if name in mine:
            arr = plan.arrays[mine[name]].array
            if arr.dtype != want:
                raise plan.error(f"host tensor {mine[name][0]} is {arr.dtype}, its annotation says "
                                 f"{var.type.dtype.value}", 0)
            out[name] = arr  # sent as it is (np.save writes any layout): the caller copies nothing
        else:
            out[name] = _zeros(plan.shapes[name], want)
    return out


__all__ = ["Built", "HostTaskPlan", "WriteBack", "build"]
