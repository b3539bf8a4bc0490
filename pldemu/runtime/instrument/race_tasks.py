"""Races between one rank's tasks (issue 40, stage 4), whatever order the scheduler chose.

The rank-level detector (``races``) judges a peer's accesses against a task's (a logical thread per task
block, ``race_threads``), not two tasks of one rank. Here two accesses by tasks of one rank are concurrent
when the *task graph* has no path
between their tasks: the edges pypto's runtime derives (``runtime.taskdeps``: tags through the
TensorMap, explicit deps) plus a notify by one task that a later wait of another task on this rank's cell
observed (a local handshake orders them on the device too). A conflicting pair (overlapping elements of
one buffer, at least one write, not two atomic adds) is a race naming both tasks and lines; two atomic
``AtomicAdd`` puts or atomic ``tile.store`` calls (``pl.assemble(..., atomic=Add)``) of floating-point
data into one element from unordered tasks are an order-dependent sum (pypto-lib #953: the partials are
folded in task-completion order). The blocks of one SPMD task are
concurrent with each other, and so are the AIV lanes of one block inside a ``pl.split_aiv`` region (the
translator runs them one after the other; ``system.aiv_lane`` markers say which lane runs): two accesses of
different lanes conflict unless a cross-lane barrier (pypto's ``syncall``, a ``system.aiv_lane {sync=1}``
each lane passes) lies between them, i.e. unless the lanes had passed different numbers of barriers (pypto
#1981). The Orchestration drains before touching tensors (``runtime.tasksched``),
except at a ``pl.read`` / ``pl.write``, which waits only for the tensor's TensorMap writers as pypto's
runtime does: its access is concurrent with the tasks submitted before it that are not those writers or
their ancestors (an INPUT reader, a manual-scope writer). Blocking waits that can hold every core a notifier
of their cell needs are reported too (pypto #2391).

Both are decided from the graph, not from the order this run took, so every schedule reports the same.
The reports join the detector's at its checkpoint (``RaceDetector.extra_reports``).
"""

from __future__ import annotations

import heapq
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

CORE_SATURATION = "waits can take every core"
"""``RaceReport.reason`` of blocking waits that can hold every core their notifier needs (pypto #2391)."""

ORCH = -1
"""The task key of the Orchestration's own accesses."""

ORDER_DEPENDENT = "order-dependent sum"
"""``RaceReport.reason`` of two unordered floating-point AtomicAdd accumulations into one element."""


@dataclass(frozen=True)
class _Access:
    task: int
    kind: int
    ivs: list[Interval]
    site: int
    block: int = 0
    seen: int = 0
    """The Orchestration's access (``task`` ORCH): how many tasks were submitted before it."""
    after: frozenset[int] = frozenset()
    """The Orchestration's access: the tasks it waited for (``TaskScheduler.await_writers``)."""
    since: int = 0
    """The Orchestration's access: how many tasks were submitted before its last drain (all complete)."""
    lane: int = -1
    """The AIV lane of a ``pl.split_aiv`` region it ran on (-1: outside every region)."""
    phase: int = 0
    """How many cross-lane barriers its lane had passed in its block."""


@dataclass
class _Run:
    """One call's accesses per (target rank, buffer), and its local handshakes (cell -> notifying tasks)."""

    accesses: dict[tuple[int, int], list[_Access]] = field(default_factory=dict)
    notifiers: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    sync: dict[int, set[int]] = field(default_factory=dict)
    signalling: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)
    """(signal, cell) -> task -> site of its first notify of that cell on any rank (the #2391 check)."""
    holding: dict[tuple[int, int], dict[tuple[int, int], int]] = field(default_factory=dict)
    """(signal, cell) -> (task, block) -> site of a blocking wait of that block on this rank's cell."""
    lanes: dict[tuple[int, int], int] = field(default_factory=dict)
    """(task, block) -> the AIV lane running now in that block (absent: outside a split region)."""
    phases: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """(task, block, lane) -> the cross-lane barriers that lane has passed."""


