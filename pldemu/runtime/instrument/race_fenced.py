"""The race detector's stamps under ``--visibility fenced``: when a write completes, which fill a
scalar read used, and the markers that did nothing (facts: shared/reference/fences.md, section 5.4).

Why stamps and not timing: in fenced mode a missing fence gives wrong data only where the fence
would have mattered in this run's interleaving. The detector instead asks whether the protocol
*allows* the bad order, which no schedule or seed changes:

* **A write is an interval, from its issue to its completion.** A put (atomic data puts too), a
  ``tile.store`` into a window or a get's destination write is *pending* from its issue until the
  rank's next ``system.fence``, an all-rank join (the host's barrier) or the end of the call (the
  kernel's exit completes everything); a ``tensor.write`` of a data window is pending in its cached
  line until a ``system.cacheinvalid`` covering that line cleans it, then until a fence (or a call's
  end, the tail flush). The releases (notify, Set of a signal) the rank issued while a write was
  pending are read back from its sync log at the checkpoint: a ``missing fence`` report names the one
  the peer's access is ordered after.
* **A DMA read is an interval, from its issue to its completion.** A ``remote_load``, a get's or a
  put's source read or a ``tile.load`` of a window is in flight until the rank's next ``system.fence``, drain
  (``system.bar_all``, which the toolchain puts before every notify: PTOAS#718), join or call end:
  a write by another rank ordered after a notify issued while it was in flight, but not after its
  completion, is a ``missing fence (read in flight)`` (PTOAS#711's tload variant).
* **A rank's own DMA write does not refresh its cached lines.** A ``tile.store`` (or a get's or put's
  destination) into the rank's own window over a line it has cached, then its ``tensor.read`` of
  that line with no ``cacheinvalid`` covering it between, reads the line's old value: a ``missing
  cacheinvalid`` found by program order alone (``FenceLedger.dma_over``), reported at the checkpoint.
* **A scalar read is an interval, from its line's fill to the read.** A ``tensor.read`` of a data
  window returns what the line held when it was filled (the fill the line cache made on a miss,
  ``LineCache.fill_of``), so it is ordered after a peer's write only if the write completed before
  the *fill*; the waits between the fill and the read are kept for a ``missing cacheinvalid`` report.
* **A scalar read of a signal cell** (signals stay uncached in the value model) is judged the same
  way at the checkpoint (``races.stale_signal_reads``): the detector keeps when each signal line was
  filled (a read, or a wait, which cleans its own line), and a release into the cell ordered before
  the read but not before that fill is a ``missing cacheinvalid``.

The conflict check is the detector's own (``races.find_races``): x happens before y iff x's
completion (its interval's end) is known to y's start. A write fenced before the notify that
publishes it, or a read whose line was filled after the wait, is a point, as in the other modes.

**Notes** (:class:`MarkerNotes`): per marker site and rank, how often it ran and how often it was
useless or insufficient: a fence with no write pending, a ``cacheinvalid`` that dropped no cached
line, a region ``cacheinvalid`` that left a dirty line of its tensor uncovered (the device cleans only
the line of the view's base). A note is printed only when it held on every execution of the site.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pldemu.runtime.instrument.fenced import LineCache
    from pldemu.runtime.values import Buffer

INF_EPOCH = (1 << 62, 1 << 62)
"""The completion epoch of a write still pending at the checkpoint: after everything of this epoch."""

Interval = tuple[int, int]
LineKey = tuple[int, int]


@dataclass(slots=True)
class Pending:
    """One write not yet complete (see the module docstring)."""

    target: int
    buf: Buffer
    kind: int
    site: int
    ivs: list[Interval]
    seg: int
    turn: int
    run: int
    t: float
    cleaned: int = -1
    """The segment in which a cacheinvalid cleaned this scalar write out of its line (INF_EPOCH[0]
    while its line holds it; -1: a DMA write, never cached)."""


@dataclass
class _Count:
    runs: int = 0
    held: int = 0
    example: str = ""


@dataclass
class MarkerNotes:
    """Per marker site: executions and how many of them were useless / insufficient (this rank)."""

    fence: dict[int, _Count] = field(default_factory=dict)
    inval: dict[int, _Count] = field(default_factory=dict)
    scope: dict[int, _Count] = field(default_factory=dict)

    @staticmethod
    def count(table: dict[int, _Count], site: int, held: bool, example: str = "") -> None:
        c = table.setdefault(site, _Count())
        c.runs += 1
        if held:
            c.held += 1
            c.example = c.example or example

    def wire(self) -> dict[str, dict[int, tuple[int, int, str]]]:
        """Plain data for the gather."""
        return {name: {s: (c.runs, c.held, c.example) for s, c in getattr(self, name).items()}
                for name in ("fence", "inval", "scope")}


def merge_notes(parts: list[dict[str, dict[int, tuple[int, int, str]]]]) -> dict[str, dict[int, _Count]]:
    """Every rank's counts, summed per kind and site."""
    out: dict[str, dict[int, _Count]] = {"fence": {}, "inval": {}, "scope": {}}
    for part in parts:
        for name, table in part.items():
            for site, (runs, held, example) in table.items():
                c = out[name].setdefault(site, _Count())
                c.runs += runs
                c.held += held
                c.example = c.example or example
    return out


