"""The race detector's clocks, resolved exactly at each checkpoint from every rank's sync log.

Why a replay and not clocks carried at run time: a wait's exact acquire depends on releases the
waiter cannot see when it passes (a producer far ahead overwrote any fixed history; a slow peer's
credit, not yet issued, could have satisfied a multi-writer counter in another allowed order). At a
checkpoint every release of the epoch is known, so the happens-before order can be computed from
all of them, with no history limit, and the memory it needs is the epoch's sync log, dropped there.

**The log.** Per rank, in program order, plain tuples (cheap to append, small to exchange):
``(REL, t, target, buffer, cell, value, is_set)`` for a notify (``tensor.write`` of a signal is a
Set into the rank's own cell), ``(ACQ, t, buffer, cell, eq, expected)`` for a satisfied wait
(``eq``: Eq, else Ge) or a ``tensor.read`` of a signal (Eq, the value read), ``(JOIN, t)`` for an
all-rank join. ``t`` is a timestamp used only to visit the events in a good order.

**Clocks.** Each rank starts the epoch with a fresh vector clock (its own entry 1): everything before
the checkpoint happens before everything after it. A release stores the rank's clock, then ticks its
own entry; an acquire takes the element-wise maximum with what the wait needed; a join, the maximum
over all ranks. A rank's records between two of its sync events (a *segment*) carry the clock of the
segment. The clocks are ``vclock.VClock``s: chunked and shared, so the clock of every segment of thousands
of logical threads costs what differs from the clock it came from, not an entry per thread each.

**What a wait needed (the exact acquire).** For the waiter's cell, each writer w (the waiter
included) issued releases in program order, and they land in that order (a notify is a fetching
atomic: complete when the notifier goes on). At the moment the wait passed, a prefix ``p_w`` of each
writer's releases had landed, where ``p_w`` is at least the releases that happen before the wait
(*forced*) and at most those that do not happen after it (*candidates*; a release issued later in
real time but concurrent with the wait counts: another allowed order lands it first). A tuple of
prefixes *satisfies* the wait when the cell value it gives (the cell at the epoch start plus every
landed add; for a cell only ever Set, the value of a Set that can have landed last) meets the wait
(``>= expected``, or ``== expected``). Entry x of the acquired clock is the minimum, over satisfying
tuples, of the largest entry x among the tuple's releases: an event is acquired iff every allowed
order that lets the wait pass has landed a release that knows it. For one writer this is the release
that brought its contribution to the needed amount, however many releases ago; for several writers
on one counter, writer w's release is acquired only if the others cannot reach the threshold
without it (and what every alternative has in common is acquired too). Candidates depend on the
clocks and the clocks on the acquires: the replay iterates from the program-order clocks upwards
(the least fixed point: only orderings some wait really needs), visiting events in timestamp order so
that one or two passes usually settle it.

**Logical threads** (a rank that runs tasks concurrently, ``race_threads``). Each task block and the
Orchestration is its own *thread*: its own log and its own clock entry, as if it were a rank whose
cells are its rank's (``replay``'s ``ranks``). ``(EDGE, t, source, pos)`` joins the clock thread
``source`` had after its first ``pos`` events (a task's start: the Orchestration at its submission and
its producers at their completion; the Orchestration after a drain: the tasks'); ``(FORK, t)`` ticks
the Orchestration's own entry at a submission, so that what it does afterwards is not known to the
task. A task thread lives in one part of the epoch (between two joins: ``parts``); its own entry
starts past anything the previous joins told. Events of one rank carry strictly increasing times, so
the replay visits an edge after its source's events.

**Where it is not exact (it then orders more, hiding races, never inventing one).** A cell both Set
and added to in one epoch (itself a ``set-and-add`` invariant violation), an Eq wait or a counter
with negative remote credits whose candidate releases depend on each other's, an Eq wait whose
reachable sums exceed ``MAX_SUMS``: the wait acquires every candidate release (*coarse*). If the
iteration has not settled after ``MAX_PASSES`` passes, every wait of that part acquires every release
into its cell issued before it passed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pldemu.runtime.instrument.vclock import VClock, join_all, meet_all

REL, ACQ, JOIN, EDGE, FORK = 0, 1, 2, 3, 4
"""Sync event kinds (the first field of a logged event). EDGE and FORK are the task threads' (see
"Logical threads" in the module docstring): no-task logs have neither."""

MAX_PASSES = 32
"""Replay passes per part of an epoch before the fallback (see the module docstring)."""

MAX_SUMS = 4096
"""Reachable cell values an Eq wait's search may track before it acquires coarsely."""

