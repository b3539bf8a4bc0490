"""The status board (what every rank is doing, readable one-sidedly by every peer) and the deadlock report.

Each rank owns one small INT64 record in a status window. It is written with plain local stores when
a run starts or ends and when a wait starts or ends (never per poll; the wait hook refreshes the
observed value a few times a second). A rank whose wait passes its deadline reads every rank's record
one-sidedly, plus the live value of every blocked rank's cell, and turns them into a wait-for report.
"""

from __future__ import annotations

import ctypes
import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pldemu.ir import WaitCmp
from pldemu.runtime.groups import rank_text
from pldemu.windows import Window

FIELDS = ("state", "run", "site", "buffer", "cell", "expected", "cmp", "observed", "since_ms",
          "broken", "broken_kind", "broken_buffer", "broken_cell", "broken_target", "broken_value", "broken_site",
          "broken_call")
STATE, RUN, SITE, BUFFER, CELL, EXPECTED, CMP, OBSERVED, SINCE_MS = range(9)
BROKEN = SINCE_MS + 1
"""Invariant violations this rank has seen so far; the fields after it describe the first one."""
NFIELDS = len(FIELDS)
UNKNOWN = -(2**63)
"""Field value meaning 'not known' (observed before the first poll)."""

CMP_EQ, CMP_GE = int(WaitCmp.Eq), int(WaitCmp.Ge)
"""Encoding of the wait comparison in the record: the IR's WaitCmp values."""


class RankState(enum.IntEnum):
    """What a rank is doing, as published on the board."""

    IDLE = 0  # instantiated, no run started yet
    RUNNING = 1  # executing, not blocked in a wait
    WAITING = 2  # blocked in pld.system.wait
    DONE = 3  # finished its last run
    FAILED = 4  # raised an error
    TIMED_OUT = 5  # its wait passed the deadline (it is reporting)
    CLOSING = 6  # freeing its windows (a collective: blocked until every rank gets there)


_RUNNING, _WAITING, _DONE = int(RankState.RUNNING), int(RankState.WAITING), int(RankState.DONE)
"""The states the hot paths store, as plain ints."""


@dataclass(frozen=True)
class RankStatus:
    """One rank's record, decoded."""

    rank: int
    state: RankState
    run: int
    site: int
    buffer: int
    cell: int
    expected: int
    cmp: int
    observed: int
    since_ms: int
    broken: int = 0
    """Invariant violations the rank has seen (published by its checker)."""
    first_broken: tuple[int, ...] = ()
    """The first one: (invariant kind, buffer, flat cell, target, value, site, call)."""

    @classmethod
    def decode(cls, rank: int, rec: np.ndarray) -> RankStatus:
        values = [int(v) for v in rec[:NFIELDS]]
        try:
            state = RankState(values[STATE])
        except ValueError:
            state = RankState.IDLE
        run, site, buffer, cell, expected, cmp, observed, since_ms = values[RUN:BROKEN]
        return cls(rank, state, run, site, buffer, cell, expected, cmp, observed, since_ms, values[BROKEN],
                   tuple(values[BROKEN + 1:]))

    @property
    def blocked(self) -> bool:
        """Blocked in a wait (timed out or not)."""
        return self.state in (RankState.WAITING, RankState.TIMED_OUT)


