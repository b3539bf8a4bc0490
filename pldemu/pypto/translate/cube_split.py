"""pypto's cube / vector split inside one kernel: ``for aiv_id in pl.split_aiv(n, mode=...)`` runs its body
once per AIV lane, ``pl.aiv_shard(x)`` brings a cube value onto the lane (halved along the split axis in
``UP_DOWN`` / ``LEFT_RIGHT``, whole in ``NONE``), ``pl.aic_gather(x)`` hands a lane value back (rejoining the
lanes' halves in ``UP_DOWN`` / ``LEFT_RIGHT``) and ``pl.tile.get_subblock_idx()`` is the lane.

pldemu runs the lanes one after the other inside the block (the body unrolled per lane, as pypto's
``ExpandMixedKernel`` gives each lane its own copy), so each lane computes what it computes on the device;
two lanes racing on one GM cell are not interleaved (pypto #1981's intra-task race is out of reach).
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
from pldemu.pypto.translate.evaluator import bind_call
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
    top, gathered = _top_calls(s.body), {}
    try:
        for index in range(lanes):
            tr.env[_LANE_KEY] = AivLane(index, lanes, _SPLIT_AXIS[mode], top, gathered)
            tr.env[s.target.id] = index
            tr.block(s.body)
    finally:
        tr.env.pop(_LANE_KEY, None)


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


def _subblock_idx(tr: Any, node: ast.Call) -> Any:
    """``pl.tile.get_subblock_idx()``: the AIV lane (0 outside a split region, as on a lone vector core)."""
    lane = tr.env.get(_LANE_KEY)
    return lane.index if isinstance(lane, AivLane) else 0


CUBE_SPLIT_OPS: Mapping[str, Rule] = MappingProxyType({
    "pl.aiv_shard": _aiv_shard, "pl.tile.aiv_shard": _aiv_shard,
    "pl.aic_gather": _aic_gather, "pl.tile.aic_gather": _aic_gather,
    "pl.tile.get_subblock_idx": _subblock_idx,
})
"""The split region's names (``pl.split_aiv`` itself is a loop: :func:`split_aiv_loop`)."""

__all__ = ["CUBE_SPLIT_OPS", "AivLane", "split_aiv_loop"]
