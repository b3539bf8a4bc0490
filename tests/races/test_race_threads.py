"""The replay of logical threads (``race_clocks``: "Logical threads", ``race_threads``) on hand-made
sync logs: a task's acquire orders only its own accesses, its release carries only what happens before
it, the Orchestration's FORK and a task's EDGEs; without MPI."""

from __future__ import annotations

import itertools

import numpy as np

from pldemu.runtime.instrument.race_clocks import ACQ, EDGE, FORK, JOIN, REL, SyncEvent, replay
from pldemu.runtime.instrument.race_threads import TaskThreads

# threads: 0 = rank 0's Orchestration, 1 = rank 1's, 2 and 3 = two tasks of rank 0, 4 = a task of rank 0 after
# the join
RANKS = [0, 1, 0, 0, 0]
PARTS: list[int | None] = [None, None, 0, 0, 1]
INIT = [{0: np.zeros(2, dtype=np.int64)}, {0: np.zeros(2, dtype=np.int64)}]


def rel(t: float, target: int) -> SyncEvent:
    return (REL, t, target, 0, 0, 1, False)


def acq(t: float) -> SyncEvent:
    return (ACQ, t, 0, 0, False, 1)


def segments(logs: list[list[SyncEvent]]) -> list[list[tuple[int, ...]]]:
    return replay(logs, INIT, RANKS, PARTS).segments


def test_an_acquire_orders_only_its_own_task() -> None:
    # rank 1 notifies rank 0; task 2 waits for it; task 3, forked later, acquires nothing
    orch = [(FORK, 2.0), (FORK, 3.0), (EDGE, 9.0, 2, 2), (EDGE, 9.1, 3, 1)]
    logs = [orch, [rel(1.0, 0)], [(EDGE, 4.0, 0, 0), acq(5.0)], [(EDGE, 6.0, 0, 1)], []]
    seg = segments(logs)
    assert seg[2][2][1] == 1  # task 2 after its wait knows rank 1's release
    assert seg[3][1][1] == 0  # task 3 does not, though it ran after task 2's wait
    assert seg[0][4][1] == 1  # the Orchestration after the drain does


def test_a_release_carries_its_own_task_only() -> None:
    # task 2 writes (its records at its own entry 1), task 3 notifies rank 1, which waits
    logs = [[(FORK, 1.0), (FORK, 2.0)], [acq(6.0)], [(EDGE, 3.0, 0, 0)], [(EDGE, 4.0, 0, 1), rel(5.0, 1)], []]
    seg = segments(logs)
    assert seg[1][1][3] == 1 and seg[1][1][2] == 0  # rank 1 knows task 3's release, not task 2
    assert seg[3][1][0] == 2 and seg[0][2][0] == 3  # the task knows the Orchestration before its own FORK only


def test_a_dependency_carries_the_producer_to_the_peer() -> None:
    # task 3 starts from task 2's completion (deps): its notify carries task 2's records
    logs = [[(FORK, 1.0), (FORK, 2.0)], [acq(6.0)], [(EDGE, 3.0, 0, 0)], [(EDGE, 4.0, 0, 1), (EDGE, 4.1, 2, 1),
                                                                            rel(5.0, 1)], []]
    assert segments(logs)[1][1][2] == 1


def test_a_task_after_a_join_starts_past_what_the_join_told() -> None:
    logs = [[(FORK, 1.0), (EDGE, 3.0, 2, 1), (JOIN, 4.0), (FORK, 5.0)], [(JOIN, 4.0)], [(EDGE, 2.0, 0, 0)], [],
            [(EDGE, 6.0, 0, 4)]]
    seg = segments(logs)
    assert seg[1][1][2] >= 1  # the join tells every rank task 2's records
    assert seg[4][1][4] > seg[1][1][4]  # task 4's own entry is past what the join told of it
    assert seg[4][1][1] == 1  # and it knows what rank 1 did before the join


class _Task:
    """A scheduler's task as the observer sees it (hashable by identity, its producers by index)."""

    def __init__(self, producers: set[int], blocks: int = 1) -> None:
        self.producers = producers
        self.blocks = blocks


def test_a_drain_after_a_long_chain_of_silent_tasks_needs_no_recursion() -> None:
    """A model layer's chain of thousands of tasks whose blocks log nothing: their start edges (each one's
    producer's completion) are computed without recursing down the chain (it passed Python's limit)."""
    import itertools
    from types import SimpleNamespace

    from pldemu.runtime.instrument.race_threads import TaskThreads

    sched = SimpleNamespace(tasks=[])
    ticks = itertools.count()
    threads = TaskThreads(sched, lambda: float(next(ticks)), lambda: 1)
    for i in range(5000):
        sched.tasks.append(_Task({i - 1} if i else set()))
        threads.forked(sched.tasks[-1])
    threads.awaited([sched.tasks[-1]])  # the chain joins nothing but the Orchestration's own forks
    assert len(threads.main.sync) == 5000 and all(ev[0] == FORK for ev in threads.main.sync)