class StatusBoard:
    """This rank's record in the status window, plus one-sided reads of every rank's."""

    def __init__(self, window: Window) -> None:
        self._window = window
        self._rec = window.local
        self._rec[...] = 0
        self._rec[SITE] = -1  # no wait yet
        self._rec[OBSERVED] = UNKNOWN
        # The same record as ctypes INT64s, for the stores of every run and blocking wait: a plain
        # int store costs a third of numpy's item assignment (of an IntEnum: a seventh).
        self._fields = (ctypes.c_int64 * NFIELDS).from_address(self._rec.ctypes.data)
        self.hook = self.observe
        """The wait hook (bound once, not per wait)."""

    def idle(self, seconds: float) -> None:
        """Pause ``seconds`` while peers may read this board (MPI progress driven meanwhile)."""
        from pldemu.mpi import progress_sleep

        progress_sleep(self._window.comm, seconds)

    def run_started(self, run: int) -> None:
        self._fields[RUN] = run
        self._fields[STATE] = _RUNNING

    @property
    def run(self) -> int:
        """This rank's current (or last) 1-based call number."""
        return int(self._fields[RUN])

    def run_done(self) -> None:
        """``set_state(RankState.DONE)``, the store of every successful run."""
        self._fields[STATE] = _DONE

    def set_state(self, state: RankState) -> None:
        self._rec[STATE] = state

    def wait_started(self, site: int, buffer: int, cell: int, expected: int, cmp: int) -> None:
        # One slice store for the wait fields, then the state (run stays as it is).
        fields = self._fields
        fields[SITE:BROKEN] = [site, buffer, cell, expected, cmp, UNKNOWN, int(time.time() * 1000)]
        fields[STATE] = _WAITING

    def observe(self, value: int) -> None:
        """Wait hook: record the last value seen (called a few times a second while blocked)."""
        self._rec[OBSERVED] = value

    def broken(self, first: tuple[int, ...]) -> None:
        """Publish an invariant violation this rank saw (``first``: as :attr:`RankStatus.first_broken`;
        only the first one is kept, the rest are counted)."""
        if self._rec[BROKEN] == 0:
            self._rec[BROKEN + 1:] = first
        self._rec[BROKEN] += 1

    def wait_ended(self) -> None:
        # The wait fields stay: a RUNNING rank's record still says where it last blocked (waits
        # satisfied at their first poll are not published: see the wait handler).
        self._fields[STATE] = _RUNNING

    def read(self, peer: int) -> RankStatus:
        """One rank's record (one-sided read; this rank's own is read locally)."""
        own = peer == self._window.rank
        rec = self._rec.copy() if own else self._window.get(peer, NFIELDS, 0, NFIELDS)
        return RankStatus.decode(peer, rec)

    def snapshot(self) -> list[RankStatus]:
        return [self.read(r) for r in range(self._window.size)]


def source_rank(shape: Sequence[int], index: Sequence[int], nranks: int) -> int | None:
    """The rank whose credit a signal cell counts, when the cell addressing says so: mesh signals
    ``[NR, 1]`` count rank ``row``'s credits at ``[row, 0]``; ring signals ``[2*(NR-1), NR]`` count
    rank ``col``'s at ``[round, col]``; a flat ``[NR]`` signal at ``[r]``; and any other layout
    whose first dimension is NR (``[NR, 2]`` ready / done columns, ...) by its row."""
    shape, index = tuple(shape), tuple(index)
    if len(shape) == 2 and shape == (2 * (nranks - 1), nranks) and shape[1] != 1:
        return index[1]
    if shape and shape[0] == nranks and index:
        return index[0]
    return None


def awaited_rank(target: WaitTarget, owner: int, nranks: int) -> int | None:
    """The rank blocked rank ``owner`` waits for on ``target``: the one rank other than itself that has
    ever posted to the cell (the invariant checker's posters shadow), else the rank the layout names
    (:func:`source_rank`) when it is among the posters or none are known; None when neither says."""
    group = target.group
    layout = source_rank(target.shape, target.index, nranks if group is None else len(group))
    if group is not None and layout is not None:
        layout = group[layout] if 0 <= layout < len(group) else None
    if not target.posters:
        return layout
    others = [r for r in target.posters if r != owner] or list(target.posters)
    if len(others) == 1:
        return others[0]
    return layout if layout in others else None


@dataclass(frozen=True)
class WaitTarget:
    """How the report names a blocked rank's cell: ``sig[1, 0]``, its buffer shape, its live value."""

    name: str
    index: tuple[int, ...]
    shape: tuple[int, ...]
    live: int | None
    posters: tuple[int, ...] | None = None
    """Every rank that has ever notified the cell (``()``: none has); None when not known."""
    setters: int = 0
    """How many ranks have written the cell with ``Set`` (known with the invariant checker only)."""
    group: tuple[int, ...] | None = None
    """The buffer's comm sub-domain (``Buffer.group``): its cells are laid out by group-local rank."""

    def cell_text(self) -> str:
        return f"{self.name}[{', '.join(map(str, self.index))}]"

    def rank_text(self, rank: int) -> str:
        """``rank 2``, or ``peer 1 of group {1, 2} = rank 2`` on a window of a comm sub-domain."""
        return rank_text(rank, self.group)


