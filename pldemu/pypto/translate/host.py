"""The HOST orchestrator projected onto one rank: an ordered list of events.

The host body is evaluated statically (it is plain Python over ints, closure values and host tensors):
``pl.range`` is a Python range, ``pld.world_size()`` the rank count, ``pld.alloc_window_buffer`` a
named allocation, ``pld.window`` a typed view, ``x[r]`` a host slice. ``self.orch(..., device=e)`` is
an event of rank d only where ``e`` evaluates to d, ``e`` in a form pypto accepts
(``pldemu.pypto.translate.devices``); without ``device=`` the dispatches go round-robin over the
devices, as pypto's runtime deals them; a host-level ``pld.tensor.*`` is an event of every rank.
Nothing else is added between events: pypto keeps only per-rank program order between dispatches, so
no barrier is inserted (issue 21, item 4). Host control flow that depends on tensor data is refused.
"""

from __future__ import annotations

import ast
import contextlib
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir.nodes import NR
from pldemu.pypto.capture import CapturedFunction, CapturedProgram, Kind
from pldemu.pypto.translate.builtins import builtin_refusal
from pldemu.pypto.translate.devices import (
    PYPTO_REFUSES,
    HostLoop,
    constant,
    device_problem,
    loop_problem,
    window_without_device,
)
from pldemu.pypto.translate.evaluator import Evaluator, bind_call
from pldemu.pypto.translate.groups import loop_devices
from pldemu.pypto.translate.ops import COLLECTIVE_PARAMS, lane_count
from pldemu.pypto.translate.returns import dispatch_result
from pldemu.pypto.translate.statics import check_static_assert, static_print_line
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
from pldemu.pypto.types import INT32, Direction, DslOp, PyDType, SymInt

_HOST_NUMBERS: Mapping[str, tuple[tuple[str, str], dict[str, Any]]] = MappingProxyType({
    "pl.cast": (("input", "target_type"), {"mode": "round"}),
    "pl.const": (("value", "dtype"), {}),
})
"""The typed numbers a HOST function may pass to a device: pypto's parameter names and defaults."""


class _Return(Exception):
    pass


