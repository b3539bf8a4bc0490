"""pypto's cube / vector split inside one kernel: ``for aiv_id in pl.split_aiv(n, mode=...)`` runs its body
once per AIV lane, ``pl.aiv_shard(x)`` brings a cube value onto the lane (halved along the split axis in
``UP_DOWN`` / ``LEFT_RIGHT``, whole in ``NONE``), ``pl.aic_gather(x)`` hands a lane value back (rejoining the
lanes' halves in ``UP_DOWN`` / ``LEFT_RIGHT``) and ``pl.tile.get_subblock_idx()`` is the lane.

pldemu runs the lanes one after the other inside the block (the body unrolled per lane, as pypto's
``ExpandMixedKernel`` gives each lane its own copy), so each lane computes what it computes on the device;
a top-level ``pl.system.syncall(...)`` of the body is the lanes' barrier: every lane runs the part before it
before any lane runs the part after it. ``system.aiv_lane`` markers name the lane running and the barriers it
passes, so the task race check (``runtime/instrument/race_tasks.py``) treats the lanes as concurrent logical
threads between barriers: a cross-lane GM exchange without the barrier is reported (pypto #1981) whatever
order the lanes ran in.
``pl.cross_core_slot`` / ``pl.split`` (ring depth, split entries in ``optimizations=``) change no value.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pldemu.ir.enums import MemorySpace
from pldemu.ir.nodes import TileType, Var
from pldemu.pypto.translate.evaluator import bind_call, dsl_callee
from pldemu.pypto.translate.level import DeviceLevel
from pldemu.pypto.translate.regions import Region, on_core, slice_tile

Rule = Callable[[DeviceLevel, ast.Call], Any]

_LANE_KEY = "<aiv lane>"
"""The environment entry of the lane a body is in (not a Python name, so no user variable shadows it).
Functions reading ``tr.env`` take the device translator as ``Any``, as translate/tasks.py's loops do: the
``DeviceLevel`` protocol does not expose the environment."""

_SPLIT_AXIS: Mapping[str, int | None] = MappingProxyType({"NONE": None, "UP_DOWN": 0, "LEFT_RIGHT": 1})
"""pypto's SplitMode -> the tile axis the lanes halve (none: each lane the whole tile)."""


@dataclass(frozen=True)
class AivLane:
    """One lane of a ``pl.split_aiv`` region: its index, the lane count and the axis tiles split along."""

    index: int
    lanes: int
    axis: int | None
    top: frozenset[int] = frozenset()
    """The ``id`` of each call in a top-level statement of the body (not inside a loop, branch or ``with``)."""
    gathered: dict[int, Var] = field(default_factory=dict, compare=False)
    """``pl.aic_gather`` call (``id``) -> the whole tile the lanes' halves are assembled into (one per region)."""


_NESTING = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)


def _top_calls(body: list[ast.stmt]) -> frozenset[int]:
    return frozenset(id(n) for st in body if not isinstance(st, _NESTING) for n in ast.walk(st)
                     if isinstance(n, ast.Call))


def split_aiv_loop(tr: Any, s: ast.For) -> None:
    """``for aiv_id in pl.split_aiv(n, mode=pl.SplitMode.X):``: the body once per lane, ``aiv_id`` the lane."""
    call = s.iter
    assert isinstance(call, ast.Call)
    b = bind_call(tr, call, ("n",), {"mode": None}, "pl.split_aiv")
    lanes, mode = b["n"], str(getattr(b["mode"], "name", ""))
    if not isinstance(lanes, int) or lanes < 1 or mode not in _SPLIT_AXIS:
        raise tr.error("pl.split_aiv(n, mode=pl.SplitMode.NONE | UP_DOWN | LEFT_RIGHT) with a static lane "
                       f"count, got n={lanes!r}, mode={b['mode']!r}", call)
    if s.orelse or not isinstance(s.target, ast.Name):
        raise tr.error("for NAME in pl.split_aiv(...): one loop variable, no else", s)
    if _LANE_KEY in tr.env:
        raise tr.error("pl.split_aiv regions do not nest", s)
    segments = syncall_segments(tr, s.body)
    top, gathered = _top_calls(s.body), dict[int, Var]()
    # Between barriers each lane keeps its own names (a lane's value never reaches another lane); a name an
    # enclosing loop carries stays the carry's variable.
    states = [(dict(tr.env), {k: v for k, v in tr.owned.items() if k in tr.carried}) for _ in range(lanes)]
    base_owned = dict(tr.owned)
    try:
        for phase, body in enumerate(segments):
            for index in range(lanes):
                if len(segments) > 1:
                    restore_names(tr, *states[index])
                tr.env[_LANE_KEY] = AivLane(index, lanes, _SPLIT_AXIS[mode], top, gathered)
                tr.env[s.target.id] = index
                tr.fb.pld.system.aiv_lane(index)
                tr.block(body)
                if phase < len(segments) - 1:
                    tr.fb.pld.system.aiv_lane(index, sync=True)
                states[index] = (dict(tr.env), dict(tr.owned))
    finally:
        tr.env.pop(_LANE_KEY, None)
    if len(segments) > 1:
        restore_names(tr, states[-1][0], {**base_owned, **states[-1][1]})
        tr.env.pop(_LANE_KEY, None)
    tr.fb.pld.system.aiv_lane(-1)


