"""One rank's tasks run concurrently: logical threads on a bounded pool of cores (issue 40, stage 3).

An Orchestration that submits tasks (``ir.Task``) is compiled so that each task statement *submits* its
body instead of running it (``pldemu.runtime.compiler``): the body is a nested generated function, its
captured variables bound at submission (what pypto passes a task is its arguments' values then).
:class:`TaskScheduler` takes it from there:

* **Edges** are pypto's (``pldemu.runtime.taskdeps``): the submission's static tags (body direction,
  call-site promotion), keyed by the buffer each argument names at run time, through this run's
  ``TensorMap``, plus the explicit ``deps``. A task is *ready* once every producer has completed.
* **Cores**: ``RuntimeOptions.cores`` clusters (the platform's count; a cluster is 1 AIC + 2 AIV). Each
  block of a task holds one core of its shape (AIV, AIC, or a whole cluster for a MIX task) from its
  start to its end; a dummy task takes none and completes once ready.
* **Logical threads**: the Orchestration (the rank's own thread) and every started block (a worker
  thread from a pool). Exactly one runs at a time: a baton passes between them at the scheduling
  points (a submission, a block's end, a wait that would block, a drain), so the detector, the
  windows and the rank's state see one thread of execution, as before. A block runs until it ends or
  blocks; it is never preempted elsewhere.
* **A blocked ``wait``** inside a block parks it *on its core* (``Machine.park``): waits that take every
  core before their notifier starts deadlock, as on the device (pypto #2391). **``defer_wait``**
  registers its condition and the block goes on; when the block ends its core is free, and the task
  completes (its dependents become ready) once every registered condition holds; the wait then runs
  (satisfied at its first poll) so the detectors see its acquire where the task completes.
* **The orchestrator waits** (a drain) before a statement of its own that touches tensors, before a
  ``return`` and at its end: the dispatch completes when every task has.
* **The choice** at each point, among the runnable logical threads (the Orchestration, a parked block
  whose condition now holds, a ready block with a free core): ``random`` (the default; drawn from
  ``(seed, rank, call number)``, so a seed replays it and repeated calls explore different orders) or
  ``fifo`` (satisfied waits first, then the Orchestration until it blocks, then ready blocks in
  submission order: the fast orchestrator of simpler's default). ``program`` runs one block at a time in
  submission order, each to its end, and the Orchestration only once every task it submitted has
  completed: each task runs to completion at its submission, and the graph is the same as in any other
  order, so the checks decided from it (``instrument.race_tasks``, ``instrument.race_threads``) report the
  same. Without those checks the compiler runs program order itself, with no scheduler and no graph
  (``taskplan.graph_needed``).

When nothing can run and no condition holds for ``RuntimeOptions.timeout`` seconds, the run is a
deadlock: the wait-for report names the tasks holding the cores, what each waits for, the tasks ready
without a core, and the not yet run tasks that notify the awaited signal (the ones that would have
notified).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from pldemu import windows
from pldemu.ir import Op, WaitCmp
from pldemu.ir import nodes as ir
from pldemu.ir.walk import walk_calls
from pldemu.runtime.errors import DeadlockError, ProgramError
from pldemu.runtime.machine import Machine
from pldemu.runtime.options import DEFAULT_CLUSTERS
from pldemu.runtime.sites import CallSite
from pldemu.runtime.taskdeps import Tag, TaskArgs, TensorMap
from pldemu.runtime.taskready import ReadySet
from pldemu.runtime.values import Buffer, TensorRef, flat_cell

POLL_SLICE = 0.002
"""Seconds one blocked wait is slept on before the scheduler polls the others again."""

WORKER_NAME = "pldemu-task"
"""The name of a scheduler's worker threads (``threading.enumerate()`` shows them)."""

JOIN_TIMEOUT = 5.0
"""Seconds :meth:`TaskScheduler.close` waits for each worker thread to end."""


class Shape(enum.Enum):
    """The cores a block of a task holds: (AIC, AIV)."""

    AIV = (0, 1)
    AIC = (1, 0)
    MIX = (1, 2)
    NONE = (0, 0)