class FenceLedger:
    """One rank's pending writes, dirty scalar writes, line fills and marker counts (fenced mode)."""

    def __init__(self, cache: LineCache) -> None:
        self.cache = cache
        self.pending: list[Pending] = []
        """Issued DMA writes and cleaned scalar writes: the next fence completes them."""
        self.reads: list[Pending] = []
        """DMA reads in flight (remote_load, a get's source, a tile.load of a window): the next fence,
        drain (``system.bar_all``), join or call end completes them."""
        self.dirty: dict[LineKey, list[Pending]] = {}
        """Scalar writes still in their cached line, by line."""
        self.fills: dict[int, tuple[int, int, int]] = {}
        """Fill number (``LineCache.fill_of``) -> (segment, turn, site) of the access that filled it."""
        self.notes = MarkerNotes()
        self.signal_fills: dict[LineKey, tuple[int, int, bool]] = {}
        """Signal line (buffer, line) -> (segment, site, by a read) of the scalar read or the wait that last
        filled it (a line only a wait filled serves no read a cacheinvalid could have refreshed)."""
        self.signal_reads: list[tuple[int, int, int, int, int, int, int, float]] = []
        self.dma_over: dict[LineKey, list[tuple[int, int, float, list[Interval], int]]] = {}
        """Cached data lines this rank's own DMA writes (tile.store, a get's or a put's destination in its
        own window) wrote since they were filled: (write site, call, time, intervals, the fill's site) per
        write. The write goes to memory, not the line: until a cacheinvalid covering the line, a scalar
        read of those elements returns the line's old value (the own-rank stale read)."""

    def dma_write(self, buffer: Buffer, site: int, run: int, t: float, ivs: list[Interval]) -> None:
        """This rank's DMA write into its own window: remember it on every cached line it writes."""
        for lo, hi in ivs:
            for n in self.cache.lines_of(buffer, lo, hi):
                fill = self.cache.line_fill((buffer.index, n))
                if fill is not None:
                    filler = self.fills.get(fill, (0, 0, -1))[2]
                    self.dma_over.setdefault((buffer.index, n), []).append((site, run, t, ivs, filler))

    def dma_under(self, key: LineKey, cell: int) -> tuple[int, int, float, int] | None:
        """The last own DMA write of ``cell`` since its cached line was filled: (site, call, time, fill
        site); None if none (or a cacheinvalid has dropped the line since)."""
        for site, run, t, ivs, filler in reversed(self.dma_over.get(key, [])):
            if any(lo <= cell < hi for lo, hi in ivs):
                return site, run, t, filler
        return None
        """Scalar reads of a signal cell served from a line filled in an earlier segment: (fill segment,
        fill site, the read's sync-event index, buffer, cell, site, call, time), judged at the checkpoint."""

    def store(self, key: LineKey, p: Pending) -> None:
        """A scalar write into cached line ``key``: dirty until a cacheinvalid covering the line."""
        p.cleaned = INF_EPOCH[0]
        self.dirty.setdefault(key, []).append(p)

    def fence(self, site: int) -> list[Pending]:
        """A ``system.fence``: every pending write completes (dirty lines stay dirty); the reads in flight
        too (:meth:`land_reads`, which the caller takes next)."""
        done, self.pending = self.pending, []
        self.notes.count(self.notes.fence, site, not done and not self.reads)
        return done

    def land_reads(self) -> list[Pending]:
        """A fence, drain, join or call end: every DMA read in flight has its bytes."""
        done, self.reads = self.reads, []
        return done

    def invalidate(self, site: int, key: LineKey | None, buf: int | None, where: Any, seg: int,
                   signal_lines: int) -> None:
        """A ``system.cacheinvalid`` in segment ``seg`` (``key`` None: whole memory; else the line of
        the view's base in data buffer ``buf``; ``signal_lines``: the signal lines it dropped): the
        dirty writes of the lines it covers become pending, for the next fence."""
        if key is None:
            dropped = self.cache.cached_lines()
        else:
            dropped = int(buf is not None and self.cache.is_cached(key))
        self.notes.count(self.notes.inval, site, dropped + signal_lines == 0)
        if key is None:
            self.dma_over.clear()
        else:
            self.dma_over.pop(key, None)
        keys = list(self.dirty) if key is None else [key]
        for k in keys:
            for p in self.dirty.pop(k, []):
                p.cleaned = seg
                self.pending.append(p)
        if key is not None and buf is not None:
            left = sorted(k[1] for k in self.dirty if k[0] == buf)
            example = ""
            if left:
                w = self.dirty[(buf, left[0])][0]
                example = f"the tensor.write at {where(w.site)} is in line {left[0]}"
            self.notes.count(self.notes.scope, site, bool(left), example)

    def complete_all(self) -> list[Pending]:
        """A join or a call's end: every write completes, dirty lines written back (signal lines too)."""
        self.signal_fills.clear()
        self.dma_over.clear()  # the tail flush drops every line
        done, self.pending = self.pending, []
        for ps in self.dirty.values():
            done.extend(ps)
        self.dirty = {}
        return done

    def fill(self, buffer: Buffer, cell: int, epoch: tuple[int, int], site: int) -> tuple[int, int, int]:
        """(segment, turn, site) of the fill of the line ``cell`` is served from; this access's own if it
        filled the line (or the line is unknown: filled before the last checkpoint)."""
        n = self.cache.fill_of(buffer, cell)
        if n is None:
            return (*epoch, site)
        got = self.fills.get(n)
        if got is None:
            got = self.fills[n] = (*epoch, site)
        return got


