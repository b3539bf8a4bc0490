"""Waits satisfied by what an earlier call left: a signal cell reused across calls without being cleared.

A resident job keeps a program's windows from one call to the next (pypto's persistent workers without
a reset). A protocol whose counter restarts every call (``wait(sig >= 1)`` each call, nothing retiring
the credit) then finds its wait satisfied at once by the previous call's credit: the wait orders
nothing, and the data it guards may not be there yet (pypto-lib #960: MoE signal counters restarted
their epoch at 1 on every dispatch of a persistent graph). The race detector reports the data race this
leads to; this monitor names its cause.

At a point where every rank has finished its calls (a fence), :meth:`StaleCredits.at_rest` records this
rank's non-zero signal cells. In a later call, the first wait on such a cell (before this rank wrote it
itself: a notify to its own cell, a ``tensor.write``) whose condition the leftover alone meets is a
finding, naming both calls: in some allowed order the wait passes on the leftover before anything of
its own call reaches the cell, whatever this run's timing was (a counter that goes on, ``wait(>= k)`` in
call k, is not: the leftover ``k - 1`` does not meet it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from pldemu.ir import BufferKind, Op, WaitCmp
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import OpEvent
from pldemu.runtime.values import Buffer, TensorRef, flat_cell, unravel

STALE = "stale-credit"
"""The name reports give this finding."""


class StaleCredits(MonitorBase):
    """A monitor of one rank's instance (``inst.add_monitor``): see the module docstring."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.found: list[str] = []
        self._rest: dict[tuple[str, int], tuple[int, int]] = {}
        """(signal buffer, flat cell) -> (the value left there, the call that left it)."""
        self._call = 0

    def wants(self, op: Op) -> bool:
        return op in (Op.WAIT, Op.NOTIFY, Op.TENSOR_WRITE)

    def run_started(self, run: int) -> None:
        self._call = run

    def at_rest(self, buffers: Iterable[Buffer]) -> None:
        """Every call of every rank is over: remember this rank's non-zero signal cells."""
        self._rest = {}
        for b in buffers:
            if b.kind is BufferKind.SIGNAL:
                flat = b.array.reshape(-1)
                for cell in np.flatnonzero(flat):
                    self._rest[(b.name, int(cell))] = (int(flat[cell]), self._call)

    def before(self, event: OpEvent) -> None:
        if not self._rest:
            return
        sig: TensorRef = event.args[0]
        if event.op is Op.NOTIFY:  # this rank's own write of its own cell ends what the leftover meant
            if event.args[1] == self.rank:
                self._rest.pop((sig.buffer.name, flat_cell("notify", self.rank, self.rank, sig, event.args[2])), None)
            return
        if event.op is Op.TENSOR_WRITE:
            if sig.buffer.kind is BufferKind.SIGNAL:
                self._rest.pop((sig.buffer.name, flat_cell("write", self.rank, self.rank, sig, event.args[1])), None)
            return
        cell = flat_cell("wait", self.rank, self.rank, sig, event.args[1])
        left = self._rest.pop((sig.buffer.name, cell), None)
        if left is None:
            return
        value, call = left
        expected = int(event.args[2])
        if value >= expected if event.site.attrs["cmp"] is WaitCmp.Ge else value == expected:
            index = ", ".join(map(str, unravel(cell, sig.buffer.shape)))
            self.found.append(
                f"{STALE}: rank {self.rank} at {event.location}: the wait for {sig.buffer.name}[{index}] "
                f"{_cmp_text(event.site.attrs)} {expected} in call {self._call} is met by what call {call} left in "
                f"the cell ({value}, at rest after call {call}) before anything of call {self._call} reaches it, so "
                f"the wait orders nothing (a counter that restarts every call on windows that are not reset: "
                f"retire each credit, e.g. an AtomicAdd of its negative, or count on from the previous call's "
                f"value)")

    def take(self) -> list[str]:
        """The findings since the last take."""
        found, self.found = self.found, []
        return found


_CMP_TEXT = {WaitCmp.Ge: ">=", WaitCmp.Eq: "=="}


def _cmp_text(attrs: Mapping[str, Any]) -> str:
    return _CMP_TEXT.get(attrs["cmp"], str(attrs["cmp"]))


__all__ = ["STALE", "StaleCredits"]
