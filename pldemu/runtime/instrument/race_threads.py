"""The race detector's logical threads on a rank that runs tasks concurrently (issue 40).

Why: one vector clock per rank, advanced in the order this run executed the rank's tasks, lets an
acquire by one task order the later accesses of an unrelated task, and a release by one task order
the earlier accesses of another: a cross-rank race is then hidden in some task orders. Here each
block of a task and the Orchestration is a *logical thread* with its own sync log, records and clock
entry (``race_clocks``: "Logical threads"):

* a block's thread starts from the join of the Orchestration's clock at the task's submission (the
  Orchestration's own entry ticks there: a FORK) and its producers' clocks at their completion (every
  block of a producer at its end, and a producer's own start: its producers, transitively);
* its acquires (a wait that observed a release) join into its own clock only, its releases carry it;
* the blocks of one ``pl.spmd`` task are concurrent with each other (each its own thread); a task of
  several blocks and several start edges joins them once in a thread of no code, its hub, and each block
  starts from the hub (C blocks after P producer blocks: C + P edges, not C x P);
* a deferred wait runs at its task's completion: it belongs to the task's block 0;
* the Orchestration joins the tasks it waited for (a drain, a ``pl.read`` / ``pl.write``'s writers);
* a block *continues* the thread of a block of one of its producers that no other block continued yet
  (same part), after a FORK that ticks its entry: the producer's events happen before the new block's
  (program order says so), and a peer that knew only the producer's completion knows the entry before
  the tick. A chain of N tasks is then one thread, not N, whose clocks (``race_clocks``: one entry per
  thread) and pairwise record checks (``races.find_races``) would grow as N squared.

The scheduler (``runtime.tasksched``) tells :class:`TaskThreads` of submissions and of what the
Orchestration waited for (its ``observer``); the detector asks which thread runs at each event. A rank
without tasks has only its main thread: the detector then never comes here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pldemu.runtime.instrument.race_clocks import EDGE, FORK, SyncEvent


@dataclass(eq=False)
class ThreadLog:
    """One logical thread's share of an epoch: its sync log, each event's (site, call), its records
    (``RaceDetector._record``'s keys) and the part of the epoch it runs in (None: the main thread)."""

    sync: list[SyncEvent] = field(default_factory=list)
    meta: list[tuple[int, int]] = field(default_factory=list)
    log: dict[Any, list[Any]] = field(default_factory=dict)
    part: int | None = None


@dataclass(eq=False)
class _TaskClock:
    """What the detector knows of one task: the main thread's position at its submission (before its
    FORK), its start edges once computed, its blocks' threads."""

    fork: int | None
    start: dict[int, int] | None = None
    blocks: dict[int, int] = field(default_factory=dict)
    hub: int | None = None
    """The thread that joined the start edges once for every block (:meth:`TaskThreads._entry`)."""
    end: dict[int, int] | None = None
    """Its clock at completion as edges, kept once a successor continued one of its threads (whose log
    then goes on past this task's end)."""
    producers: list[Any] | None = None
    """Its producers, once listed (a task after T writers of one tensor has T: listed once, not per block)."""
    candidates: list[tuple[int, Any]] | None = None
    """The producers' threads its blocks may continue (thread, producer), the likeliest last: one found
    taken is never free again, so each is looked at once over all the task's blocks."""


class Rising:
    """A clock whose readings strictly increase: the replay visits one rank's events in time order, and
    a task's start edge must come after the events it joins."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.last = -math.inf

    def __call__(self) -> float:
        t = self.clock()
        if t <= self.last:
            t = math.nextafter(self.last, math.inf)
        self.last = t
        return t


def _merge(into: dict[int, int], edges: dict[int, int]) -> None:
    for src, pos in edges.items():
        if pos > into.get(src, -1):
            into[src] = pos


class TaskThreads:
    """This rank's logical threads in the current epoch (thread 0: the main thread, the Orchestration).
    Set as the scheduler's ``observer`` by :meth:`RaceDetector.attach_tasks`."""

    def __init__(self, sched: Any, clock: Callable[[], float], call: Callable[[], int]) -> None:
        self.sched = sched
        self.clock = clock
        self.call = call
        self.threads: list[ThreadLog] = [ThreadLog()]
        self._tasks: dict[Any, _TaskClock] = {}
        self._owner: dict[int, Any] = {}
        """Each task thread -> the task whose block ran last on it (a successor may continue it)."""
        self.joins = 0
        """All-rank joins in this epoch so far: the part a new thread runs in."""

    @property
    def main(self) -> ThreadLog:
        return self.threads[0]

    def current(self) -> ThreadLog:
        """The thread whose code runs now (a deferred wait: its task's block 0)."""
        key = self.sched.current_key()
        if key is None:
            return self.threads[0]
        return self.threads[self._block(self.sched.tasks[key], self.sched.current_block())]

    def take(self) -> list[ThreadLog]:
        """The task threads of the epoch (the checkpoint sends them); the next epoch starts afresh (what
        ran before a checkpoint happens before what runs after it)."""
        out = self.threads[1:]
        self.threads = [ThreadLog()]
        self._tasks = {}
        self._owner = {}
        self.joins = 0
        return out

    # -- the scheduler's observer ----------------------------------------------------------------

    def forked(self, task: Any) -> None:
        """The Orchestration submitted ``task``: remember where, and tick its own entry."""
        main = self.threads[0]
        self._tasks[task] = _TaskClock(len(main.sync))
        self._log(main, (FORK, self.clock()))

    def awaited(self, tasks: Iterable[Any]) -> None:
        """The Orchestration waited for ``tasks`` to complete: it joins their clocks at completion."""
        edges: dict[int, int] = {}
        for t in tasks:
            _merge(edges, self._completion(t))
        edges.pop(0, None)
        main = self.threads[0]
        for src, pos in sorted(edges.items()):
            self._log(main, (EDGE, self.clock(), src, pos))

    # -- threads ---------------------------------------------------------------------------------

    def _log(self, th: ThreadLog, ev: SyncEvent) -> None:
        th.sync.append(ev)
        th.meta.append((-1, self.call()))

    def _of(self, task: Any) -> _TaskClock:
        tc = self._tasks.get(task)
        if tc is None:  # submitted before the epoch began (or run inline): nothing earlier to join
            tc = self._tasks[task] = _TaskClock(None)
        return tc

    def _block(self, task: Any, block: int) -> int:
        tc = self._of(task)
        tid = tc.blocks.get(block)
        if tid is not None:
            return tid
        start = self._start(task)
        tid = self._continued(task)
        if tid is None:
            tid = len(self.threads)
            self.threads.append(ThreadLog(part=self.joins))
        else:  # past the entry any peer knowing only the producer's completion has
            self._log(self.threads[tid], (FORK, self.clock()))
        th = self.threads[tid]
        for src, pos in self._entry(task, tc, start):
            if src != tid:
                self._log(th, (EDGE, self.clock(), src, pos))
        tc.blocks[block] = tid
        self._owner[tid] = task
        return tid

    def _entry(self, task: Any, tc: _TaskClock, start: dict[int, int]) -> list[tuple[int, int]]:
        """The edges a new block of ``task`` starts with: its start edges, or, for a task of several blocks
        with several start edges, one edge to the task's *hub*: a thread that runs no code and joined them
        once for all the blocks. Each edge is a join of clocks as wide as the epoch's threads and a clock
        stored at the checkpoint: an spmd(256) task after an spmd(1024) producer made 256 x 1024 of them
        (a model layer's verdict took GBs). The hub's own clock entry orders nothing: it has no records."""
        edges = sorted(start.items())
        if task.blocks <= 1 or len(edges) <= 1:
            return edges
        if tc.hub is None:
            hub = ThreadLog(part=self.joins)
            for src, pos in edges:
                self._log(hub, (EDGE, self.clock(), src, pos))
            tc.hub = len(self.threads)
            self.threads.append(hub)
        return [(tc.hub, len(edges))]

    def _continued(self, task: Any) -> int | None:
        """A thread of one of ``task``'s producers in this part that no block continued since that producer
        ran on it (its completion kept first), or None."""
        tc = self._of(task)
        if tc.candidates is None:  # the latest producer first: a chain's last link owns the thread
            tc.candidates = [(tid, p) for p in self._producers(task) for tid in reversed(self._of(p).blocks.values())]
        while tc.candidates:
            tid, p = tc.candidates.pop()
            if self._owner.get(tid) is p and self.threads[tid].part == self.joins:
                pc = self._of(p)
                if pc.end is None:
                    pc.end = self._completion(p)
                return tid
        return None

    def _start(self, task: Any) -> dict[int, int]:
        """A task's start edges: the main thread at its submission, its producers at their completion.
        Computed producers first with a stack of its own, not by recursion: a chain of thousands of tasks
        whose blocks logged nothing (a model layer's) would pass Python's recursion limit."""
        stack = [task]
        while stack:
            t = stack[-1]
            tc = self._of(t)
            if tc.start is not None:
                stack.pop()
                continue
            producers = self._producers(t)
            pending = [p for p in producers if not self._of(p).blocks and self._of(p).start is None]
            if pending:
                stack.extend(pending)
                continue
            edges: dict[int, int] = {0: tc.fork} if tc.fork is not None else {}
            for p in producers:
                _merge(edges, self._completion(p))
            tc.start = edges
            stack.pop()
        start = self._of(task).start
        assert start is not None
        return start

    def _producers(self, task: Any) -> list[Any]:
        """The tasks of the batch ``task`` depends on (earlier ones: the graph has no cycle)."""
        tc = self._of(task)
        if tc.producers is None:
            tasks = self.sched.tasks
            tc.producers = [tasks[p] for p in sorted(task.producers) if 0 <= p < len(tasks) and tasks[p] is not task]
        return tc.producers

    def _completion(self, task: Any) -> dict[int, int]:
        """A completed task's clock as edges: every block's thread at its end (each began with the task's
        start edges, so they are not repeated: a chain of tasks keeps a few edges each), or, if no block
        logged anything, its start."""
        tc = self._of(task)
        if tc.end is not None:
            return tc.end
        if not tc.blocks:
            return self._start(task)
        return {tid: len(self.threads[tid].sync) for tid in tc.blocks.values()}


__all__ = ["Rising", "TaskThreads", "ThreadLog"]