_NOTE_KINDS = (
    ("fence", "a system.fence that ordered nothing"),
    ("inval", "a system.cacheinvalid that dropped no cached line"),
    ("scope", "a region system.cacheinvalid that left a written line of its tensor in the cache"),
)
"""Per note kind: what one such marker is, for the one-line summary of the markers a pass placed."""


def fence_notes(counts: dict[str, dict[int, _Count]], where: Any,
                placed_by: Callable[[int], str] | None = None) -> list[str]:
    """The notes of markers that were useless or insufficient on every execution: one per site of the
    user's own markers; the markers a pass placed (``placed_by(site)``: the pass's name, or empty for
    the user's) in one line, since they are placed by rule, not where the user asked."""
    by_pass: dict[str, Counter[str]] = {}
    mine: dict[str, dict[int, _Count]] = {kind: {} for kind, _ in _NOTE_KINDS}
    for kind, _ in _NOTE_KINDS:
        for site, c in sorted(counts[kind].items()):
            if not (c.runs and c.held == c.runs):
                continue
            name = placed_by(site) if placed_by is not None else ""
            if name:
                by_pass.setdefault(name, Counter())[kind] += 1
            else:
                mine[kind][site] = c
    return _site_notes(mine, where) + [_summary(name, n) for name, n in sorted(by_pass.items())]


def _summary(name: str, n: Counter[str]) -> str:
    k = sum(n.values())
    parts = "; ".join(f"{n[kind]} x {what}" for kind, what in _NOTE_KINDS if n[kind])
    return (f"note: {name} placed {k} marker{'' if k == 1 else 's'} that did nothing or not enough on every "
            f"execution ({parts}): it places them by rule after every window write, put and wait, not where "
            "the program needs one (--no-insert-fences runs the program's own markers only)")


def _site_notes(counts: dict[str, dict[int, _Count]], where: Any) -> list[str]:
    out = []
    for site, c in sorted(counts["fence"].items()):
        out.append(f"note: system.fence at {where(site)} ordered nothing (no write pending) in "
                   f"{c.held}/{c.runs} executions")
    for site, c in sorted(counts["inval"].items()):
        out.append(f"note: system.cacheinvalid at {where(site)} dropped no cached line in "
                   f"{c.held}/{c.runs} executions (no tensor.read or tensor.write since the last "
                   "cacheinvalid had filled a line it covers)")
    for site, c in sorted(counts["scope"].items()):
        out.append(f"note: the region system.cacheinvalid at {where(site)} covers only the line of the view's "
                   f"base on the device; {c.example} and stays in the cache ({c.held}/{c.runs} executions; "
                   "system.cacheinvalid() or a region based at that line cleans it)")
    return out


__all__ = ["INF_EPOCH", "FenceLedger", "MarkerNotes", "Pending", "fence_notes", "merge_notes"]
