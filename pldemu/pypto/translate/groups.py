"""Which devices use a window: pypto's comm domains (MaterializeCommDomainScopes), decided in this one module.

pypto gives every window allocation the device set of the HOST dispatches that pass a view of it
(src/ir/transforms/materialize_comm_domain_scopes_pass.cpp, ``ResolveDeviceDescriptor`` and the merge in
``ProcessHostOrch``): ``device=`` a constant N is ``{N}``; the variable of ``for r in pl.range(pld.world_size())``
is every device; of ``pl.range(N)`` or ``pl.range(start, stop)`` that range (static: the loop's whole range,
whatever the body does). A host-level collective's signal (and all_to_all_v's ``recv_counts``) has no
``device=`` of its own and takes the coverage of the collective's data / target window. Allocations with the
same merged set form one comm domain, its own communicator: ranks and ``peer`` indices on its windows are
group-local (group-local ``i`` is the i-th device of the set, in order), and a device in two domains holds
separate windows for each (each allocation is its own pldemu window anyway).

A set that is every device numbers as the world does, so only a strict subset becomes a group
(``BufferDecl.group``), which pldemu's runtime maps (``pldemu.runtime.groups``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pldemu.pypto.translate.devices import constant
from pldemu.pypto.translate.ops import COLLECTIVE_PARAMS
from pldemu.pypto.translate.values import Alloc, Dispatch, Event, HostCollective, HostView

Devices = frozenset[int] | None
"""A dispatch's device descriptor: the devices it covers; None for every device (pypto's ``kAll``)."""

_INHERITS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "pld.tensor.allreduce": ("target", ("signal",)),
    "pld.tensor.broadcast": ("target", ("signal",)),
    "pld.tensor.reduce_scatter": ("target", ("signal",)),
    "pld.tensor.allgather": ("target", ("signal",)),
    "pld.tensor.all_to_all": ("target", ("signal",)),
    "pld.tensor.all_to_all_v": ("target", ("signal", "recv_counts")),
}
"""Per host collective: its data / target argument, and the arguments that inherit its coverage (pypto's
``CollectiveConsumer`` pairs; a barrier's signal keeps the coverage of its own dispatches)."""


def loop_devices(bounds: Sequence[Any], world: Any) -> Devices:
    """The devices ``device=r`` covers for ``r`` the variable of ``pl.range(*bounds)`` (pypto refuses the
    forms this does not read: ``devices.loop_problem``)."""
    start, stop = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
    if stop is world or not (constant(start) and constant(stop)):
        return None
    return frozenset(range(start, stop))


def _views(value: Any) -> Iterable[HostView]:
    if isinstance(value, HostView):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _views(v)


def _merge(a: Devices, b: Devices) -> Devices:
    return None if a is None or b is None else a | b


def coverage(events: Sequence[Sequence[Event]]) -> dict[Alloc, Devices]:
    """Every allocation a dispatch or host collective uses, with its merged device descriptor."""
    out: dict[Alloc, Devices] = {}
    flat = [ev for evs in events for ev in evs]
    for ev in flat:
        if isinstance(ev, Dispatch):
            for view in _views([*ev.args, *(v for _, v in ev.kwargs)]):
                seen = out.get(view.alloc, frozenset())
                out[view.alloc] = _merge(seen, ev.devices)
    for ev in flat:
        if isinstance(ev, HostCollective):
            for view in _views([*ev.args, *(v for _, v in ev.kwargs)]):
                out.setdefault(view.alloc, frozenset())
            _inherit(ev, out)
    return out


def _inherit(ev: HostCollective, out: dict[Alloc, Devices]) -> None:
    rule = _INHERITS.get(ev.op)
    if rule is None:
        return
    names, _ = COLLECTIVE_PARAMS[ev.op]
    bound = {**dict(zip(names, ev.args, strict=False)), **dict(ev.kwargs)}
    data = bound.get(rule[0])
    if not isinstance(data, HostView):
        return
    for name in rule[1]:
        heir = bound.get(name)
        if isinstance(heir, HostView):
            out[heir.alloc] = _merge(out.get(heir.alloc, frozenset()), out.get(data.alloc, frozenset()))


def window_groups(events: Sequence[Sequence[Event]]) -> dict[Alloc, tuple[int, ...]]:
    """The allocations of a comm sub-domain (a strict subset of the ``len(events)`` devices), with its
    devices in order; allocations of the world (or used by no device) are absent."""
    everyone = frozenset(range(len(events)))
    return {a: tuple(sorted(d)) for a, d in coverage(events).items() if d and d != everyone}


def collective_devices(ev: HostCollective, groups: Mapping[Alloc, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The devices a host-level collective runs on: its data / target window's group (pypto emits one
    builtin call per device of the comm domain: lower_host_tensor_collectives_pass.cpp,
    ``EmitPerDeviceBuiltinCalls``); None for every device."""
    names, _ = COLLECTIVE_PARAMS[ev.op]
    bound = {**dict(zip(names, ev.args, strict=False)), **dict(ev.kwargs)}
    key = _INHERITS[ev.op][0] if ev.op in _INHERITS else "signal"
    data = bound.get(key)
    return groups.get(data.alloc) if isinstance(data, HostView) else None


__all__ = ["Devices", "collective_devices", "coverage", "loop_devices", "window_groups"]