READY_SHAPES = (Shape.AIV, Shape.AIC, Shape.MIX)
"""The shapes a ready block can need: the ready set's groups, in the order ``random`` lays them end to end."""

_GROUP = {shape: i for i, shape in enumerate(READY_SHAPES)}
_CAP = (max(s.value[0] for s in READY_SHAPES), max(s.value[1] for s in READY_SHAPES))
_FITTING = tuple(tuple(tuple(g for g, s in enumerate(READY_SHAPES) if aic >= s.value[0] and aiv >= s.value[1])
                       for aiv in range(_CAP[1] + 1)) for aic in range(_CAP[0] + 1))
"""The groups with a free core, by (free AIC, free AIV) capped at the largest need: one lookup per choice."""

CUBE_OPS: frozenset[Op] = frozenset(op for op in Op if "matmul" in op.value or "gemv" in op.value)
"""Ops that run on the cube (an AIC); every other tile op runs on a vector core."""


def task_shape(task: ir.Task) -> Shape:
    """The core shape of ``task``'s blocks: cube ops alone an AIC, cube and vector a MIX cluster, else an AIV."""
    if task.kind is ir.TaskKind.DUMMY:
        return Shape.NONE
    ops = {c.op for c in walk_calls(task.body.stmts)}
    cube = bool(ops & CUBE_OPS)
    vector = any(op.value.startswith("tile.") and op not in CUBE_OPS for op in ops)
    return Shape.MIX if cube and vector else Shape.AIC if cube else Shape.AIV


@dataclass(frozen=True)
class TaskInfo:
    """What the compiler knows of one task statement: its text and line, shape, static tags (by the
    argument names ``submit`` gets the values of) and scope mode."""

    where: str
    kind: ir.TaskKind
    shape: Shape
    names: tuple[str, ...]
    tags: tuple[Tag, ...]
    manual: bool
    signals: frozenset[str] = frozenset()
    """The signal names the body notifies (for the report's would-have-notified tasks)."""

    @functools.cached_property
    def group(self) -> int:
        """The ready set's group of the task's blocks: its shape's index in ``READY_SHAPES`` (once per statement)."""
        return _GROUP.get(self.shape, 0)


@dataclass(frozen=True)
class Condition:
    """One wait condition: a cell of this rank's signal window reaching (Ge) or equalling (Eq) a value."""

    site: CallSite
    buffer: Buffer
    window: windows.Window
    cell: int
    expected: int
    cmp: WaitCmp

    def holds(self) -> bool:
        return bool(self.window.test(self.cell, self.expected, self.cmp))


@dataclass(eq=False)
class _Task:
    key: int
    info: TaskInfo
    body: Callable[..., Any]
    blocks: int
    producers: frozenset[int] = frozenset()
    waiting_on: int = 0
    consumers: list[_Task] = field(default_factory=list)
    started: int = 0
    running: int = 0
    deferred: list[tuple[Condition, Callable[[], Any]]] = field(default_factory=list)
    done: bool = False

    def text(self) -> str:
        return f"task {self.key} {self.info.where}"


class TaskObserver(Protocol):
    """Told of the Orchestration's side of the graph (the race detector's logical threads,
    ``instrument.race_threads``): a submission, and the tasks it then waited for."""

    def forked(self, task: Any) -> None: ...

    def awaited(self, tasks: Sequence[Any]) -> None: ...


class _Aborted(BaseException):
    """Unwinds a logical thread of a run that failed elsewhere."""


@dataclass(eq=False)
class _Thread:
    """A logical thread: the Orchestration (``task`` None) or one block of a task."""

    task: _Task | None
    block: int = 0
    go: threading.Event = field(default_factory=threading.Event)
    parked: Condition | None = None
    worker: _Worker | None = None
    aborted: bool = False


class _Worker:
    """A pooled OS thread that runs one block at a time, when the baton gives it one, until its scheduler
    closes (the thread holds the scheduler, and through it the machine and the last call's tasks)."""

    def __init__(self, sched: TaskScheduler) -> None:
        self.sched = sched
        self.thread: _Thread | None = None
        self.go = threading.Event()
        self.os_thread = threading.Thread(target=self._loop, daemon=True, name=WORKER_NAME)
        self.os_thread.start()

    def _loop(self) -> None:
        while not self.sched.closed:
            self.go.wait()
            self.go.clear()
            if self.sched.closed:
                return
            t = self.thread
            assert t is not None
            self.sched.run_block(t)