_STATE_NOTES = {
    RankState.IDLE: "has not started a run",
    RankState.RUNNING: "is running, not blocked in a wait (slow, or looping)",
    RankState.DONE: "finished its run",
    RankState.FAILED: "raised an error",
    RankState.CLOSING: "finished its run and is freeing its windows",
}


def format_report(
    me: int,
    statuses: Sequence[RankStatus],
    where: Callable[[int], str],
    targets: dict[int, WaitTarget],
    timeout: float,
    hosts: Sequence[str] = (),
) -> tuple[str, bool]:
    """The wait-for report and whether this rank is the one that should print it (no lower rank had
    timed out too). ``where(site_id)`` names a call site; ``targets[r]`` describes blocked rank r's
    cell (name, index, buffer shape, live value); ``hosts[r]``, when the job spans hosts, rank r's
    host (named on its line)."""
    nranks = len(statuses)
    now_ms = time.time() * 1000
    edges: dict[int, int] = {}
    lines = [f"wait-for graph ({nranks} ranks; a wait gives up after {timeout:g}s; * = this rank):"]
    for st in statuses:
        tag = "*" if st.rank == me else " "
        at = f" @{hosts[st.rank]}" if st.rank < len(hosts) else ""
        head = f"{tag}rank {st.rank}{at}: {st.state.name:9} run {st.run}"
        if not st.blocked:
            last = f"; last wait at {where(st.site)}" if st.site >= 0 else ""
            lines.append(head + last)
            continue
        t = targets.get(st.rank)
        rel = "==" if st.cmp == CMP_EQ else ">="
        seen = _observed(st, t)
        waited = max(0.0, (now_ms - st.since_ms) / 1000)
        text = (f"{head} at {where(st.site)}\n"
                f"      waits for {_cell(st, t)} {rel} {st.expected}, observed "
                f"{'?' if seen == UNKNOWN else seen} (blocked {waited:.1f}s)")
        src = awaited_rank(t, st.rank, nranks) if t is not None else None
        if satisfied(st, seen):
            # The credit is there: no rank owes this one anything, so it is no wait-for edge.
            text += " -> satisfied: this rank is stalled or descheduled, not missing a credit"
        elif src is not None and 0 <= src < nranks:
            edges[st.rank] = src
            text += f" -> waits for {t.rank_text(src) if t is not None else f'rank {src}'}"
        lines.append(text)
    lines.append("summary:")
    lines.extend(_summary(statuses, edges, targets))
    primary = not any(s.state is RankState.TIMED_OUT and s.rank < me for s in statuses)
    return "\n".join(lines), primary


def satisfied(st: RankStatus, seen: int) -> bool:
    """Whether the value last seen in a blocked rank's cell already meets its wait."""
    if seen == UNKNOWN:
        return False
    return seen == st.expected if st.cmp == CMP_EQ else seen >= st.expected


def _ranks(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]} is" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))} are"


def _cell(st: RankStatus, t: WaitTarget | None) -> str:
    return t.cell_text() if t is not None else f"cell {st.cell}"


def _observed(st: RankStatus, t: WaitTarget | None) -> int:
    return t.live if t is not None and t.live is not None else st.observed


