"""Which device a HOST dispatch runs on, and the ``device=`` forms pypto accepts.

pypto resolves ``device=`` at compile time (src/ir/transforms/materialize_comm_domain_scopes_pass.cpp,
``ResolveDeviceDescriptor``): it is a compile-time constant, or the induction variable of an enclosing
``pl.range`` whose bound is ``pld.world_size()`` or a constant (then from a constant start >= 0, step 1);
anything else is a ``ValueError``. A dispatch without ``device=`` runs where pypto's runtime puts it: the
comm-less dispatches of one run are dealt round-robin over the chips in submit order
(python/pypto/runtime/distributed_runner.py, ``_resolve_chip_worker``; the count restarts every run), and
one that passes a window cannot go without ``device=`` (distributed_codegen.cpp, ``EmitCallToWorker``:
"Call passing DistributedTensor args must carry device= attr").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pldemu.pypto.types import SymInt

_PASS = "MaterializeCommDomainScopes: "
PYPTO_REFUSES = " (pypto refuses it at compile time)"


@dataclasses.dataclass(frozen=True)
class HostLoop:
    """An enclosing HOST loop: its variable, and why pypto would refuse ``device=`` that variable (None: it
    accepts it)."""

    var: str
    problem: str | None
    devices: frozenset[int] | None = None
    """The devices ``device=var`` covers (``translate.groups.loop_devices``); None for every device."""


def constant(value: Any) -> bool:
    """A compile-time integer: not the rank count (``pld.world_size()``, ``pl.dynamic``), not a bool."""
    return isinstance(value, int) and not isinstance(value, (bool, SymInt))


def loop_problem(bounds: list[Any], world: Any) -> str | None:
    """pypto's refusal of ``device=r`` for ``r`` the variable of ``pl.range(*bounds)``; ``world`` is the
    value ``pld.world_size()`` gives (its bound is accepted whatever the start and step, as in pypto)."""
    if not 1 <= len(bounds) <= 3:
        return None  # pl.range itself refuses the call
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (bounds[0], bounds[1], (*bounds, 1)[2])
    if stop is world:
        return None
    if not constant(stop):
        return _PASS + "device=r loop bound must be ConstInt or pld.system.world_size()"
    if not constant(start):
        return _PASS + "device=r loop start must unwrap to ConstInt"
    if not constant(step) or step != 1:
        return _PASS + f"device=r over a non-unit-step loop is not supported (step={step})"
    if not 0 <= start <= stop:
        return _PASS + "device=r loop range must be [0, N) with N>=0"
    return None


def device_problem(is_name: bool, loop: HostLoop | None, value: Any, varying: bool) -> str | None:
    """pypto's refusal of a ``device=`` expression: ``loop`` is the enclosing loop whose variable the
    expression is (a bare name), ``varying`` whether it reads a loop variable or a name bound in a loop."""
    if loop is not None:
        return loop.problem
    if constant(value) and not varying:
        return None
    if is_name:
        return _PASS + "device= Var is not the induction variable of any enclosing pl.range loop"
    return _PASS + "device= expression must be ConstInt or the induction var of pl.range; got an unsupported expression"


def window_without_device(func: str) -> str:
    return (f"self.{func}(...) passes a window (pld.DistributedTensor) and has no device=: pypto refuses it (Call "
            "passing DistributedTensor args must carry device= attr); pin the dispatch with device=")


def uncovered(device: int, nranks: int) -> str:
    return (f"device {device} of the {nranks} gets no dispatch: pypto's dispatch loop must cover every device "
            "(MaterializeCommDomainScopes requires the device=r range to be [0, N); fewer dispatches are "
            "undefined behaviour); dispatch to each one, e.g. `for r in pl.range(pld.world_size()): "
            "f(..., device=r)`")


__all__ = ["PYPTO_REFUSES", "HostLoop", "constant", "device_problem", "loop_problem", "uncovered",
           "window_without_device"]