SyncEvent = tuple[Any, ...]
CellKey = tuple[int, int, int]
"""(owner rank, buffer index, flat cell)."""


@dataclass
class Resolved:
    """The replay's result for one epoch."""

    segments: list[list[VClock]]
    """Per rank, the clock of each segment: ``segments[r][s]`` holds after rank r's first s events (a
    :class:`~pldemu.runtime.instrument.vclock.VClock`, which reads as the tuple of its entries)."""
    exact: list[int]
    """Per rank, acquires resolved exactly."""
    coarse: list[int]
    """Per rank, acquires that took every candidate release (see the module docstring)."""


class _Dirty:
    """Set when an acquire read a release clock the current pass has not computed yet."""

    __slots__ = ("flag",)

    def __init__(self) -> None:
        self.flag = False


class _Chain:
    """One writer's releases into one cell in this epoch, in program order."""

    __slots__ = ("base", "clocks", "cum", "dirty", "done", "fixed", "has_add", "has_set", "nonneg", "ops",
                 "own", "times", "w")

    def __init__(self, w: int, dirty: _Dirty) -> None:
        self.w = w
        self.dirty = dirty
        self.ops: list[tuple[int, bool]] = []  # (value, is_set)
        self.cum = [0]  # cum[p]: the sum of the first p values
        self.own: list[int] = []  # the writer's own clock entry at each release (program order fixes it)
        self.times: list[float] = []
        self.clocks: list[VClock | None] = []
        self.has_set = self.has_add = False
        self.nonneg = True
        self.base = VClock.zeros(0)  # the writer's clock at the start of the current part
        self.fixed = 0  # entries final (from an earlier part of the epoch)
        self.done = -1  # last entry computed in the current pass

    def append(self, value: int, is_set: bool, own: int, t: float) -> None:
        self.ops.append((value, is_set))
        self.cum.append(self.cum[-1] + value)
        self.own.append(own)
        self.times.append(t)
        self.clocks.append(None)
        self.has_set |= is_set
        self.has_add |= not is_set
        self.nonneg &= is_set or value >= 0

    def at(self, i: int) -> VClock:
        """Release i's clock as far as the current pass knows. An entry the pass has not computed yet
        is a lower bound of the final one: its value from the previous pass (if any) lifted to the last
        one computed, which it follows in program order."""
        last = self.done
        c = self.clocks[i]
        if i <= last or i < self.fixed:
            assert c is not None
            return c
        self.dirty.flag = True
        w = self.w
        d = self.clocks[last] if last >= 0 else self.base
        assert d is not None
        if c is None:
            return d.set(w, self.own[i])
        return c.join(d)

    def count(self, x: int, bound: int, strict: bool) -> int:
        """How many leading releases have entry x ``< bound`` (strict) or ``<= bound``."""
        lo, hi = 0, len(self.clocks)
        while lo < hi:
            mid = (lo + hi) // 2
            v = self.at(mid)[x]
            if v < bound or (not strict and v == bound):
                lo = mid + 1
            else:
                hi = mid
        return lo


@dataclass(frozen=True)
class _Wait:
    """A satisfied wait as the solver sees it: the waiter, its clock before the acquire, the
    condition, and its cell's value at the epoch start."""

    r: int
    vc: VClock
    eq: bool
    expected: int | None
    init: int