class _Sched:
    """A scheduler as ``TaskThreads`` asks it: its tasks and which one runs now (block 0)."""

    def __init__(self) -> None:
        self.tasks: list[_Task] = []
        self.running: int | None = None
        self.block = 0

    def current_key(self) -> int | None:
        return self.running

    def current_block(self) -> int:
        return self.block


def _threads() -> tuple[_Sched, TaskThreads]:
    sched = _Sched()
    ticks = itertools.count(1)
    return sched, TaskThreads(sched, lambda: float(next(ticks)), lambda: 1)


def _run(sched: _Sched, threads: TaskThreads, key: int) -> int:
    """Task ``key`` runs an event: the index of the thread it logs on."""
    sched.running = key
    log = threads.current()
    sched.running = None
    return next(i for i, th in enumerate(threads.threads) if th is log)


def test_a_chain_of_tasks_is_one_thread() -> None:
    """Each link of a chain of 2000 tasks logs on its producer's thread: one task thread and a few sync
    events per link, not a thread (a clock entry in every clock of the replay, a pair of record lists
    per peer thread in the race check) per task."""
    sched, threads = _threads()
    for i in range(2000):
        sched.tasks.append(_Task({i - 1} if i else set()))
        threads.forked(sched.tasks[-1])
        _run(sched, threads, i)
    threads.awaited([sched.tasks[-1]])
    assert len(threads.threads) == 2
    assert sum(len(th.sync) for th in threads.threads) <= 4 * 2000


def test_a_continued_thread_tells_a_peer_only_the_producer() -> None:
    """Tasks B and C both depend on A; B continues A's thread, C starts a thread of its own from A's
    completion and notifies rank 1: rank 1 then knows A's events, not B's (the FORK between them)."""
    sched, threads = _threads()
    for producers in (set(), {0}, {0}):
        sched.tasks.append(_Task(producers))
        threads.forked(sched.tasks[-1])
    a = _run(sched, threads, 0)
    b = _run(sched, threads, 1)
    c = _run(sched, threads, 2)
    assert a == b != c
    a_end = threads._tasks[sched.tasks[0]].end
    assert a_end is not None and a_end[a] < len(threads.threads[a].sync)  # B's FORK and edges come after
    threads.threads[c].sync.append(rel(1000.0, 1))
    logs = [th.sync for th in threads.threads] + [[acq(2000.0)]]
    ranks = [0] * len(threads.threads) + [1]
    parts: list[int | None] = [None] + [0] * (len(threads.threads) - 1) + [None]
    seg = replay(logs, INIT, ranks, parts).segments
    peer = seg[-1][1]
    assert peer[a] == seg[a][a_end[a]][a]  # A's completion is known to rank 1
    assert seg[b][-1][b] > peer[b]  # B's records (after its FORK) are not


def test_the_blocks_of_a_task_join_its_start_edges_through_one_hub() -> None:
    """An spmd(4) task after an spmd(2) producer: each of its blocks started with every producer block's edge
    (a model layer's spmd(256) after an spmd(1024) stored 256 x 1024 clocks at the checkpoint); one thread
    of no code joins them once and each block starts from it (two of them continue a producer block's
    thread). Replayed: the two on fresh threads know both producer blocks' events, not each other's."""
    sched, threads = _threads()
    for producers, blocks in ((set(), 2), ({0}, 4)):
        sched.tasks.append(_Task(producers, blocks))
        threads.forked(sched.tasks[-1])
    producer = []
    for b in range(2):
        sched.block = b
        producer.append(_run(sched, threads, 0))
        threads.threads[producer[-1]].sync.append(rel(100.0 + b, 1))  # each producer block did something
    consumer = []
    for b in range(4):
        sched.block = b
        consumer.append(_run(sched, threads, 1))
    hub = threads._tasks[sched.tasks[1]].hub
    assert hub is not None and hub not in consumer
    assert sum(ev[0] == EDGE for ev in threads.threads[hub].sync) == 3  # the Orchestration and 2 blocks, once
    fresh = [t for t in consumer if t not in producer]
    assert len(fresh) == 2
    assert all([ev[0] for ev in threads.threads[t].sync] == [EDGE] for t in fresh)  # one edge: the hub
    logs = [th.sync for th in threads.threads]
    n = len(logs)
    seg = replay(logs, INIT, [0] * n, [None] + [0] * (n - 1)).segments
    for t in fresh:
        assert all(seg[t][-1][p] >= 1 for p in producer)  # knows each producer block's events
        assert all(seg[t][-1][o] == 0 for o in fresh if o != t)  # not its sibling's