def _summary(statuses: Sequence[RankStatus], edges: dict[int, int], targets: dict[int, WaitTarget]
             ) -> list[str]:
    """Follow every blocked rank's edge to where its chain ends: a rank that is not blocked (the
    missing credit), a cycle, or a cell whose address names no rank."""
    by_rank = {s.rank: s for s in statuses}
    out: list[str] = []
    behind: dict[tuple[int, ...], list[int]] = {}  # chain end (rank, or a cycle) -> ranks stuck behind it
    for st in statuses:
        if not st.blocked or st.rank not in edges:
            continue
        path = [st.rank]
        node = edges[st.rank]
        while node in edges and node not in path and by_rank[node].blocked:
            path.append(node)
            node = edges[node]
        if node in path:
            cycle = path[path.index(node):]
            k = cycle.index(min(cycle))
            key = tuple(cycle[k:] + cycle[:k])
        else:
            key = (node, -1) if not by_rank[node].blocked else (node, -2)
        behind.setdefault(key, []).append(st.rank)
    for key, ranks in sorted(behind.items()):
        if len(key) == 2 and key[1] < 0:
            target = key[0]
            if key[1] == -2:
                continue  # ends at a blocked rank without an inferred edge: reported below
            direct = [r for r in ranks if edges[r] == target]
            others = [r for r in ranks if r not in direct]
            peer = by_rank[target]
            for r in direct:
                st = by_rank[r]
                t = targets.get(r)
                out.append(f"  missing credit: rank {r} waits for {t.rank_text(target) if t else f'rank {target}'} "
                           f"on {_cell(st, t)} "
                           f"{'==' if st.cmp == CMP_EQ else '>='} {st.expected}, but rank {target} is "
                           f"{peer.state.name} (run {peer.run}): it {_STATE_NOTES.get(peer.state, '')}")
            if others:
                out.append(f"  {_ranks(sorted(others))} blocked behind that in turn")
        else:
            chain = " -> ".join(f"rank {r}" for r in (*key, key[0]))
            what = "waits for itself" if len(key) == 1 else "each waits for a credit the next has not posted"
            out.append(f"  cycle: {chain} ({what})")
            tail = sorted(set(ranks) - set(key))
            if tail:
                out.append(f"  {_ranks(tail)} blocked behind the cycle")
    out += _wait_notes(statuses, edges, targets)
    if all(s.blocked for s in statuses):
        out.append("  every rank is blocked")
    if not out:
        out.append("  no cycle and no missing credit found")
    return out


def _wait_notes(statuses: Sequence[RankStatus], edges: dict[int, int], targets: dict[int, WaitTarget]
                ) -> list[str]:
    """What each blocked rank's own wait says: an Eq wait that can never match, a satisfied wait (a
    stalled rank), a cell whose address names no rank."""
    out: list[str] = []
    for st in statuses:
        if not st.blocked:
            continue
        t = targets.get(st.rank)
        seen = _observed(st, t)
        if st.cmp == CMP_EQ and seen != UNKNOWN and seen > st.expected:
            out.append(f"  rank {st.rank}: Eq wait for {st.expected} but {_cell(st, t)} is already {seen}: "
                       f"it can never match (credit counters need Ge)")
        if satisfied(st, seen):
            out.append(f"  rank {st.rank}: its wait on {_cell(st, t)} is satisfied (observed {seen}): it is stalled "
                       "or descheduled (stopped, or starved of CPU), not part of a credit cycle")
            continue
        posters = t.posters if t is not None else None
        if t is not None and t.setters > 1 and st.cmp != CMP_EQ:
            out.append(f"  rank {st.rank} waits on {_cell(st, t)} >= {st.expected}: {t.setters} ranks wrote it with "
                       "Set, which overwrites, so their counts do not add up: several ranks counting into one "
                       "cell need NotifyOp.AtomicAdd")
        if posters == ():
            out.append(f"  rank {st.rank} waits on {_cell(st, t)}: no rank has posted to {_cell(st, t)}")
        elif st.rank in edges:
            continue
        elif posters:
            out.append(f"  rank {st.rank} waits on {_cell(st, t)}: ranks {', '.join(map(str, posters))} posted to it "
                       "before; which of them owes this credit the layout does not say")
        else:
            out.append(f"  rank {st.rank} waits on {_cell(st, t)}: the cell address names no source rank, and who "
                       "posts to it is not known (--invariants records it)")
    return out


__all__ = [
    "FIELDS",
    "NFIELDS",
    "RankState",
    "RankStatus",
    "StatusBoard",
    "WaitTarget",
    "awaited_rank",
    "format_report",
    "source_rank",
]