@dataclass
class _Free:
    """A writer's releases that may or may not have landed when a wait passed: indices lo..m-1."""

    w: int
    chain: _Chain
    lo: int
    m: int


def _sums(chain: _Chain, lo: int, m: int) -> list[int]:
    """Contribution of the writer with lo, lo + 1, .., m releases landed, relative to lo."""
    out = [0]
    for v, _ in chain.ops[lo:m]:
        out.append(out[-1] + v)
    return out


def _meets(value: int, eq: bool, expected: int) -> bool:
    return value == expected if eq else value >= expected


class _Solver:
    """What one satisfied wait acquires (see the module docstring)."""

    def __init__(self, nranks: int) -> None:
        self.nranks = nranks

    def acquire(self, chains: Mapping[int, _Chain], wait: _Wait) -> tuple[VClock | None, bool]:
        """(the clock to join, None for nothing new; exact?). ``expected`` None: a read whose value
        is unknown, which takes every candidate."""
        r, vc, eq, expected = wait.r, wait.vc, wait.eq, wait.expected
        c = vc[r]
        forced_total = wait.init
        sets = adds = False
        free: list[_Chain] = []
        los: dict[int, int] = {}
        for w, ch in chains.items():
            # Forced: the releases that happen before the wait (the writer's own entry, fixed by
            # program order, tells which). My own releases before the wait are all of them.
            lo = bisect_left(ch.own, c) if w == r else bisect_right(ch.own, vc[w])
            los[w] = lo
            sets |= ch.has_set
            adds |= ch.has_add
            forced_total += ch.cum[lo]
            if w != r and lo < len(ch.own) and ch.at(lo)[r] < c:
                free.append(ch)  # its next release does not happen after the wait: a candidate
        if not free:
            return None, True
        if expected is not None and not sets and not eq and len(free) == 1 and free[0].nonneg:
            told, got = self._one_counter(free[0], los[free[0].w], expected - forced_total, c, r)
            if told:
                return got, True
        return self._general(chains, free, los, wait, (sets, adds), forced_total)

    @staticmethod
    def _one_counter(ch: _Chain, lo: int, need: int, c: int, r: int) -> tuple[bool, VClock | None]:
        """One free writer, non-negative credits, Ge: (told, the release that brings its contribution
        to ``need``); not told when the model cannot say (the general path decides)."""
        if need <= 0:
            return True, None
        p = bisect_left(ch.cum, ch.cum[lo] + need, lo + 1)
        if p > len(ch.ops):
            return False, None
        clock = ch.at(p - 1)
        return (True, clock) if clock[r] < c else (False, None)

    def _general(self, chains: Mapping[int, _Chain], candidates: list[_Chain], los: Mapping[int, int],
                 wait: _Wait, kinds: tuple[bool, bool], forced_total: int) -> tuple[VClock | None, bool]:
        r, vc, eq, expected = wait.r, wait.vc, wait.eq, wait.expected
        c = vc[r]
        sets, adds = kinds
        free = [_Free(ch.w, ch, los[ch.w], ch.count(r, c, strict=True)) for ch in candidates]
        free = [f for f in free if f.m > f.lo]
        if not free:
            return None, True
        if expected is None:
            return self._coarse(free), False
        if sets:
            if adds:
                return self._coarse(free), False
            return self._set_only(chains, free, los, eq, expected, wait.init)
        need = expected - forced_total
        if not eq and need <= 0:
            return None, True
        if not eq and all(f.chain.nonneg for f in free):
            return self._counter(free, need)
        if self._dependent(free):
            return self._coarse(free), False
        return self._search(free, vc, eq, need)

    # -- counters (Ge, every free credit non-negative): add releases in order of each entry ------------

    def _counter(self, free: list[_Free], need: int) -> tuple[VClock | None, bool]:
        if sum(v for f in free for v, _ in f.chain.ops[f.lo:f.m]) < need:
            return self._coarse(free), False  # the model cannot reach what the wait saw
        if len(free) == 1:
            f = free[0]
            got = 0
            for i in range(f.lo, f.m):
                got += f.chain.ops[i][0]
                if got >= need:
                    return f.chain.at(i), True
        out = []
        for x in range(self.nranks):
            # The largest prefix of each writer within bound b is closed under happens-before (a
            # release it implies has smaller clocks), so adding releases by increasing entry x finds
            # the least bound at which the counter can reach the threshold.
            items = sorted((f.chain.at(i)[x], k, i) for k, f in enumerate(free) for i in range(f.lo, f.m))
            got = 0
            for b, k, i in items:
                got += free[k].chain.ops[i][0]
                if got >= need:
                    out.append(b)
                    break
        return VClock.of(out), True

    # -- Eq waits, negative credits: search the reachable values per bound ------------------------------

    def _dependent(self, free: list[_Free]) -> bool:
        """True if a free release of one writer happens after a free release of another (the
        independent per-writer choice below would then admit prefixes no order can produce)."""
        for f in free:
            last = f.chain.at(f.m - 1)
            for g in free:
                if g is not f and last[g.w] >= g.chain.at(g.lo)[g.w]:
                    return True
        return False

    def _search(self, free: list[_Free], vc: Sequence[int], eq: bool, need: int) -> tuple[VClock | None, bool]:
        sums = [_sums(f.chain, f.lo, f.m) for f in free]
        out = []
        for x in range(self.nranks):
            entries = [[f.chain.at(i)[x] for i in range(f.lo, f.m)] for f in free]
            bounds = sorted({vc[x], *(b for e in entries for b in e)})
            found = None
            for b in bounds:
                reach = self._reach([s[: 1 + bisect_left(e, b + 1)] for s, e in zip(sums, entries, strict=True)],
                                    eq)
                if reach is None:
                    return self._coarse(free), False
                if (need in reach) if eq else max(reach) >= need:
                    found = b
                    break
            if found is None:
                return self._coarse(free), False
            out.append(found)
        return VClock.of(out), True

    @staticmethod
    def _reach(options: list[list[int]], eq: bool) -> set[int] | None:
        """Reachable totals choosing one option per writer (Ge: only the maximum matters)."""
        if not eq:
            return {sum(max(o) for o in options)}
        reach = {0}
        for o in options:
            reach = {a + b for a in reach for b in set(o)}
            if len(reach) > MAX_SUMS:
                return None
        return reach

    # -- cells only ever Set --------------------------------------------------------------------------------

    def _set_only(self, chains: Mapping[int, _Chain], free: list[_Free], los: Mapping[int, int], eq: bool,
                  expected: int, init: int) -> tuple[VClock | None, bool]:
        # The value seen is that of the Set that landed last: a forced one that nothing forced
        # follows, or a candidate that no forced release follows (or the epoch's start value).
        forced = [(w, los[w] - 1, ch) for w, ch in chains.items()]
        forced = [(w, i, ch) for w, i, ch in forced if i >= 0]
        lasts = [(w, ch.at(i)) for w, i, ch in forced]

        def followed(w: int, clock: VClock) -> bool:
            return any(u != w and g[w] >= clock[w] for u, g in lasts)

        if not forced and _meets(init, eq, expected):
            return None, True
        for (w, i, ch), (_, clock) in zip(forced, lasts, strict=True):
            if _meets(ch.ops[i][0], eq, expected) and not followed(w, clock):
                return None, True
        options = [f.chain.at(i) for f in free for i in range(f.lo, f.m)
                   if _meets(f.chain.ops[i][0], eq, expected) and not followed(f.w, f.chain.at(i))]
        if not options:
            return self._coarse(free), False
        return meet_all(options), True

    @staticmethod
    def _coarse(free: list[_Free]) -> VClock:
        return join_all(f.chain.at(f.m - 1) for f in free)