class TaskRaces(MonitorBase):
    """This rank's task-level race check: a monitor of the program's accesses, inside tasks only."""

    WANTED = frozenset({Op.TILE_LOAD, Op.TILE_STORE, Op.TENSOR_READ, Op.TENSOR_WRITE, Op.PUT, Op.GET, Op.NOTIFY,
                        Op.WAIT, Op.AIV_LANE})

    def __init__(self, scheduler: Any, rank: int, buffers: Sequence[Buffer], sites: Sequence[CallSite]) -> None:
        self.sched = scheduler
        self.rank = rank
        self.buffers = buffers  # the machine's list: a run's tensor.create buffers join it
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
        if task is None:  # the Orchestration: a pl.read / pl.write while tasks it did not wait for may run
            if not self.sched.orch_concurrent():
                return
            task = ORCH
        op, args, site = event.op, event.args, event.site
        if op is Op.AIV_LANE:
            self._lane(task, site)
        elif op is Op.NOTIFY:
            self._notify(task, args, site)
        elif op is Op.WAIT:
            self._wait(task, args, site)
        elif op is Op.TILE_LOAD:
            extent = args[3] if len(args) > 3 else args[2]
            self._add(task, self.rank, args[0], READ, site, args[1], extent)
        elif op is Op.TILE_STORE:
            kind = ATOMIC if site.attrs.get("atomic", False) else WRITE  # pl.assemble(..., atomic=Add)
            self._add(task, self.rank, args[2], kind, site, args[1], args[0].valid)
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

    def _lane(self, task: int, site: CallSite) -> None:
        if task == ORCH:
            return
        key, lane = (task, self.sched.current_block()), int(site.attrs["lane"])
        if lane < 0:
            self._cur.lanes.pop(key, None)
        elif site.attrs["sync"]:
            self._cur.phases[(*key, lane)] = self._cur.phases.get((*key, lane), 0) + 1
        else:
            self._cur.lanes[key] = lane

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
            self._cur.accesses.setdefault((target, t.buffer.index), []).append(self._access(task, kind, ivs, site))

    def _scalar(self, task: int, args: tuple[Any, ...], kind: int, site: CallSite) -> None:
        t = args[0]
        if not isinstance(t, TensorRef) or t.buffer.kind.name == "SIGNAL":
            return
        try:
            flat = flat_cell("race", self.rank, self.rank, t, tuple(operator.index(i) for i in args[1]))
        except Exception:
            return
        self._cur.accesses.setdefault((self.rank, t.buffer.index), []).append(
            self._access(task, kind, [(flat, flat + 1)], site))

    def _access(self, task: int, kind: int, ivs: list[Interval], site: CallSite) -> _Access:
        if task == ORCH:
            drains = self.sched.drains
            return _Access(task, kind, ivs, site.id, 0, len(self.sched.tasks), frozenset(self.sched.orch_after),
                           since=drains[-1] if drains else 0)
        block = self.sched.current_block()
        lane = self._cur.lanes.get((task, block), -1)
        return _Access(task, kind, ivs, site.id, block, lane=lane, phase=self._cur.phases.get((task, block, lane), 0))

    def _notify(self, task: int, args: tuple[Any, ...], site: CallSite) -> None:
        sig, peer = args[0], args[1]
        if isinstance(sig, TensorRef):
            cell = flat_cell("race", self.rank, self.rank, sig, tuple(args[2]))
            self._cur.signalling.setdefault((sig.buffer.index, cell), {}).setdefault(task, site.id)
            if operator.index(peer) == self.rank:
                self._cur.notifiers.setdefault((sig.buffer.index, cell), set()).add(task)

    def _wait(self, task: int, args: tuple[Any, ...], site: CallSite) -> None:
        sig = args[0]
        if isinstance(sig, TensorRef):
            cell = flat_cell("race", self.rank, self.rank, sig, tuple(args[1]))
            notifiers = self._cur.notifiers.get((sig.buffer.index, cell), set()) - {task}
            self._cur.sync.setdefault(task, set()).update(notifiers)
            if task != ORCH and not self.sched.deferring():  # a blocking wait holds its core, satisfied or not
                waits = self._cur.holding.setdefault((sig.buffer.index, cell), {})
                waits.setdefault((task, self.sched.current_block()), site.id)

    # -- checking --------------------------------------------------------------------------------

    def _check(self, run: _Run, graph: Sequence[frozenset[int]]) -> list[RaceReport]:
        preds = [set(g) | run.sync.get(k, set()) for k, g in enumerate(graph)]
        anc = _drained(_ancestors(preds), self.sched.drains)
        found: dict[tuple[Any, ...], RaceReport] = {}
        for (target, index), accs in run.accesses.items():
            buf = self.buffers[index]
            for i, j in _meeting_pairs(accs):
                a, b = accs[i], accs[j]
                if max(a.task, b.task) >= len(anc) or not _concurrent(a, b, anc):
                    continue
                self._pair(found, buf, target, a, b)
        if not run.holding:
            return list(found.values())
        # the schedules of #2391 are those pypto's edges allow: a handshake this run observed constrains none
        return list(found.values()) + self._saturations(run, _drained(_ancestors([set(g) for g in graph]),
                                                                       self.sched.drains))

    def _saturations(self, run: _Run, anc: list[int]) -> list[RaceReport]:
        """pypto #2391, decided from the graph: blocking waits on a cell that tasks with no order to a
        notifier of that cell (on any rank) can hold on every core the notifier needs, so a schedule that
        starts them first deadlocks the chip. One report per (cell, notifier site)."""
        found: dict[tuple[int, int, int], RaceReport] = {}
        for (index, cell), notifiers in run.signalling.items():
            blocks = run.holding.get((index, cell), {})
            for notifier, nsite in notifiers.items():
                if notifier >= len(anc) or (index, cell, nsite) in found:
                    continue
                held = _unordered_blocks(notifier, blocks, anc)
                if held and not self._fits(notifier, held):
                    found[(index, cell, nsite)] = self._saturation(index, cell, notifier, nsite, held)
        return list(found.values())

    def _fits(self, notifier: int, held: dict[tuple[int, int], int]) -> bool:
        need = self.sched.cores_of(notifier)
        used = [sum(self.sched.cores_of(task)[i] for task, _ in held) for i in (0, 1)]
        return all(need[i] == 0 or used[i] + need[i] <= self.sched.capacity[i] for i in (0, 1))

    def _saturation(self, index: int, cell: int, notifier: int, nsite: int,
                    held: dict[tuple[int, int], int]) -> RaceReport:
        buf = self.buffers[index]
        (wtask, _), wsite = min(held.items())
        waiters = sorted({task for task, _ in held})
        return CoreSaturationReport(
            buf.name, buf.shape, self.rank, cell, cell + 1, 1,
            RaceAccess(self.rank, READ, self._where(wsite), self.run, 0.0),
            RaceAccess(self.rank, WRITE, self._where(nsite), self.run, 0.0), reason=CORE_SATURATION,
            tasks=(self.sched.task_text(wtask), self.sched.task_text(notifier)), blocks=len(held),
            waiters=len(waiters), cores=self.sched.capacity)

    def _where(self, site: int) -> str:
        return self.sites[site].where if 0 <= site < len(self.sites) else f"<site {site}>"

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
        first, second = sorted((a, b), key=lambda x: (x.task, x.block, x.lane))
        found[key] = TaskRaceReport(buf.name, buf.shape, target, hit[0], hit[1], hit[2],
                                    self._side(first), self._side(second), reason=reason,
                                    tasks=(self._task_text(first), self._task_text(second)),
                                    one_task=first.task == second.task,
                                    lanes=(first.task, first.block) == (second.task, second.block))

    def _task_text(self, a: _Access) -> str:
        if a.task == ORCH:
            return "the Orchestration"
        text = self.sched.task_text(a.task)
        text = text + f" block {a.block}" if self.sched.block_count(a.task) > 1 else text
        return text + f" lane {a.lane}" if a.lane >= 0 else text

    def _side(self, a: _Access) -> RaceAccess:
        where = self.sites[a.site].where if 0 <= a.site < len(self.sites) else f"<site {a.site}>"
        return RaceAccess(self.rank, a.kind, where, self.run, 0.0)


