"""Races between one rank's tasks (issue 40, stage 4), whatever order the scheduler chose.

The rank-level detector (``races``) orders a rank's accesses by program order, which is one schedule of
its tasks. Here two accesses by tasks of one rank are concurrent when the *task graph* has no path
between their tasks: the edges pypto's runtime derives (``runtime.taskdeps``: tags through the
TensorMap, explicit deps) plus a notify by one task that a later wait of another task on this rank's cell
observed (a local handshake orders them on the device too). A conflicting pair (overlapping elements of
one buffer, at least one write, not two atomic adds) is a race naming both tasks and lines; two atomic
``AtomicAdd`` puts of floating-point data into one element from unordered tasks are an order-dependent
sum (pypto-lib #953: the partials are folded in task-completion order). The Orchestration's own accesses
are never concurrent with a task (it drains before touching tensors: ``runtime.tasksched``).

Both are decided from the graph, not from the order this run took, so every schedule reports the same.
The reports join the detector's at its checkpoint (``RaceDetector.extra_reports``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pldemu.ir import Op
from pldemu.runtime.instrument.intervals import Interval, overlap, region_intervals
from pldemu.runtime.instrument.races import ATOMIC, READ, WRITE, RaceAccess, RaceReport
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import CallSite, OpEvent
from pldemu.runtime.transfer import Region, plan_get, plan_put
from pldemu.runtime.values import Buffer, TensorRef, flat_cell

ORDER_DEPENDENT = "order-dependent sum"
"""``RaceReport.reason`` of two unordered floating-point AtomicAdd accumulations into one element."""


@dataclass(frozen=True)
class _Access:
    task: int
    kind: int
    ivs: list[Interval]
    site: int


@dataclass
class _Run:
    """One call's accesses per (target rank, buffer), and its local handshakes (cell -> notifying tasks)."""

    accesses: dict[tuple[int, int], list[_Access]] = field(default_factory=dict)
    notifiers: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    sync: dict[int, set[int]] = field(default_factory=dict)


