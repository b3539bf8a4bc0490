"""Which ``tile.cast`` pairs a target converts in one instruction, and the chain pypto emits for the rest.

pypto's LegalizeTileCast pass (src/ir/transforms/legalize_tile_cast_pass.cpp) replaces a ``tile.cast``
whose (src, dst) pair the target's ``pto.tcvt`` cannot convert in one instruction by the shortest chain
of native casts, every hop in the original round mode, and refuses a pair no admissible chain reaches.
The native tables are the backends' (src/backend/910B, src/backend/950 ``GetTcvtAdjacency``), restricted
to the element types pldemu has (no INT4, FP4, HF8, FP8E5M2: none of them lies on a chain between
two types pldemu has). The search is pypto's: breadth first over the table in its order, the source's
same-width float neighbour tried first, an intermediate that provably narrows the destination skipped,
and among equally short chains the lowest preference cost (int -> same-width float 0, float -> float 1,
else 2), the first found on a tie.

A chain changes numbers: each hop rounds (``INT32 -> FP32 -> BF16`` above 2^24, ``FP32 -> FP16 -> INT8``),
so pldemu runs the chain, not a direct conversion.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import MappingProxyType

from pldemu.ir.dtypes import DType

_D = DType

NATIVE_CASTS: Mapping[str, tuple[tuple[DType, tuple[DType, ...]], ...]] = MappingProxyType({
    "a2a3": (
        (_D.FP32, (_D.FP16, _D.BF16, _D.INT16, _D.INT32, _D.INT64)),
        (_D.FP16, (_D.FP32, _D.INT32, _D.INT16, _D.INT8, _D.UINT8)),
        (_D.BF16, (_D.FP32, _D.INT32)),
        (_D.INT16, (_D.FP16, _D.FP32)),
        (_D.INT32, (_D.FP32, _D.INT16, _D.INT64, _D.FP16)),
        (_D.INT64, (_D.FP32, _D.INT32)),
        (_D.UINT8, (_D.FP16,)),
        (_D.INT8, (_D.FP16,)),
    ),
    "a5": (
        (_D.FP32, (_D.FP16, _D.BF16, _D.INT16, _D.INT32, _D.INT64, _D.FP8E4M3FN)),
        (_D.FP16, (_D.FP32, _D.INT32, _D.INT16, _D.INT8, _D.UINT8)),
        (_D.BF16, (_D.FP32, _D.INT32, _D.FP16)),
        (_D.INT16, (_D.FP16, _D.FP32, _D.UINT8, _D.UINT32, _D.INT32)),
        (_D.INT32, (_D.FP32, _D.INT16, _D.INT64, _D.UINT16, _D.UINT8)),
        (_D.INT64, (_D.FP32, _D.INT32)),
        (_D.UINT8, (_D.FP16, _D.UINT16)),
        (_D.INT8, (_D.FP16, _D.INT16, _D.INT32)),
        (_D.UINT32, (_D.UINT8, _D.UINT16, _D.INT16)),
        (_D.FP8E4M3FN, (_D.FP32,)),
    ),
})
"""Per pypto arch name (``GetPtoTargetArch``): each source's native destinations, in the backend's order."""

_FLOAT_FORMAT: Mapping[DType, tuple[int, int]] = MappingProxyType({
    _D.FP32: (24, 8), _D.FP16: (11, 5), _D.BF16: (8, 8)})
"""Significand bits (with the implicit one) and exponent bits: pypto's FloatFormat."""

_SAME_WIDTH_FLOAT: Mapping[int, DType] = MappingProxyType({4: _D.FP32, 2: _D.FP16})


def _value_bits(d: DType) -> int:
    lo, _ = d.int_range()
    return 8 * d.itemsize - (1 if lo < 0 else 0)


def _narrows(mid: DType, dst: DType) -> bool:
    """pypto's NarrowsRelativeTo: routing through ``mid`` provably loses values ``dst`` could hold."""
    if mid is dst:
        return False
    if mid.is_int and dst.is_float:
        return True
    m, d = _FLOAT_FORMAT.get(mid), _FLOAT_FORMAT.get(dst)
    if mid.is_float and dst.is_float:
        return m is not None and d is not None and (m[0] < d[0] or m[1] < d[1])
    if mid.is_float and dst.is_int:
        return m is not None and m[0] < _value_bits(dst)
    if mid.is_int and dst.is_int:
        if mid.int_range()[0] == 0 and dst.int_range()[0] < 0:
            return True
        return _value_bits(mid) < _value_bits(dst)
    return False


def _edge_cost(a: DType, b: DType) -> int:
    if not a.is_float and b.is_float and a.itemsize == b.itemsize:
        return 0
    return 1 if a.is_float and b.is_float else 2


def _neighbours(arch: str, d: DType) -> list[DType]:
    out = [t for src, tos in NATIVE_CASTS[arch] if src is d for t in tos if t is not d]
    same = None if d.is_float else _SAME_WIDTH_FLOAT.get(d.itemsize)
    if same in out:
        i = out.index(same)
        out[0], out[i] = out[i], out[0]  # pypto swaps it to the front (iter_swap)
    return out


def cast_chain(src: DType, dst: DType, arch: str = "a2a3") -> tuple[DType, ...] | None:
    """The dtypes a ``tile.cast`` from ``src`` to ``dst`` passes through on ``arch`` (``dst`` last; one
    element when native), or None when pypto refuses the pair ("no native cast path")."""
    if dst in _neighbours(arch, src):
        return (dst,)
    info: dict[DType, tuple[DType, int, int]] = {src: (src, 0, 0)}  # node -> (parent, dist, pref)
    queue = deque([src])
    while queue:
        cur = queue.popleft()
        _, dist, pref = info[cur]
        for nxt in _neighbours(arch, cur):
            if nxt is not dst and _narrows(nxt, dst):
                continue
            cost = pref + _edge_cost(cur, nxt)
            seen = info.get(nxt)
            if seen is None:
                info[nxt] = (cur, dist + 1, cost)
                queue.append(nxt)
            elif seen[1] == dist + 1 and cost < seen[2]:
                info[nxt] = (cur, dist + 1, cost)
    if dst not in info or dst is src:
        return None
    path = [dst]
    while info[path[-1]][0] is not src:
        path.append(info[path[-1]][0])
    return tuple(reversed(path))


__all__ = ["NATIVE_CASTS", "cast_chain"]