class TaskScheduler:
    """This rank's task scheduler (one per machine, reset per call, its worker threads reused by every call
    until :meth:`close`); see the module docstring."""

    def __init__(self, m: Machine) -> None:
        self.m = m
        self.order = m.options.task_order
        clusters = m.options.cores if m.options.cores is not None else DEFAULT_CLUSTERS
        self.capacity = (clusters, 2 * clusters)
        self._idle: list[_Worker] = []
        self._workers: list[_Worker] = []
        """Every worker thread made (idle or not): :meth:`close` ends them all."""
        self.closed = False
        self._orch = _Thread(None)
        self.observer: TaskObserver | None = None
        self._reset()
        m.park = self.park

    def close(self) -> None:
        """End every worker thread (the program instance is done with this scheduler; idempotent). Blocks a
        failed call left parked unwind first; each thread is joined, so none outlives its instance holding
        the scheduler, its machine and the last call's tasks (a prepared worker reloads a program of other
        buffers on a new instance at every such dispatch)."""
        self.closed = True
        self._abort_all()
        for w in self._workers:
            w.go.set()
        for w in self._workers:
            w.os_thread.join(JOIN_TIMEOUT)
        self._workers = []
        self._idle = []

    # -- per call state ----------------------------------------------------------------------------

    def _reset(self) -> None:
        self.active = False
        self.tmap = TensorMap()
        self.tasks: list[_Task] = []
        self.drains: list[int] = []
        """How many tasks had been submitted at each drain of this call (all of them complete there)."""
        self.free = list(self.capacity)
        self.ready: ReadySet[_Task] = ReadySet(self.order != "random", len(READY_SHAPES))
        self.parked: list[_Thread] = []
        self.deferred: list[_Task] = []
        self.outstanding = 0
        self.current: _Thread = self._orch
        self.orch_runnable = True
        self.draining = False
        self.failure: BaseException | None = None
        self.completing: _Task | None = None
        self.awaiting: tuple[_Task, ...] = ()
        self.orch_after: set[int] = set()
        """The tasks this call's Orchestration has waited for by ``await_writers`` (it runs after them)."""
        run = self.m.status.run if self.m.status is not None else 0
        self.run = run
        self.rng = random.Random(f"{self.m.options.seed}:{self.m.rank}:{run}")

    def _begin(self) -> None:
        run = self.m.status.run if self.m.status is not None else 0
        if self.active and run == self.run:
            return
        # After a drain the call goes on with its keys: a TaskId the Orchestration kept across the drain (a
        # later deps=) names its own task, complete, not the task that would reuse its key.
        kept = (self.tasks, self.drains) if run == self.run else ([], [])
        self._abort_all()  # a call that failed in its Orchestration left blocks parked: unwind them
        self._reset()
        self.tasks, self.drains = kept
        self.active = True

    def inline(self) -> int:
        """A task run inline at its submission, after a drain (its body assigns a scalar the Orchestration reads
        later): its id names a task already complete."""
        self._begin()
        self.drain()
        self.active = True
        t = _Task(len(self.tasks), TaskInfo("(inline)", ir.TaskKind.KERNEL, Shape.NONE, (), (), False), _noop, 1, done=True)
        self.tasks.append(t)
        return t.key

    # -- what the detectors ask ---------------------------------------------------------------------

    def current_key(self) -> int | None:
        """The task whose code runs now (a deferred wait: its task's), None in the Orchestration."""
        if self.completing is not None:
            return self.completing.key
        task = self.current.task
        return task.key if task is not None else None

    def current_block(self) -> int:
        """The block index of the code running now (0 in the Orchestration, a one-block task or a deferred wait)."""
        return self.current.block if self.completing is None and self.current.task is not None else 0

    def block_count(self, key: int) -> int:
        """How many blocks task ``key`` has (1 for a task of one block, n for ``spmd(n)``)."""
        return self.tasks[key].blocks if 0 <= key < len(self.tasks) else 1

    def cores_of(self, key: int) -> tuple[int, int]:
        """The (AIC, AIV) cores one block of task ``key`` holds while it runs."""
        return self.tasks[key].info.shape.value if 0 <= key < len(self.tasks) else (0, 0)

    def deferring(self) -> bool:
        """True while a deferred task's wait runs at its completion (it holds no core)."""
        return self.completing is not None

    def graph(self) -> list[frozenset[int]]:
        """The producers of each task of this call (by key), as pypto's runtime derived them."""
        return [t.producers for t in self.tasks]

    def task_text(self, key: int) -> str:
        return self.tasks[key].text() if 0 <= key < len(self.tasks) else f"task {key}"

    # -- the orchestrator's side -------------------------------------------------------------------

    def submit(self, info: TaskInfo, values: tuple[Any, ...], deps: tuple[Any, ...], blocks: Any,
               body: Callable[..., Any]) -> int:
        """Submit a task (the compiled task statement); its key is its task id."""
        self._begin()
        nblocks = int(blocks)
        if nblocks < 1:
            raise ProgramError(f"{info.where}: an spmd task needs at least one block, got {nblocks}")
        t = _Task(len(self.tasks), info, body, nblocks)
        self.tasks.append(t)
        if self.observer is not None:
            self.observer.forked(t)
        self.outstanding += 1
        tags = {_key(name, value): tag for name, value, tag in zip(info.names, values, info.tags, strict=True)}
        producers = self.tmap.submit(TaskArgs(t.key, tags, info.manual, tuple(int(d) for d in deps)))
        t.producers = producers
        for p in producers:
            if 0 <= p < len(self.tasks) and not self.tasks[p].done:
                self.tasks[p].consumers.append(t)
                t.waiting_on += 1
        if t.waiting_on == 0:
            self._make_ready(t)
        self._switch(self._orch, runnable=True)
        return t.key

    def await_writers(self, values: tuple[Any, ...]) -> None:
        """pypto's ``get_tensor_data`` / ``set_tensor_data`` (an Orchestration's ``pl.read`` / ``pl.write``):
        wait until the writers the TensorMap recorded for each tensor's buffer have completed, not for every
        outstanding task. A writer in a manual scope is not recorded, and readers never are (pypto's runtime
        does not see them): the task race check reports what that leaves unordered."""
        if not self.active:
            return
        keys = {_key("", v) for v in values if isinstance(v, TensorRef)}
        needed = tuple(self.tasks[k] for key in keys for k in self.tmap.writers.get(key, ()))
        self.orch_after.update(t.key for t in needed)
        if any(not t.done for t in needed):
            self.awaiting = needed
            self._switch(self._orch, runnable=True)
            self.awaiting = ()
        if self.observer is not None:
            self.observer.awaited(needed)

    def orch_concurrent(self) -> bool:
        """Whether this call has submitted tasks the Orchestration has not drained: its access may be concurrent
        with one of them in some order (whether it already ended in this one or not)."""
        return self.active

    def drain(self) -> None:
        """The Orchestration waits until every submitted task has completed (then the call's state resets; its
        task keys go on)."""
        if not self.active:
            return
        if self.outstanding:
            self.draining = True
            self._switch(self._orch, runnable=True)
            self.draining = False
        since = self.drains[-1] if self.drains else 0
        if self.observer is not None:
            self.observer.awaited(self.tasks[since:])
        self.drains.append(len(self.tasks))
        self.active = False

    # -- the blocks' side --------------------------------------------------------------------------

    def run_block(self, t: _Thread) -> None:
        """Run one block (in its worker thread, holding the baton), then give the baton on."""
        task = t.task
        assert task is not None
        try:
            with np.errstate(all="ignore"):
                task.body(t.block)
        except _Aborted:
            self._idle.append(t.worker)  # type: ignore[arg-type]
            return
        except BaseException as err:  # the Orchestration raises it, located at the body's line
            self._idle.append(t.worker)  # type: ignore[arg-type]
            self._fail(err)
            return
        self._block_ended(t)

    def park(self, site: CallSite, buf: Buffer, w: windows.Window, cell: int, expected: int) -> None:
        """``Machine.park``: a wait that did not hold at its first poll. The Orchestration's own wait blocks as
        always; a block's stays on its core until its condition holds and the scheduler resumes it."""
        t = self.current
        if t.task is None or not self.active:
            return
        t.parked = Condition(site, buf, w, cell, expected, site.attrs["cmp"])
        self.parked.append(t)
        self._switch(t, runnable=False)

    def defer(self, site: CallSite, values: tuple[Any, ...], run: Callable[[tuple[Any, ...]], Any]) -> None:
        """``pld.system.defer_wait`` in a block: register the condition on the block's task."""
        t = self.current
        sig: TensorRef = values[0]
        w = sig.buffer.window
        if t.task is None or w is None:
            run(values)  # not in a task (or not a window: the wait refuses it): the wait itself
            return
        cell = flat_cell("defer_wait", self.m.rank, self.m.rank, sig, values[1])
        cond = Condition(site, sig.buffer, w, cell, int(values[2]), site.attrs["cmp"])
        t.task.deferred.append((cond, lambda: run(values)))

    # -- transitions -------------------------------------------------------------------------------

    def _make_ready(self, t: _Task) -> None:
        if t.info.shape is Shape.NONE:
            self._complete(t)
        else:
            self.ready.add(t, t.info.group)

    def _block_ended(self, th: _Thread) -> None:
        task = th.task
        assert task is not None
        task.running -= 1
        self._release(task.info.shape)
        assert th.worker is not None
        self._idle.append(th.worker)  # before the baton moves on: the next block may take it
        if task.running == 0 and task.started == task.blocks:
            # Its body bound the task's arguments (the values at submission): dropping it lets a tensor.create
            # buffer only this task still reached be released (Machine.buffers), as simpler frees it.
            task.body = _noop
            if task.deferred:
                self.deferred.append(task)
            else:
                self._complete(task)
        self._switch(th, runnable=False, ended=True)

    def _complete(self, t: _Task) -> None:
        t.done = True
        self.outstanding -= 1
        for c in t.consumers:
            c.waiting_on -= 1
            if c.waiting_on == 0:
                self._make_ready(c)

    def _release(self, shape: Shape) -> None:
        self.free[0] += shape.value[0]
        self.free[1] += shape.value[1]

    def _fits(self, shape: Shape) -> bool:
        return self.free[0] >= shape.value[0] and self.free[1] >= shape.value[1]

    # -- choosing ----------------------------------------------------------------------------------

    def _settle_deferred(self) -> bool:
        """Complete the deferred tasks whose conditions all hold (their waits run now, satisfied)."""
        progressed = False
        for t in list(self.deferred):
            while t.deferred and t.deferred[0][0].holds():
                _, run = t.deferred.pop(0)
                self.completing = t  # the wait is the deferred task's (the detectors attribute it so)
                try:
                    run()
                finally:
                    self.completing = None
                progressed = True
            if not t.deferred:
                self.deferred.remove(t)
                self._complete(t)
        return progressed

    def _runnable(self) -> list[tuple[str, Any]]:
        """The parked blocks whose condition holds (at most one per core), then the Orchestration if it can go on."""
        out: list[tuple[str, Any]] = [("resume", th) for th in self.parked if th.parked is not None
                                      and th.parked.holds()]
        if self.orch_runnable and (not self.draining or self.outstanding == 0) and all(t.done for t in self.awaiting):
            out.append(("orch", None))
        return out

    def _choose(self) -> tuple[str, Any] | None:
        """The next logical thread by the task order's policy, None if none can run."""
        return self._POLICIES[self.order](self)

    def _fitting(self) -> tuple[int, ...]:
        """The ready set's groups with a free core (indexed by shape: the cost does not grow with the ready)."""
        return _FITTING[min(self.free[0], _CAP[0])][min(self.free[1], _CAP[1])]

    def _choose_random(self) -> tuple[str, Any] | None:
        """``random``: one uniform draw over the runnable threads and the ready blocks that fit."""
        cands = self._runnable()
        fitting = self._fitting()
        n = len(cands) + self.ready.count(fitting)
        if n == 0:
            return None
        i = self.rng.randrange(n)
        return cands[i] if i < len(cands) else ("start", self.ready.nth(fitting, i - len(cands)))

    def _choose_fifo(self) -> tuple[str, Any] | None:
        """``fifo``: satisfied waits, then the Orchestration, then the first ready block that fits."""
        cands = self._runnable()
        if cands:
            return cands[0]
        first = self.ready.first(self._fitting())
        return None if first is None else ("start", first)

    def _choose_program(self) -> tuple[str, Any] | None:
        """``program``: one block at a time, in submission order, each to its end (a parked one resumes once its
        condition holds, before anything else starts); the Orchestration once every task it submitted has
        completed. So each task runs to completion at its submission, as without a scheduler, and every
        earlier task is complete when a task is submitted (its producers too: it is ready at once)."""
        if self.parked:
            th = self.parked[0]
            return ("resume", th) if th.parked is not None and th.parked.holds() else None
        first = self.ready.first(self._fitting())
        if first is not None:
            return ("start", first)
        if self.outstanding or not self.orch_runnable:
            return None
        return ("orch", None)

    _POLICIES: ClassVar[Mapping[str, Callable[[TaskScheduler], tuple[str, Any] | None]]] = {
        "random": _choose_random, "fifo": _choose_fifo, "program": _choose_program}
    """The choice of each task order (``RuntimeOptions.task_order``)."""

    def _switch(self, me: _Thread, runnable: bool, ended: bool = False) -> None:
        """Give the baton to the next logical thread (perhaps ``me``) and, unless ``me`` ended, wait until
        it comes back."""
        if me is self._orch:
            self.orch_runnable = runnable
        nxt = self._next()
        if nxt is not me:
            self.current = nxt
            nxt.go.set()
            if ended:
                return
            me.go.wait()
            me.go.clear()
        if me.aborted:
            raise _Aborted
        if me is self._orch and self.failure is not None:
            err, self.failure = self.failure, None
            self._abort_all()
            self._reset()
            raise err

    def _next(self) -> _Thread:
        """The logical thread to run next, polling blocked conditions until one can run (or the timeout)."""
        deadline = time.monotonic() + self.m.timeout
        published = False
        while True:
            self._settle_deferred()
            choice = self._choose()
            if choice is not None:
                if published and self.m.status is not None:
                    self.m.status.wait_ended()
                return self._take(choice)
            if not published:
                published = self._publish()
            if time.monotonic() > deadline:
                return self._deadlock()
            self._sleep()

    def _take(self, choice: tuple[str, Any]) -> _Thread:
        what, obj = choice
        if what == "orch":
            self.orch_runnable = False
            return self._orch
        if what == "resume":
            self.parked.remove(obj)
            obj.parked = None
            return obj
        task: _Task = obj
        th = _Thread(task, task.started)
        task.started += 1
        task.running += 1
        self.free[0] -= task.info.shape.value[0]
        self.free[1] -= task.info.shape.value[1]
        if task.started == task.blocks:
            self.ready.remove(task, task.info.group)
        worker = self._idle.pop() if self._idle else self._new_worker()
        worker.thread = th
        th.go, th.worker = worker.go, worker
        return th

    def _new_worker(self) -> _Worker:
        worker = _Worker(self)
        self._workers.append(worker)
        return worker

    def _blocked(self) -> list[Condition]:
        conds = [th.parked for th in self.parked if th.parked is not None]
        return conds + [t.deferred[0][0] for t in self.deferred if t.deferred]

    def _publish(self) -> bool:
        """Publish the first blocked condition on the status board (peers' wait-for reports read it)."""
        conds = self._blocked()
        if not conds or self.m.status is None:
            return False
        c = conds[0]
        self.m.status.wait_started(c.site.id, c.buffer.index, c.cell, c.expected, c.site.attrs["cmp_code"])
        return True

    def _sleep(self) -> None:
        conds = self._blocked()
        if not conds:
            time.sleep(POLL_SLICE)
            return
        c = conds[0]
        with contextlib.suppress(windows.WaitTimeout):  # a kernel sleep on one cell, ended by its notify
            c.window.wait(c.cell, c.expected, c.cmp, timeout=POLL_SLICE, policy=self.m.wait_policy)

    # -- failures ----------------------------------------------------------------------------------

    def _fail(self, err: BaseException) -> None:
        """A block raised: the Orchestration re-raises it; every other logical thread unwinds."""
        if self.failure is None:
            self.failure = err
        self.current = self._orch
        self._orch.go.set()

    def _abort_all(self) -> None:
        """Unwind every parked or started block of this call (their threads return to the pool or exit)."""
        for th in self.parked:
            th.aborted = True
            th.go.set()
        self.parked = []

    def _deadlock(self) -> _Thread:
        """Nothing ran and no condition held for the timeout: raise the wait-for report in the Orchestration."""
        conds = self._blocked()
        err = self._deadlock_error(conds)
        self._fail(err)
        return self._orch

    def _deadlock_error(self, conds: Sequence[Condition]) -> BaseException:
        lines = self.report_lines()
        if not conds:
            return ProgramError("deadlock: no task can run and none waits: " + "; ".join(lines))
        c = conds[0]
        timeout = windows.WaitTimeout(window=c.buffer.name, rank=self.m.rank, cell=c.cell, expected=c.expected,
                                      cmp=c.cmp, observed=_observed(c), waited=self.m.timeout, polls=0)
        base = self.m.deadlock(c.site, c.buffer, timeout)
        report = "\n".join([base.report, f"rank {self.m.rank}'s tasks:", *(f"  {s}" for s in lines)])
        return DeadlockError(base.message, rank=base.rank, location=base.location, report=report,
                             primary=base.primary, causes=base.causes)

    def report_lines(self) -> list[str]:
        """What the wait-for report says about this rank's tasks: cores, waits, ready tasks, notifiers."""
        aic, aiv = self.capacity
        held = [th for th in self.parked if th.task is not None]
        out = [f"cores: {aic} AIC + {aiv} AIV, free {self.free[0]} AIC + {self.free[1]} AIV; "
               f"{len(held)} held by blocks blocked in a wait"]
        for th in held:
            assert th.task is not None and th.parked is not None
            out.append(f"holds a core, blocked in wait {_cond_text(th.parked)} at {th.parked.site.where}: "
                       f"{th.task.text()} block {th.block}")
        for t in self.deferred:
            out.append(f"deferred (no core), completes when {_cond_text(t.deferred[0][0])}: {t.text()}")
        ready = list(self.ready)
        for t in ready:
            out.append(f"ready, no free {t.info.shape.name} core: {t.text()}")
        if held and ready and not any(self.free[i] for i in (0, 1) if ready[0].info.shape.value[i]):
            out.append(f"waits took every core {ready[0].text()} needs (pypto #2391)")
        awaited = {c.buffer.name for c in self._blocked()}
        for t in self.tasks:
            if t.started == 0 and t.info.signals & awaited:
                names = ", ".join(sorted(t.info.signals & awaited))
                out.append(f"would have notified {names} (not started): {t.text()}")
        if not self.orch_runnable and not self.draining:
            out.append("the Orchestration is blocked")
        if self.order == "program" and (held or self.deferred):
            out.append("task order program: the Orchestration submits its next task only once this one has completed, "
                       "so a wait for a later task of this rank cannot hold (--task-order random or fifo runs them at "
                       "once)")
        return out


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _key(name: str, value: Any) -> str:
    """The TensorMap key of an argument: the buffer its value views (every view of one buffer overlaps)."""
    if isinstance(value, TensorRef):
        return f"#{value.buffer.index}"
    return name


def _observed(c: Condition) -> int:
    try:
        return int(c.window.local[c.cell]) if c.window.local is not None else 0
    except Exception:  # best effort: the report names the expectation either way
        return 0


def _cond_text(c: Condition) -> str:
    rel = "==" if c.cmp is WaitCmp.Eq else ">="
    return f"{c.buffer.name} cell {c.cell} {rel} {c.expected}"


__all__ = ["CUBE_OPS", "Condition", "Shape",
           "TaskInfo", "TaskObserver", "TaskScheduler", "task_shape"]
