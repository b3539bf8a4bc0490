"""Which elements of which buffers a run wrote, tracked as it runs (``pldemu run``'s report).

A fresh data window or local tensor holds its fill (poison: NaN, the integer minimum or maximum,
0xFF for the FP8-E8M0 scale byte), and a program may legitimately write exactly that value (a NaN
copied from elsewhere, an E8M0 NaN scale), so "never written" cannot be read off the contents. The
writer records it instead: every ``tile.store``, ``tensor.write``, put and get destination this rank
executes, as flat element intervals of the packed buffer per (buffer, rank whose buffer it is), with
the regions the race detector uses (:func:`pldemu.runtime.instrument.intervals.region_intervals`), and the host's
writes (``--inputs``). Puts write a peer's window, so the ranks exchange what they wrote into whose
buffers (:func:`unwritten_elements`) before the report. Signal buffers are synchronisation, zeroed
at allocation, and are not tracked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pldemu.ir import BufferKind, Op
from pldemu.runtime.instrument.intervals import MERGE_AT, Interval, merge_intervals, region_intervals
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import OpEvent
from pldemu.runtime.transfer import Region, plan_get, plan_put
from pldemu.runtime.values import Buffer, TensorRef, flat_cell

Written = dict[str, list[Interval]]
"""Buffer name -> the merged flat intervals written, for one target rank."""


class WriteTracker(MonitorBase):
    """A monitor of one rank's program instance (``inst.add_monitor``) recording what it writes."""

    def __init__(self, rank: int, nranks: int) -> None:
        self.rank = rank
        self.nranks = nranks
        self._ivs: dict[tuple[int, str], list[Interval]] = {}
        self._full: set[tuple[int, str]] = set()
        self._after: Mapping[Op, Callable[[OpEvent], None]] = {
            Op.TILE_STORE: self._store, Op.TENSOR_WRITE: self._tensor_write, Op.PUT: self._put, Op.GET: self._get}

    def wants(self, op: Op) -> bool:
        return op in self._after

    def after(self, event: OpEvent, result: Any) -> None:
        self._after[event.op](event)

    def host_write(self, name: str, numel: int) -> None:
        """The host wrote all ``numel`` elements of this rank's buffer ``name`` (inputs)."""
        self._ivs[(self.rank, name)] = [(0, numel)]
        self._full.add((self.rank, name))

    def by_target(self) -> list[Written]:
        """What this rank wrote, per target rank (the exchange's outgoing parts)."""
        out: list[Written] = [{} for _ in range(self.nranks)]
        for (target, name), ivs in self._ivs.items():
            out[target][name] = merge_intervals(ivs)
        return out

    def _add(self, buf: Buffer, target: int, ivs: list[Interval]) -> None:
        if buf.kind is BufferKind.SIGNAL or not ivs:
            return
        key = (target, buf.name)
        if key in self._full:  # a loop storing the same region again costs one set lookup
            return
        have = self._ivs.setdefault(key, [])
        have.extend(ivs)
        if len(have) >= MERGE_AT or len(have) <= 2:
            have[:] = merge_intervals(have)
            if len(have) == 1 and have[0][0] <= 0 and have[0][1] >= buf.numel:
                self._full.add(key)

    def _region(self, target: int, side: Region) -> None:
        self._add(side.tensor.buffer, target, region_intervals(side.tensor.shape, side.offsets, side.extent))

    def _done(self, t: Any, target: Any) -> bool:
        """Whether ``t``'s buffer on ``target`` is known to be written all over (then a write to it
        costs this lookup: no region is decoded)."""
        return isinstance(t, TensorRef) and (target, t.buffer.name) in self._full

    def _store(self, event: OpEvent) -> None:
        tile, offsets, t = event.args[0], event.args[1], event.args[2]
        if isinstance(t, TensorRef) and not self._done(t, self.rank):
            self._add(t.buffer, self.rank, region_intervals(t.shape, tuple(offsets), tuple(tile.valid)))

    def _tensor_write(self, event: OpEvent) -> None:
        t = event.args[0]
        if isinstance(t, TensorRef) and t.buffer.kind is not BufferKind.SIGNAL and not self._done(t, self.rank):
            flat = flat_cell("tensor.write", self.rank, self.rank, t, tuple(event.args[1]))
            self._add(t.buffer, self.rank, [(flat, flat + 1)])

    def _put(self, event: OpEvent) -> None:
        if self._done(event.args[0], event.args[1]):
            return
        plan = plan_put(self.rank, event.site, event.args)
        if plan is not None:
            self._region(plan.peer, plan.dst)

    def _get(self, event: OpEvent) -> None:
        if self._done(event.args[0], self.rank):
            return
        plan = plan_get(self.rank, event.site, event.args)
        if plan is not None:
            self._region(self.rank, plan.dst)


def unwritten_elements(parts: Sequence[Written], sizes: Mapping[str, int]) -> dict[str, int]:
    """How many elements of each of this rank's buffers (``sizes``: name -> elements) no rank wrote,
    from what every rank wrote into this rank's buffers (``parts``: one :meth:`by_target` entry per
    rank)."""
    out = {}
    for name, numel in sizes.items():
        ivs = merge_intervals([iv for part in parts for iv in part.get(name, ())])
        out[name] = numel - sum(min(hi, numel) - max(lo, 0) for lo, hi in ivs if hi > lo)
    return out


__all__ = ["WriteTracker", "Written", "unwritten_elements"]
