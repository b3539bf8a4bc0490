"""Flat element intervals of a buffer region: the one home of the interval arithmetic the race
detector (:mod:`pldemu.runtime.instrument.races`) and the written-element tracker
(:mod:`pldemu.runtime.instrument.written`) share. Plain Python, so that a run without ``--races``
does not import the detector (about a tenth of a rank's own imports: docs/benchmarks.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pldemu.runtime.values import Shape

MAX_RUNS = 4096
"""A region with more contiguous runs than this is recorded as its bounding interval (a strided
access touching thousands of runs; collectives never make one). That over-approximates: documented
as a possible false positive for such programs."""

MERGE_AT = 64
"""Merge a record's interval list once it holds this many entries (bounded memory in loops)."""

Interval = tuple[int, int]


def region_intervals(view: Shape, offsets: Shape, extent: Shape) -> list[Interval]:
    """Flat element intervals (sorted, disjoint) of the region ``offsets``/``extent`` of a packed
    buffer viewed with ``view``. The trailing dims the region spans fully make one contiguous run;
    the leading dims enumerate the runs."""
    n = len(view)
    if n == 0:
        return [(0, 1)]
    if 0 in extent:
        return []
    strides = [1] * n
    for i in range(n - 2, -1, -1):
        strides[i] = strides[i + 1] * view[i + 1]
    j = n - 1
    while j > 0 and extent[j] == view[j]:
        j -= 1
    run = extent[j] * strides[j]
    base = sum(o * s for o, s in zip(offsets, strides, strict=True))
    outer = [(extent[d], strides[d]) for d in range(j) if extent[d] != 1]
    if not outer:
        return [(base, base + run)]
    if math.prod(e for e, _ in outer) > MAX_RUNS:
        return [(base, base + sum((e - 1) * s for e, s in outer) + run)]
    starts = [base]
    for e, s in outer:
        starts = [st + i * s for st in starts for i in range(e)]
    # already sorted and disjoint, never adjacent (dim j is not spanned whole, so a run is shorter than any
    # outer stride): no merge needed, which a model-scale tile's thousands of row runs would pay on every access
    return [(st, st + run) for st in starts]


def merge_intervals(ivs: Sequence[Interval]) -> list[Interval]:
    """Sorted, disjoint, adjacent runs joined."""
    out: list[Interval] = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def overlap(a: Sequence[Interval], b: Sequence[Interval]) -> tuple[int, int, int] | None:
    """First common interval of two sorted disjoint interval lists and the total common length."""
    i = j = 0
    first: tuple[int, int] | None = None
    total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            if first is None:
                first = (lo, hi)
            total += hi - lo
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return None if first is None else (first[0], first[1], total)


__all__ = ["MAX_RUNS", "MERGE_AT", "Interval", "merge_intervals", "overlap", "region_intervals"]