class _Replay:
    """One epoch's replay (see the module docstring)."""

    def __init__(self, logs: Sequence[Sequence[SyncEvent]], init: Sequence[Mapping[int, np.ndarray]],
                 ranks: Sequence[int] | None = None, parts: Sequence[int | None] | None = None) -> None:
        self.logs = logs
        self.init = init
        self.nr = nr = len(logs)
        self.rank_of: Sequence[int] = ranks if ranks is not None else range(nr)
        self.part_of: Sequence[int | None] = parts if parts is not None else [None] * nr
        self.solver = _Solver(nr)
        self.chains: dict[CellKey, dict[int, _Chain]] = {}
        self.dirty = _Dirty()
        self.where: dict[tuple[int, int], tuple[_Chain, int]] = {}
        zero = VClock.zeros(nr)
        self.fresh = [zero.set(r, 1) for r in range(nr)]
        """Each thread's clock at the epoch's start (its own entry 1)."""
        self.segments: list[list[VClock]] = [[self.fresh[r]] * (len(logs[r]) + 1) for r in range(nr)]
        self.exact = [0] * nr
        self.coarse = [0] * nr

    def run(self) -> Resolved:
        main = [r for r in range(self.nr) if self.part_of[r] is None]
        joins = {r: [i for i, ev in enumerate(self.logs[r]) if ev[0] == JOIN] for r in main}
        if len({len(j) for j in joins.values()}) > 1:
            raise RuntimeError(f"race detector: the ranks joined a different number of times ({list(joins.values())})")
        nparts = len(joins[main[0]]) + 1 if main else 1
        start = list(self.fresh)
        pos = [0] * self.nr
        for part in range(nparts):
            ends = [self._end(r, part, joins) for r in range(self.nr)]
            pos = [0 if self.part_of[r] == part else p for r, p in enumerate(pos)]
            vcs = self._part(start, pos, ends)
            if part < nparts - 1:
                joined = join_all(vcs)
                start = []
                for r in range(self.nr):
                    v = joined.tick(r)
                    start.append(v)
                    if self.part_of[r] is None:
                        self.segments[r][ends[r] + 1] = v
                pos = [e + 1 if self.part_of[r] is None else e for r, e in enumerate(ends)]
        return Resolved(self.segments, self.exact, self.coarse)

    def _end(self, r: int, part: int, joins: Mapping[int, list[int]]) -> int:
        """Where thread r's events of ``part`` end: a main thread's at its join, a task thread's at its log's
        end in its own part (none before it, all after it)."""
        own = self.part_of[r]
        if own is None:
            j = joins[r]
            return j[part] if part < len(j) else len(self.logs[r])
        return 0 if part < own else len(self.logs[r])

    def _part(self, start: list[VClock], pos: list[int], ends: list[int]) -> list[VClock]:
        order = sorted((self.logs[r][i][1], r, i) for r in range(self.nr) for i in range(pos[r], ends[r]))
        events = [(r, i, self.logs[r][i]) for _, r, i in order]
        touched: list[_Chain] = []
        ticks = [v[r] for r, v in enumerate(start)]
        for r, i, ev in events:
            if ev[0] == FORK:
                ticks[r] += 1
            elif ev[0] == REL:
                ch = self.chains.setdefault((ev[2], ev[3], ev[4]), {}).get(r)
                if ch is None:
                    ch = self.chains[(ev[2], ev[3], ev[4])][r] = _Chain(r, self.dirty)
                if len(ch.clocks) == ch.fixed:
                    touched.append(ch)
                    ch.base = start[r]
                self.where[(r, i)] = (ch, len(ch.clocks))
                ch.append(ev[5], ev[6], ticks[r], ev[1])
                ticks[r] += 1
        exact = [0] * self.nr
        coarse = [0] * self.nr
        vcs = start
        for _ in range(MAX_PASSES):
            exact = [0] * self.nr
            coarse = [0] * self.nr
            self.dirty.flag = False
            changed, vcs = self._pass(events, start, touched, (exact, coarse))
            # A pass that read only clocks it had computed itself is a fixed point; so is one that
            # changed no release's clock.
            if not self.dirty.flag or not changed:
                break
        else:
            exact = [0] * self.nr
            coarse = [0] * self.nr
            for _ in range(MAX_PASSES):
                changed, vcs = self._pass(events, start, touched, (exact, coarse), by_time=True)
                if not changed:
                    break
        for r in range(self.nr):
            self.exact[r] += exact[r]
            self.coarse[r] += coarse[r]
        for ch in touched:
            ch.fixed = len(ch.clocks)
            ch.done = ch.fixed - 1
        return vcs

    def _pass(self, events: list[tuple[int, int, SyncEvent]], start: list[VClock], touched: list[_Chain],
              counts: tuple[list[int], list[int]], by_time: bool = False) -> tuple[bool, list[VClock]]:
        vcs = list(start)
        for ch in touched:
            ch.done = ch.fixed - 1
        changed = False
        segs = self.segments
        where = self.where
        acquire: Callable[..., tuple[VClock | None, bool]] = self._by_time if by_time else self._exact
        for r, i, ev in events:
            vc = vcs[r]
            if ev[0] == REL:
                ch, k = where[(r, i)]
                if ch.clocks[k] != vc:
                    changed = True
                    ch.clocks[k] = vc
                ch.done = k
                vcs[r] = vc = vc.tick(r)
            elif ev[0] >= EDGE:
                vcs[r] = vc = self._edge(r, vc, ev)
            else:
                got, exact = acquire(r, vc, ev)
                counts[0 if exact else 1][r] += 1
                if got is not None:
                    vcs[r] = vc = vc.join(got)  # vc itself when the acquire told nothing new
            segs[r][i + 1] = vc
        return changed, vcs

    def _edge(self, r: int, vc: VClock, ev: SyncEvent) -> VClock:
        """A task thread's FORK (its own entry ticks) or EDGE (the source's clock joined)."""
        if ev[0] == FORK:
            return vc.tick(r)
        return vc.join(self.segments[ev[2]][ev[3]])

    def _exact(self, r: int, vc: VClock, ev: SyncEvent) -> tuple[VClock | None, bool]:
        _, _, buf, cell, eq, expected = ev
        owner = self.rank_of[r]
        init = self.init[owner].get(buf)
        start = int(init[cell]) if init is not None else 0
        return self.solver.acquire(self.chains.get((owner, buf, cell), {}), _Wait(r, vc, eq, expected, start))

    def _by_time(self, r: int, vc: VClock, ev: SyncEvent) -> tuple[VClock | None, bool]:
        """The fallback: every release into the cell issued before the wait passed."""
        got: VClock | None = None
        for ch in self.chains.get((self.rank_of[r], ev[2], ev[3]), {}).values():
            n = bisect_left(ch.times, ev[1])
            if n:
                c = ch.at(n - 1)
                got = c if got is None else got.join(c)
        return got, False


def replay(logs: Sequence[Sequence[SyncEvent]], init: Sequence[Mapping[int, np.ndarray]],
           ranks: Sequence[int] | None = None, parts: Sequence[int | None] | None = None) -> Resolved:
    """Resolve one epoch: every rank's sync log (``logs[r]``) and, per rank, the values of its signal
    cells at the epoch's start (``init[r][buffer index]``, flat). With logical threads (see the module
    docstring) ``logs`` is per thread, ``ranks[i]`` thread i's rank and ``parts[i]`` its part of the
    epoch (None: its rank's main thread, which carries the joins)."""
    return _Replay(logs, init, ranks, parts).run()


__all__ = ["ACQ", "EDGE", "FORK", "JOIN", "MAX_PASSES", "MAX_SUMS", "REL", "Resolved", "SyncEvent", "replay"]