def restore_names(tr: Any, env: dict[str, Any], owned: dict[str, Any]) -> None:
    """The translator's names as they were (``env``, ``owned`` snapshots)."""
    tr.env.clear()
    tr.env.update(env)
    tr.owned.clear()
    tr.owned.update(owned)


def syncall_segments(tr: Any, body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """A body cut at its top-level ``pl.system.syncall(...)`` statements (each checked as pypto's wrapper
    checks it): a ``pl.split_aiv`` region's lanes, or a ``pl.spmd`` task's blocks (``tasks.spmd_phases``),
    run segment by segment, every lane's or block's segment before any one's next, as the barrier orders
    them on the device."""
    segments: list[list[ast.stmt]] = [[]]
    for st in _unfolded(tr, body):
        if isinstance(st, ast.Expr) and dsl_callee(tr, st.value) == "pl.system.syncall":
            assert isinstance(st.value, ast.Call)
            _check_syncall(tr, st.value)
            segments.append([])
        else:
            segments[-1].append(st)
    return segments


def _unfolded(tr: Any, body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with each ``if`` on a Python constant (a program factory's flag) replaced by the branch it
    takes, as its translation folds it: a barrier inside one is at the top level too."""
    out: list[ast.stmt] = []
    for st in body:
        test = tr.eval(st.test) if isinstance(st, ast.If) and _syncs(st) else None
        if isinstance(st, ast.If) and isinstance(test, (bool, int)):
            out += _unfolded(tr, st.body if test else st.orelse)
        else:
            out.append(st)
    return out


def _syncs(st: ast.stmt) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func).endswith("system.syncall") for n in ast.walk(st))


_SOFT_CORE_TYPES = ("aiv_only", "aic_only", "mix")


def _check_syncall(tr: Any, node: ast.Call) -> None:
    """``pl.system.syncall(*, core_type="mix", mode="hard", gm_workspace=None, used_cores=None)``: pypto's
    wrapper's refusals, in its words."""
    b = bind_call(tr, node, (), {"core_type": "mix", "mode": "hard", "gm_workspace": None, "used_cores": None},
                  "pl.system.syncall")
    mode, core_type = b["mode"], b["core_type"]
    message = None
    if mode == "hard" and (b["gm_workspace"] is not None or b["used_cores"] is not None):
        message = ("syncall(mode='hard') takes no gm_workspace/used_cores; pass mode='soft' to use the GM-polling "
                   "barrier")
    elif mode not in ("hard", "soft"):
        message = f"syncall mode must be 'hard' or 'soft', got {mode!r}"
    elif mode == "soft" and core_type not in _SOFT_CORE_TYPES:
        message = f"soft syncall core_type must be one of {_SOFT_CORE_TYPES}, got {core_type!r}"
    elif mode == "soft" and b["gm_workspace"] is None:
        message = "soft syncall requires gm_workspace (a shared, zero-initialized GM INT32 tensor)"
    elif mode == "soft" and b["used_cores"] is None:
        message = ("soft syncall requires explicit used_cores; pass 0 only when the device launch configuration "
                   "matches the runtime's logical grid")
    if message is not None:
        raise tr.error(f"pypto refuses it: {message}", node)


def _lane(tr: Any, name: str, node: ast.AST) -> AivLane:
    lane = tr.env.get(_LANE_KEY)
    if not isinstance(lane, AivLane):
        raise tr.error(f"{name} outside a pl.split_aiv region (it names a value crossing the region's edge)", node)
    return lane


def _aiv_shard(tr: DeviceLevel, node: ast.Call) -> Any:
    """The lane's part of a cube value: rows (UP_DOWN) or columns (LEFT_RIGHT) ``[i * n / lanes, n / lanes)``
    of lane ``i``; the whole value in NONE."""
    lane = _lane(tr, "pl.aiv_shard", node)
    x = on_core(tr, bind_call(tr, node, ("x",), {}, "pl.aiv_shard")["x"], node)
    if not (isinstance(x, Var) and isinstance(x.type, TileType)):
        raise tr.error(f"pl.aiv_shard: x must be a tile or a tensor, got {x!r}", node)
    if lane.axis is not None:
        shape = list(x.type.shape)
        if lane.axis >= len(shape) or shape[lane.axis] % lane.lanes:
            raise tr.error(f"pl.aiv_shard: {shape} does not split into {lane.lanes} lanes along axis {lane.axis}",
                           node)
        shape[lane.axis] //= lane.lanes
        offsets = [0] * len(shape)
        offsets[lane.axis] = lane.index * shape[lane.axis]
        x = slice_tile(tr, x, Region(tuple(offsets), tuple(shape), ()), node)
    assert isinstance(x.type, TileType)
    # The crossing lands the value in the vector core's buffer (a cube accumulator arrives in Vec).
    return x if x.type.memory is MemorySpace.Vec else tr.fb.pld.tile.move(x, MemorySpace.Vec)


def _aic_gather(tr: DeviceLevel, node: ast.Call) -> Any:
    """A lane value handed to the cube: in NONE the value itself (pypto: well defined only when both lanes
    agree on it); in UP_DOWN / LEFT_RIGHT the lanes' halves rejoined along the split axis (lane ``i``'s at
    ``i * extent``): the first lane makes the whole tile, each lane assembles its half into it, so after the
    region (the lanes run one after the other) it holds every lane's."""
    lane = _lane(tr, "pl.aic_gather", node)
    x = bind_call(tr, node, ("x",), {}, "pl.aic_gather")["x"]
    if lane.axis is None:
        return x
    x = on_core(tr, x, node, "pl.aic_gather")
    if not (isinstance(x, Var) and isinstance(x.type, TileType)):
        raise tr.error(f"pl.aic_gather: x must be a tile or a tensor, got {x!r}", node)
    if id(node) not in lane.top:
        raise tr.error("pl.aic_gather inside a loop or branch of an UP_DOWN / LEFT_RIGHT region is not supported "
                       "by pldemu (gather at the top level of the region body)", node)
    t = x.type
    valid = None if t.valid_shape is None else tuple(getattr(v, "value", None) for v in t.valid_shape)
    if lane.axis >= len(t.shape) or valid not in (None, t.shape):
        raise tr.error(f"pl.aic_gather: a fully valid half of rank > {lane.axis} rejoins along axis {lane.axis}, "
                       f"got {list(t.shape)} (fillpad a partly valid half first)", node)
    whole = lane.gathered.get(id(node))
    if whole is None:
        shape = list(t.shape)
        shape[lane.axis] *= lane.lanes
        whole = lane.gathered[id(node)] = tr.fb.pld.tile.create(shape, t.dtype, mem=t.memory, hint="gathered")
    offset = [0] * len(t.shape)
    offset[lane.axis] = lane.index * t.shape[lane.axis]
    tr.fb.pld.tile.assemble(whole, x, offset)
    return whole


def _syncall(tr: DeviceLevel, node: ast.Call) -> Any:
    raise tr.error("pl.system.syncall is supported by pldemu as a statement at the top level of a pl.split_aiv "
                   "region body (the barrier of its AIV lanes) or of a pl.spmd body (the barrier of its blocks)",
                   node)


def _fence(tr: DeviceLevel, node: ast.Call) -> None:
    """``pl.system.fence()``: every earlier write of the rank completes (``system.fence``)."""
    bind_call(tr, node, (), {}, "pl.system.fence")
    tr.fb.pld.system.fence()


def _cacheinvalid(tr: DeviceLevel, node: ast.Call) -> None:
    """``pl.system.cacheinvalid()``: the whole-GM clean and invalidate (``system.cacheinvalid``); the region
    overload is not supported by pldemu."""
    if node.args or node.keywords:
        raise tr.error("pl.system.cacheinvalid(tensor, ...) (one cache line) is not supported by pldemu: use the "
                       "whole-GM pl.system.cacheinvalid()", node)
    tr.fb.pld.system.cacheinvalid()


def _pipe_barrier(name: str) -> Rule:
    """``pl.system.bar_v()`` / ``bar_m()`` / ``bar_all()``: a core's pipe barrier (PIPE_BARRIER of the vector,
    the cube or every pipe): it orders the core's own instructions, which pldemu runs one after another, so
    nothing changes; in a kernel only."""

    def rule(tr: DeviceLevel, node: ast.Call) -> None:
        bind_call(tr, node, (), {}, name)
        if not tr.emit.tasks.depth and tr.fn.kind.name != "INCORE":
            raise tr.error(f"{name}() outside a kernel: it is a barrier of a core's pipes (an InCore function, a "
                           "pl.at or pl.spmd body)", node)

    return rule


def _subblock_idx(tr: Any, node: ast.Call) -> Any:
    """``pl.tile.get_subblock_idx()``: the AIV lane (0 outside a split region, as on a lone vector core)."""
    lane = tr.env.get(_LANE_KEY)
    return lane.index if isinstance(lane, AivLane) else 0


CUBE_SPLIT_OPS: Mapping[str, Rule] = MappingProxyType({
    "pl.aiv_shard": _aiv_shard, "pl.tile.aiv_shard": _aiv_shard,
    "pl.aic_gather": _aic_gather, "pl.tile.aic_gather": _aic_gather,
    "pl.tile.get_subblock_idx": _subblock_idx, "pl.get_subblock_idx": _subblock_idx,
    "pl.tensor.get_subblock_idx": _subblock_idx,
    "pl.system.syncall": _syncall, "pl.system.fence": _fence, "pl.system.cacheinvalid": _cacheinvalid,
    **{f"pl.system.{bar}": _pipe_barrier(f"pl.system.{bar}") for bar in ("bar_v", "bar_m", "bar_all")},
})
"""The split region's names (``pl.split_aiv`` itself is a loop: :func:`split_aiv_loop`)."""

__all__ = ["CUBE_SPLIT_OPS", "AivLane", "split_aiv_loop"]