@dataclass(frozen=True)
class TaskRaceReport(RaceReport):
    """A race (or an order-dependent sum) between two tasks of one rank with no dependency path between them."""

    tasks: tuple[str, str] = ("", "")
    one_task: bool = False
    """Both sides are blocks of one SPMD task (which run at once, with no order between them)."""
    lanes: bool = False
    """Both sides are AIV lanes of one block (a ``pl.split_aiv`` region), with no barrier between them."""

    def describe(self) -> str:
        a, b = self.first, self.second
        between = ("two AIV lanes of one task" if self.lanes else "two blocks of one task" if self.one_task
                   else "the Orchestration and a task"
                   if self.tasks[0] == "the Orchestration" else "two tasks")
        head = (f"{self.reason or 'race'} on {self.region_text()} of rank {self.target} ({self.overlap} elements) "
                f"between {between} of rank {a.rank} (call {a.call}): ")
        sides = f"{a.kind_name} at {a.location} in {self.tasks[0]} || {b.kind_name} at {b.location} in {self.tasks[1]}"
        if self.reason == ORDER_DEPENDENT:
            return (head + sides + ": floating-point AtomicAdd partials from tasks with no order between them are "
                    "summed in task-completion order, which is not fixed (pypto-lib #953: write disjoint partials "
                    "and reduce them in one task, or order the tasks with deps=)")
        if self.tasks[0] == "the Orchestration":
            return (head + sides + ": an Orchestration's pl.read / pl.write waits only for the tensor's writers the "
                    "TensorMap recorded (pypto's get_tensor_data / set_tensor_data): not for a reader, nor for a "
                    "writer in a manual scope (order the task before it with a tensor edge, or read a tensor it "
                    "writes)")
        if self.lanes:
            return (head + sides + ": the two AIV lanes of a pl.split_aiv region run at once with no order between "
                    "them (pypto #1981): put pypto's cross-lane sequence between the write and the other lane's "
                    "access (pl.system.cacheinvalid(), pl.system.fence(), pl.system.syncall(...), "
                    "pl.system.cacheinvalid()), or keep each lane to its own region")
        if self.one_task:
            return (head + sides + ": the blocks of one spmd task run at once on their cores with no order between "
                    "them (give each block its own region, or split the work into tasks ordered by deps=)")
        return (head + sides + ": no dependency path between the tasks (no tensor edge pypto's runtime derives, "
                "no deps=), so they may run in either order or at once on two cores")