class TaskRaces(MonitorBase):
    """This rank's task-level race check: a monitor of the program's accesses, inside tasks only."""

    WANTED = frozenset({Op.TILE_LOAD, Op.TILE_STORE, Op.TENSOR_READ, Op.TENSOR_WRITE, Op.PUT, Op.GET, Op.NOTIFY,
                        Op.WAIT})

    def __init__(self, scheduler: Any, rank: int, buffers: Sequence[Buffer], sites: Sequence[CallSite]) -> None:
        self.sched = scheduler
        self.rank = rank
        self.buffers = list(buffers)
        self.sites = sites
        self.run = 0
        self._cur = _Run()
        self.reports: list[RaceReport] = []

    def wants(self, op: Op) -> bool:
        return op in self.WANTED

    def run_started(self, run: int) -> None:
        self.run = run
        self._cur = _Run()

    def run_ended(self, run: int, error: BaseException | None) -> None:
        if error is None:
            self.reports += self._check(self._cur, self.sched.graph())

    def take(self) -> list[RaceReport]:
        """The reports found since the last call (the detector's checkpoint takes them)."""
        out, self.reports = self.reports, []
        return out

    # -- recording -------------------------------------------------------------------------------

    def after(self, event: OpEvent, result: Any) -> None:
        task = self.sched.current_key()
        if task is None:
            return
        op, args, site = event.op, event.args, event.site
        if op is Op.NOTIFY:
            self._notify(task, args)
        elif op is Op.WAIT:
            self._wait(task, args)
        elif op is Op.TILE_LOAD:
            extent = args[3] if len(args) > 3 else args[2]
            self._add(task, self.rank, args[0], READ, site, args[1], extent)
        elif op is Op.TILE_STORE:
            self._add(task, self.rank, args[2], WRITE, site, args[1], args[0].valid)
        elif op in (Op.TENSOR_READ, Op.TENSOR_WRITE):
            self._scalar(task, args, READ if op is Op.TENSOR_READ else WRITE, site)
        elif op is Op.PUT:
            plan = plan_put(self.rank, site, args)
            if plan is not None:
                self._side_of(task, self.rank, plan.src, READ, site)
                self._side_of(task, plan.peer, plan.dst, ATOMIC if site.attrs["atomic"] else WRITE, site)
        elif op is Op.GET:
            got = plan_get(self.rank, site, args)
            if got is not None:
                self._side_of(task, got.peer, got.src, READ, site)
                self._side_of(task, self.rank, got.dst, WRITE, site)

    def _side_of(self, task: int, target: int, side: Region | None, kind: int, site: CallSite) -> None:
        if side is not None:
            self._add(task, target, side.tensor, kind, site, side.offsets, side.extent)

    def _add(self, task: int, target: int, t: Any, kind: int, site: CallSite, offsets: Any, extent: Any) -> None:
        if not isinstance(t, TensorRef) or t.buffer.kind.name == "SIGNAL":
            return
        try:
            ivs = region_intervals(t.shape, tuple(offsets), tuple(extent))
        except Exception:  # the handler refuses it itself
            return
        if ivs:
            self._cur.accesses.setdefault((target, t.buffer.index), []).append(_Access(task, kind, ivs, site.id))

    def _scalar(self, task: int, args: tuple[Any, ...], kind: int, site: CallSite) -> None:
        t = args[0]
        if not isinstance(t, TensorRef) or t.buffer.kind.name == "SIGNAL":
            return
        try:
            flat = flat_cell("race", self.rank, self.rank, t, tuple(operator.index(i) for i in args[1]))
        except Exception:
            return
        self._cur.accesses.setdefault((self.rank, t.buffer.index), []).append(
            _Access(task, kind, [(flat, flat + 1)], site.id))

    def _notify(self, task: int, args: tuple[Any, ...]) -> None:
        sig, peer = args[0], args[1]
        if isinstance(sig, TensorRef) and operator.index(peer) == self.rank:
            cell = flat_cell("race", self.rank, self.rank, sig, tuple(args[2]))
            self._cur.notifiers.setdefault((sig.buffer.index, cell), set()).add(task)

    def _wait(self, task: int, args: tuple[Any, ...]) -> None:
        sig = args[0]
        if isinstance(sig, TensorRef):
            cell = flat_cell("race", self.rank, self.rank, sig, tuple(args[1]))
            notifiers = self._cur.notifiers.get((sig.buffer.index, cell), set()) - {task}
            self._cur.sync.setdefault(task, set()).update(notifiers)

    # -- checking --------------------------------------------------------------------------------

    def _check(self, run: _Run, graph: Sequence[frozenset[int]]) -> list[RaceReport]:
        preds = [set(g) | run.sync.get(k, set()) for k, g in enumerate(graph)]
        anc = _ancestors(preds)
        found: dict[tuple[Any, ...], RaceReport] = {}
        for (target, index), accs in run.accesses.items():
            buf = self.buffers[index]
            for i, a in enumerate(accs):
                for b in accs[i + 1:]:
                    if a.task == b.task or a.task >= len(anc) or b.task >= len(anc):
                        continue
                    if (anc[b.task] >> a.task) & 1 or (anc[a.task] >> b.task) & 1:
                        continue
                    self._pair(found, buf, target, a, b)
        return list(found.values())

    def _pair(self, found: dict[tuple[Any, ...], RaceReport], buf: Buffer, target: int, a: _Access,
              b: _Access) -> None:
        if a.kind == READ and b.kind == READ:
            return
        reason = ""
        if a.kind == ATOMIC and b.kind == ATOMIC:
            if not buf.dtype.is_float:
                return
            reason = ORDER_DEPENDENT
        hit = overlap(sorted(a.ivs), sorted(b.ivs))
        if hit is None:
            return
        key = (buf.index, target, min(a.site, b.site), max(a.site, b.site), reason)
        if key in found:
            return
        first, second = sorted((a, b), key=lambda x: x.task)
        found[key] = TaskRaceReport(buf.name, buf.shape, target, hit[0], hit[1], hit[2],
                                    self._side(first), self._side(second), reason=reason,
                                    tasks=(self.sched.task_text(first.task), self.sched.task_text(second.task)))

    def _side(self, a: _Access) -> RaceAccess:
        where = self.sites[a.site].where if 0 <= a.site < len(self.sites) else f"<site {a.site}>"
        return RaceAccess(self.rank, a.kind, where, self.run, 0.0)


@dataclass(frozen=True)
class TaskRaceReport(RaceReport):
    """A race (or an order-dependent sum) between two tasks of one rank with no dependency path between them."""

    tasks: tuple[str, str] = ("", "")

    def describe(self) -> str:
        a, b = self.first, self.second
        head = (f"{self.reason or 'race'} on {self.region_text()} of rank {self.target} ({self.overlap} elements) "
                f"between two tasks of rank {a.rank} (call {a.call}): ")
        sides = f"{a.kind_name} at {a.location} in {self.tasks[0]} || {b.kind_name} at {b.location} in {self.tasks[1]}"
        if self.reason == ORDER_DEPENDENT:
            return (head + sides + ": floating-point AtomicAdd partials from tasks with no order between them are "
                    "summed in task-completion order, which is not fixed (pypto-lib #953: write disjoint partials "
                    "and reduce them in one task, or order the tasks with deps=)")
        return (head + sides + ": no dependency path between the tasks (no tensor edge pypto's runtime derives, "
                "no deps=), so they may run in either order or at once on two cores")


def _ancestors(preds: list[set[int]]) -> list[int]:
    """Each task's ancestors as a bitset (edges may point to later keys: a handshake's notifier)."""
    memo: list[int | None] = [None] * len(preds)

    def visit(k: int, stack: set[int]) -> int:
        got = memo[k]
        if got is not None:
            return got
        stack.add(k)
        bits = 0
        for p in preds[k]:
            if 0 <= p < len(preds) and p not in stack:
                bits |= visit(p, stack) | (1 << p)
        stack.discard(k)
        memo[k] = bits
        return bits

    return [visit(k, set()) for k in range(len(preds))]


__all__ = ["ORDER_DEPENDENT", "TaskRaceReport", "TaskRaces"]
