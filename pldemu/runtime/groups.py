"""Communication sub-domains at run time: group-local peers mapped to global ranks, and how reports name them.

A window declared with a group (``BufferDecl.group``: pypto's comm domain, the devices whose dispatches
use it) is addressed with group-local numbers, as on pypto's per-domain communicator: its
``pld.system.get_comm_ctx`` gives the group's rank and size, and the ``peer`` operand of an op whose
remote side is that window is group-local. The compiler maps that operand to the global rank
``group[peer]`` once, before the handler, the listeners (race detector, trace) and the instrumented
handlers see the call, so everything after it speaks global ranks; reports add the group-local number
with :func:`rank_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir import Op
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.values import CommCtx

Group = tuple[int, ...]

REMOTE_OPERAND: Mapping[Op, int] = MappingProxyType({
    Op.PUT: 0,
    Op.GET: 2,
    Op.REMOTE_LOAD: 0,
    Op.NOTIFY: 0,
})
"""Per op with a ``peer`` operand (always operand 1): the operand that is the peer's tensor."""


def group_text(group: Group) -> str:
    return "{" + ", ".join(map(str, group)) + "}"


def rank_text(rank: int, group: Group | None) -> str:
    """``rank 2``, or ``peer 1 of group {1, 2} = rank 2`` when ``rank`` is addressed in ``group``."""
    if group is None or rank not in group:
        return f"rank {rank}"
    return f"peer {group.index(rank)} of group {group_text(group)} = rank {rank}"


def group_ctx(group: Group | None, rank: int, world: CommCtx) -> CommCtx:
    """What ``get_comm_ctx`` gives ``rank`` on a window of ``group``: the group's rank and size."""
    if group is None:
        return world
    if rank not in group:
        raise ProgramError(f"rank {rank} is not in the window's comm group {group_text(group)}: only the group's "
                           "devices hold a communicator for it")
    return CommCtx(group.index(rank), len(group))


def global_peer(op: Op, group: Group, peer: Any) -> int:
    """The global rank of group-local ``peer`` (refused outside the group)."""
    p = int(peer)
    if not 0 <= p < len(group):
        raise ProgramError(f"{op.text}: peer {p} is outside comm group {group_text(group)} ({len(group)} devices: "
                           f"group-local peers are 0..{len(group) - 1})")
    return group[p]


def peer_mapper(op: Op) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """For an op with a ``peer`` operand: the function that maps a call's arguments' group-local peer to its
    global rank when the remote tensor is a group window (other calls pass unchanged); None for other ops."""
    at = REMOTE_OPERAND.get(op)
    if at is None:
        return None

    def mapped(args: tuple[Any, ...]) -> tuple[Any, ...]:
        group = getattr(getattr(args[at], "buffer", None), "group", None)
        if group is None:
            return args
        return (args[0], global_peer(op, group, args[1]), *args[2:])

    return mapped


__all__ = ["REMOTE_OPERAND", "Group", "global_peer", "group_ctx", "group_text", "peer_mapper", "rank_text"]