@dataclass(frozen=True)
class CoreSaturationReport(TaskRaceReport):
    """Blocking waits that can hold every core a notifier of their cell needs (pypto #2391)."""

    blocks: int = 0
    waiters: int = 0
    cores: tuple[int, int] = (0, 0)

    def describe(self) -> str:
        a, b = self.first, self.second
        return (f"{CORE_SATURATION} on rank {a.rank} (call {a.call}): {self.blocks} blocks of {self.waiters} tasks "
                f"with no order to the notifier wait on {self.region_text()} holding their cores (first at "
                f"{a.location} in {self.tasks[0]}), while {self.tasks[1]}, which notifies that cell at {b.location}, "
                f"is not before them: a schedule that starts the waits first takes every core it needs (the rank has "
                f"{self.cores[0]} AIC + {self.cores[1]} AIV) and it never runs, so the chip deadlocks (pypto #2391: "
                "submit the notifier first so the waiters take an edge on it, or use pld.system.defer_wait, which "
                "frees its core)")


def _unordered_blocks(notifier: int, blocks: dict[tuple[int, int], int], anc: list[int]) -> dict[tuple[int, int], int]:
    """The waiting blocks that can all hold a core at once before ``notifier`` starts: neither before nor
    after it, and pairwise unordered (a greedy antichain, in submission order)."""
    chosen: dict[tuple[int, int], int] = {}
    for (task, block), site in sorted(blocks.items()):
        if task == notifier or task >= len(anc) or (anc[task] >> notifier) & 1 or (anc[notifier] >> task) & 1:
            continue
        if all(t == task or not ((anc[task] >> t) & 1 or (anc[t] >> task) & 1) for t, _ in chosen):
            chosen[(task, block)] = site
    return chosen


def _meeting_pairs(accs: Sequence[_Access]) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j`` and in that order, of accesses whose spans (first to last cell)
    meet and that are not both reads: every pair that can race, found by a sweep over the spans, so a
    model-scale kernel's thousands of disjoint tile loads and stores are not compared pair by pair."""
    spans = sorted((min(lo for lo, _ in a.ivs), max(hi for _, hi in a.ivs), i) for i, a in enumerate(accs) if a.ivs)
    open_reads: dict[int, int] = {}  # access -> span end, for the spans that still reach the sweep
    open_writes: dict[int, int] = {}
    ends: list[tuple[int, int]] = []  # a heap of (span end, access) to close spans as the sweep passes them
    pairs: list[tuple[int, int]] = []
    for lo, hi, i in spans:
        while ends and ends[0][0] <= lo:
            _, k = heapq.heappop(ends)
            open_reads.pop(k, None)
            open_writes.pop(k, None)
        others = list(open_writes) if accs[i].kind == READ else [*open_reads, *open_writes]
        pairs.extend((min(i, k), max(i, k)) for k in others)
        (open_reads if accs[i].kind == READ else open_writes)[i] = hi
        heapq.heappush(ends, (hi, i))
    pairs.sort()
    return pairs


def _concurrent(a: _Access, b: _Access, anc: list[int]) -> bool:
    """No order between the two accesses: two blocks of one SPMD task (they run at once, pypto orders them
    only with syncall), two AIV lanes of one block that had passed as many cross-lane barriers, or two tasks
    with no path between them."""
    if a.task == b.task:
        if a.block == b.block:
            return a.lane >= 0 and b.lane >= 0 and a.lane != b.lane and a.phase == b.phase
        return True
    if a.task == ORCH or b.task == ORCH:
        o, t = (a, b) if a.task == ORCH else (b, a)
        return o.since <= t.task < o.seen and not any(w == t.task or (anc[w] >> t.task) & 1 for w in o.after if w < len(anc))
    return not ((anc[b.task] >> a.task) & 1 or (anc[a.task] >> b.task) & 1)


def _drained(anc: list[int], drains: Sequence[int]) -> list[int]:
    """Each task's ancestors with the Orchestration's drains added: a task submitted after a drain runs after
    every task submitted before it (``TaskScheduler.drains``: how many tasks there were at each)."""
    out = list(anc)
    ends = [*drains[1:], len(anc)]
    for i, lo in enumerate(drains):
        before = (1 << lo) - 1
        for k in range(lo, ends[i]):
            out[k] |= before
    return out


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


__all__ = ["CORE_SATURATION", "ORDER_DEPENDENT", "CoreSaturationReport", "TaskRaceReport", "TaskRaces"]