class HostProjection(Evaluator):
    """Evaluates the host body for ``rank`` of ``nranks``, collecting :attr:`events`."""

    WHERE = "at HOST level"

    def __init__(self, prog: CapturedProgram, env: dict[str, Any], dims: Mapping[str, int], rank: int,
                 nranks: int, allocs: dict[int, Alloc], created: dict[int, HostTensor] | None = None) -> None:
        super().__init__(prog, env, dims, prog.host())
        self.rank = rank
        self.nranks = nranks
        self.events: list[Event] = []
        self.allocs = allocs
        """Allocation per host line: every rank sees the same Alloc objects."""
        self.created = created if created is not None else {}
        """HOST ``pl.create_tensor`` intermediates per host line: every rank sees the same host array."""
        self._tasks = 0
        """SubWorker calls so far (each gets its number in host order)."""
        self._loops: list[HostLoop] = []
        """The HOST loops that enclose the statement being evaluated, innermost last."""
        self._in_loop: set[str] = set()
        """Host names last bound inside a loop (not compile-time constants for ``device=``)."""
        self._commless = 0
        """Dispatches without ``device=`` so far: pypto deals them round-robin over the devices."""
        self.world = SymInt(nranks, NR)
        """What ``pld.world_size()`` gives (one object: a loop bounded by it is told by identity)."""

    def tensor_shape(self, value: Any) -> tuple[int, ...] | None:
        if isinstance(value, HostTensor):
            return value.dims if len(value.dims) == len(value.shape) else value.shape
        return value.shape if isinstance(value, HostView) else None

    def run(self, body: list[ast.stmt]) -> list[Event]:
        with contextlib.suppress(_Return):
            self.block(body)
        return self.events

    def block(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.stmt(s)

    def branch(self, s: ast.If) -> None:
        cond = self.eval(s.test)
        if not isinstance(cond, (bool, int)):
            raise self.error("host control flow must not depend on tensor data (the per-rank "
                             f"projection evaluates it statically): {ast.unparse(s.test)!r}", s)
        self.block(s.body if cond else s.orelse)

    def stmt_Return(self, s: ast.Return) -> None:
        if s.value is not None:  # `return self.orch(...)` dispatches before the host returns
            self.eval(s.value)
        raise _Return

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, Unresolved):
            # A dispatch result that is none of its arguments: host code may name it, not pass it on.
            for t in target.elts:
                self.assign(t, value)
        else:
            super().assign(target, value)

    def bind(self, name: str, value: Any) -> None:
        if self._loops:
            self._in_loop.add(name)
        else:
            self._in_loop.discard(name)
        super().bind(name, value)

    def loop(self, s: ast.For) -> None:
        bounds = self.range_bounds(s.iter)
        it = range(*bounds) if bounds is not None else self.eval(s.iter)
        if not isinstance(it, range) or not isinstance(s.target, ast.Name):
            raise self.error("a HOST loop is `for r in pl.range(...)` over ints", s)
        if s.orelse:
            raise self.error("for ... else is not supported", s)
        self._loops.append(HostLoop(s.target.id, loop_problem(bounds if bounds is not None else [None], self.world),
                                    loop_devices(bounds, self.world) if bounds is not None else None))
        try:
            for i in it:
                self.env[s.target.id] = i
                self.block(s.body)
        finally:
            self._loops.pop()

    def range_bounds(self, node: ast.expr) -> list[Any] | None:
        """The evaluated arguments of ``pl.range(...)`` (or ``range(...)``), None for another iterable."""
        if not isinstance(node, ast.Call) or node.keywords:
            return None
        callee = self.eval(node.func)
        if callee is not range and not (isinstance(callee, DslOp) and callee.name == "pl.range"):
            return None
        bounds = [self.eval(a) for a in node.args]
        if not all(isinstance(b, int) for b in bounds) or not 1 <= len(bounds) <= 3:
            raise self.error("a HOST loop is `for r in pl.range(...)` over ints", node)
        return bounds

    def device_of(self, node: ast.Call, fn: CapturedFunction, args: tuple[Any, ...],
                  kwargs: list[tuple[str, Any]]) -> tuple[int, frozenset[int] | None]:
        """The device ``self.f(...)`` runs on: its ``device=`` in a form pypto accepts, else the next device
        round-robin (pypto's runtime deals comm-less dispatches so), unless it passes a window; and the
        devices that ``device=`` covers (``translate.groups``)."""
        kw = next((k for k in node.keywords if k.arg == "device"), None)
        if kw is None:
            if any(isinstance(v, HostView) for v in _flat([*args, *(v for _, v in kwargs)])):
                raise self.error(window_without_device(fn.name), node)
            self._commless += 1
            return (self._commless - 1) % self.nranks, None
        device = self.eval(kw.value)
        is_name = isinstance(kw.value, ast.Name)
        names = {n.id for n in ast.walk(kw.value) if isinstance(n, ast.Name)}
        loop = next((lp for lp in reversed(self._loops) if is_name and lp.var in names), None)
        varying = bool(names & ({lp.var for lp in self._loops} | self._in_loop))
        problem = device_problem(is_name, loop, device, varying)
        if problem is not None:
            raise self.error(f"device={ast.unparse(kw.value)}: {problem}{PYPTO_REFUSES}", kw.value)
        return device, (loop.devices if loop is not None else frozenset({device}) if constant(device) else None)

    def call_self(self, node: ast.Call, name: str) -> Any:
        """``self.f(..., device=d)``: a dispatch, which this rank runs when ``d`` is its rank; its value is
        what ``f`` returns of its arguments (``pldemu.pypto.translate.returns``), on every rank."""
        fn = self.callee_function(node, name)
        kwargs = [(kw.arg, self.eval(kw.value)) for kw in node.keywords if kw.arg not in ("device", None)]
        args = tuple(self.eval(a) for a in node.args)
        if fn.kind is Kind.SUB_WORKER:
            return self.sub_worker(node, fn, args, kwargs)
        device, covers = self.device_of(node, fn, args, kwargs)
        if isinstance(device, bool) or not isinstance(device, int):
            raise self.error(f"device= must evaluate to an int at HOST level, got {device!r}", node)
        if not 0 <= device < self.nranks:
            raise self.error(f"device={device} is outside the {self.nranks} devices of the job", node)
        if device == self.rank:
            self.events.append(Dispatch(name, args, tuple(kwargs), node.lineno, covers))
        return dispatch_result(self.prog, fn, {**dict(zip(fn.params, args, strict=False)), **dict(kwargs)},
                               node.lineno)

    def callee_function(self, node: ast.Call, name: str) -> CapturedFunction:
        """``self.name``: an Orchestration (a dispatch) or a SubWorker (a host task)."""
        fn = self.prog.functions.get(name)
        return fn if fn is not None and fn.kind is Kind.SUB_WORKER else super().callee_function(node, name)

    def sub_worker(self, node: ast.Call, fn: CapturedFunction, args: tuple[Any, ...],
                   kwargs: list[tuple[str, Any]]) -> Any:
        """``self.sub(...)`` of a SubWorker: a host task of every rank (in host order), run by the process
        that called the program; its value, what the SubWorker returns of its arguments."""
        if any(kw.arg == "device" for kw in node.keywords):
            raise self.error(f"self.{fn.name}: a SubWorker runs on the host, not on a device (no device=)", node)
        bound = {**dict(zip(fn.params, args, strict=False)), **dict(kwargs)}
        for p, v in bound.items():
            if isinstance(v, (HostView, Alloc)):
                raise self.error(f"self.{fn.name}: {p} is a window; a SubWorker takes host tensors and scalars", node)
        self.events.append(HostTask(fn.name, args, tuple(kwargs), node.lineno, self._tasks))
        self._tasks += 1
        return dispatch_result(self.prog, fn, bound, node.lineno)

    def create(self, node: ast.Call) -> HostTensor:
        """HOST ``pl.create_tensor(shape, dtype)``: a host intermediate, zeros (what the devices and the
        SubWorkers that take it write, it holds); the same array on every rank's projection."""
        name = "pl.create_tensor"
        if self.lhs is None:
            raise self.error(f"{name}(...) at HOST level must be assigned to a name", node)
        b = bind_call(self, node, ("shape", "dtype"), {"layout": None, "manual_dep": False, "init_value": None}, name)
        shape = b["shape"]
        if not isinstance(shape, (list, tuple)) or not shape or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
            raise self.error(f"{name}: shape must be a list of positive ints, got {shape!r}", node)
        if not isinstance(b["dtype"], PyDType):
            raise self.error(f"{name}: dtype must be a pl dtype, got {b['dtype']!r}", node)
        found = self.created.get(node.lineno)
        if found is None:
            init = b["init_value"] or 0
            array = np.full(tuple(int(d) for d in shape), init, b["dtype"].ir.np)
            found = self.created[node.lineno] = HostTensor(self.lhs, (), array, b["dtype"], Direction.INOUT,
                                                           tuple(int(d) for d in shape))
        return found

    def call_dsl(self, name: str, node: ast.Call) -> Any:
        if name == "pld.world_size":
            return self.world
        if name in ("pl.create_tensor", "pl.tensor.create", "pl.tensor.create_tensor"):
            return self.create(node)
        if name == "pl.range":
            return range(*[self.eval(a) for a in node.args])
        if name == "pld.alloc_window_buffer":
            return self.alloc(node)
        if name in ("pl.tensor.dim", "pl.dim"):
            return self.dim(node)
        if name == "pl.static_assert":
            return check_static_assert(self, node)
        if name == "pl.static_print":
            if self.rank == 0:  # every rank evaluates the same HOST body: printed once
                print(static_print_line(self, node, self.prog.host().file))
            return None
        if name in _HOST_NUMBERS:
            return self.number(name, node)
        if name == "pld.window":
            b = bind_call(self, node, ("buf", "shape"), {"dtype": None}, name)
            if not isinstance(b["buf"], Alloc) or not isinstance(b["dtype"], PyDType):
                raise self.error("pld.window(buf, shape, dtype=) takes an alloc_window_buffer and a dtype", node)
            shape = tuple(d if isinstance(d, SymInt) else int(d) for d in b["shape"])
            nbytes = b["dtype"].nbytes
            for d in shape:
                nbytes *= d
            if nbytes > b["buf"].nbytes:
                raise self.error(f"pld.window of {shape} {b['dtype']!r} needs {nbytes} bytes; the buffer "
                                 f"{b['buf'].name} has {b['buf'].nbytes}", node)
            return HostView(b["buf"], shape, b["dtype"], node.lineno)
        if name in COLLECTIVE_PARAMS:
            names, defaults = COLLECTIVE_PARAMS[name]
            for kw in node.keywords:
                if kw.arg not in names and kw.arg not in defaults:
                    raise self.error(f"{name}: unknown keyword argument {kw.arg!r}", kw)
            args = tuple(self.eval(a) for a in node.args)
            kwargs = tuple((kw.arg, self.eval(kw.value)) for kw in node.keywords if kw.arg is not None)
            if name == "pld.tensor.allreduce" and len(args) == 1 and "signal" not in dict(kwargs):
                kwargs += (("signal", self.synthesised_signal(node, dict(kwargs))),)
            refused = builtin_refusal(name, {**defaults, **dict(zip(names, args, strict=False)), **dict(kwargs)},
                                      self.nranks)
            if refused is not None:
                raise self.error(refused, node)
            self.events.append(HostCollective(name, args, kwargs, node.lineno))
            return args[1] if name in ("pld.tensor.allgather", "pld.tensor.all_to_all",
                                       "pld.tensor.all_to_all_v") else (args[0] if args else None)
        raise self.error(f"{name} cannot be used at HOST level", node)

    def number(self, name: str, node: ast.Call) -> int | float:
        """``pl.cast(number, dtype)`` / ``pl.const(number, dtype)`` at HOST level (pypto-lib passes
        ``pl.cast(0, pl.INT32)`` and ``pl.const(1, pl.INT32)`` as a device's scalar argument): the number, as
        the dtype's kind of number."""
        params, defaults = _HOST_NUMBERS[name]
        b = bind_call(self, node, params, defaults, name)
        value, target = b[params[0]], b[params[1]]
        if not isinstance(target, PyDType) or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{name} at HOST level takes a number and a dtype ({name}(0, pl.INT32))", node)
        if target.ir.is_float:
            return float(value)
        if isinstance(value, float):
            raise self.error(f"{name} of the float {value} to {target!r} at HOST level is not supported by pldemu; "
                             "pass an int", node)
        return value

    def dim(self, node: ast.Call) -> int:
        """``pl.tensor.dim(t, axis)`` of a host tensor or a window view: its dim (``NR``'s :class:`SymInt`
        for the rank count), as in a device body."""
        b = bind_call(self, node, ("tensor", "axis"), {}, "pl.tensor.dim")
        t, axis = b["tensor"], b["axis"]
        shape = t.dims if isinstance(t, HostTensor) else t.shape if isinstance(t, HostView) else None
        if shape is None:
            raise self.error(f"pl.tensor.dim: tensor must be a host tensor or a window, got {t!r}", node)
        if isinstance(axis, bool) or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
            raise self.error(f"pl.tensor.dim: axis must be a static int in [-{len(shape)}, {len(shape)}), "
                             f"got {axis!r}", node)
        d: int = shape[axis]
        return d

    def synthesised_signal(self, node: ast.Call, kwargs: dict[str, Any]) -> HostView:
        """The signal pypto's SynthesizeAllReduceSignals gives a HOST allreduce that omits one: a private
        INT32 window of ``[world_size, core_num]``, one per call site (so not inside a host loop)."""
        if self._loops:
            raise self.error("pld.tensor.allreduce without an explicit signal is not supported inside a HOST "
                             "loop (pypto allocates the synthesised signal once per call site): pass a signal "
                             "window, or hoist the call out of the loop", node)
        if str(kwargs.get("mode", "mesh")) != "mesh":
            raise self.error("pld.tensor.allreduce(mode='ring') at HOST level needs an explicit signal of "
                             "[2 * (NR - 1) + 1, NR] (pypto synthesises mesh signals only)", node)
        lanes = lane_count(self, "pld.tensor.allreduce", kwargs, node)
        key = -node.lineno  # apart from the allocations, which are keyed by their (positive) line
        found = self.allocs.get(key)
        if found is None:
            found = self.allocs[key] = Alloc(f"allreduce_signal_{node.lineno}",
                                                      self.nranks * lanes * INT32.nbytes, node.lineno)
        return HostView(found, (SymInt(self.nranks, NR), lanes), INT32, node.lineno)

    def alloc(self, node: ast.Call) -> Alloc:
        if self.lhs is None:
            raise self.error("pld.alloc_window_buffer(...) must be assigned to a name", node)
        b = bind_call(self, node, ("size",), {"dtype": None}, "pld.alloc_window_buffer")
        nbytes, dtype = b["size"], b["dtype"]
        if isinstance(nbytes, (list, tuple)) and isinstance(dtype, PyDType):
            # pypto's shape + dtype form: product(shape) x dtype.get_byte() bytes.
            nbytes = math.prod([dtype.nbytes, *nbytes])
        elif dtype is not None or isinstance(nbytes, (list, tuple)):
            raise self.error("pld.alloc_window_buffer takes a size in bytes, or a shape and dtype=", node)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            raise self.error(f"pld.alloc_window_buffer: size must be a positive int, got {nbytes!r}", node)
        found = self.allocs.get(node.lineno)
        if found is None:
            found = self.allocs[node.lineno] = Alloc(self.lhs, nbytes, node.lineno)
        return found


def _flat(values: list[Any]) -> list[Any]:
    return [x for v in values for x in (_flat(list(v)) if isinstance(v, (list, tuple)) else [v])]


def host_params(prog: CapturedProgram, args: tuple[Any, ...]) -> dict[str, HostTensor]:
    """Already-bound host arguments by name (see ``pldemu.pypto.execute``)."""
    host = prog.host()
    return dict(zip(host.params, args, strict=True))


__all__ = ["HostProjection", "host_params"]
