"""Fenced mode's one completion rule, shared by the run model (``schedule``, ``fenced``, ``flight``) and
the race detector (``race_fenced``, ``races``) (facts: shared/reference/fences.md, sections 1.4, 2.2, 3).

In ``--visibility fenced`` a DMA write (put, atomic data put, ``tile.store`` into a window, a get's
destination write, a scalar line a ``cacheinvalid`` cleaned) and a DMA read (``remote_load``, a get's
or a put's source read of a window, ``tile.load`` of a window) are intervals: issued at the op,
*complete* at the first of these points of their rank (:data:`RULE`):

* ``system.fence``: pipe drains then ``dsb(DSB_DDR)``, every write and read of the core complete;
* ``system.bar_all``, the toolchain's drain before each notify (PTOAS#718): the pipes drain, so every
  read has its bytes, but a drain only *issues* a store, it does not make it visible (PTOAS#744);
* an all-rank join of the hosts (an MPI barrier of a harness);
* the end of the call: the kernel's tail (PTOAS#698: ``PIPE_ALL; dcci ENTIRE OUT; dsb``) completes
  everything, dirty scalar lines included.

A completed write is visible to everything ordered after its completion point, and only that is
guaranteed. The detector stamps a write's interval end at that point. The run (``--fence-policy
latest``: as late as the rule allows, so a missing fence shows on every call) makes it visible at the
latest moment that keeps the guarantee (:data:`LANDS_AT`): a fence lands it at once; a write completed
by the call's end or a join stays in the write buffer until its rank next does something another
access can be ordered after: a release (notify, Set of a signal), a fence, a join, its host's access
to its windows, or its own DMA read of the target. The host code after a call thus sees what its
kernel wrote, a peer sees it once ordered after that end, and a peer not ordered after it keeps
seeing the old bytes, as the detector says (``missing fence``), whatever the timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType


class Point(Enum):
    """A point of a rank's execution that can complete its DMA accesses."""

    FENCE = "system.fence"
    DRAIN = "system.bar_all"
    JOIN = "an all-rank join of the hosts"
    CALL_END = "the end of the call"


@dataclass(frozen=True, slots=True)
class Completes:
    """What a completion point completes, and the device fact behind it."""

    writes: bool
    reads: bool
    why: str


RULE: Mapping[Point, Completes] = MappingProxyType({
    Point.FENCE: Completes(True, True, "fence.barrier_all: pipe drains, then dsb(DSB_DDR) (PTOAS design doc)"),
    Point.DRAIN: Completes(False, True, "PIPE_ALL drains the pipes: a read has its bytes, a store is only "
                                        "issued (PTOAS#744)"),
    Point.JOIN: Completes(True, True, "the hosts synchronise after their kernels ended"),
    Point.CALL_END: Completes(True, True, "the kernel's tail: PIPE_ALL; dcci ENTIRE OUT; dsb (PTOAS#698)"),
})
"""Per completion point: does it complete the rank's pending writes, its reads in flight."""

LANDS_AT = (
    "system.fence",
    "a release (pld.system.notify, tensor.write of a signal cell)",
    "an all-rank join of the hosts",
    "the host's access to the rank's own windows",
    "the rank's own DMA read of the write's target",
)
"""Where the run lands a write the call's end completed (the latest points that keep the rule)."""


__all__ = ["LANDS_AT", "RULE", "Completes", "Point"]
