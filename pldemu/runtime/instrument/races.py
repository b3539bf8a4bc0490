"""Happens-before race detection on RMA windows (``RuntimeOptions(race_detect=True)``).

Why: a sequentially consistent emulator hides most reuse bugs, because the bytes usually happen to
arrive in time. A race detector does not wait for wrong data: it flags two accesses to the same
window elements that nothing orders, whichever won this time.

**Clocks.** Every rank has a vector clock (one entry per rank). Signals are the only
synchronisation the programs have, so they carry the clocks; what each one orders is resolved at the
checkpoint, from every rank's log of its sync events (``pldemu.runtime.instrument.race_clocks``, which
describes the rule exactly):

* ``notify`` is a *release* (logged before its atomic is issued); ``tensor.write`` of a signal cell
  (a local atomic Set) is a release into this rank's own cell.
* a satisfied ``wait`` is an *acquire* of exactly what every allowed order needs for the cell to
  reach (Ge) or equal (Eq) ``expected``: for one writer, the release that brought its contribution to
  the needed amount, however many releases ago; for several writers on one counter, a writer's
  release only if the others cannot reach the threshold without it. A fast peer's next-call credit,
  already in the counter, does not order what the peer did after this call's credit, and a slow
  peer's credit not yet issued counts as one that could have come first.
* ``tensor.read`` of a signal cell is an acquire too, of the value it read (Eq). Decision: programs
  branch on such reads (or use them to retire what peers published, as all_to_all_v does with
  recv_counts), and a program that reads a count a peer published with release semantics is
  entitled to the data published before it; treating the read as relaxed would report races the
  hardware's acquire fence prevents. A speculative read may thus order more than the program relies
  on: that can hide a race, never invent one.
* ``join`` (all ranks, e.g. an MPI barrier of the harness, and every ``check``) sets every VC to the
  element-wise maximum: whatever happened before the join happens before whatever follows it.

**Tasks** (``race_threads``): on a rank that runs tasks concurrently each task block and the
Orchestration is a logical thread with its own sync log, records and clock entry (:meth:`RaceDetector.
attach_tasks`); rank 0 replays the threads as ranks whose cells are their rank's and leaves two threads
of one rank to ``race_tasks``. A rank without tasks (or in fenced mode) keeps one thread: as above.

Memory: the sync log and the records of one epoch (from one checkpoint to the next); the checkpoint
drops both, since everything before it happens before everything after. No per-cell history has a
fixed size, so no acquire falls back to a coarse clock because a producer ran ahead.

**Same origin.** A rank's put into a peer's window and its own later get / remote_load of the same
elements, with no release by that rank between them (its own clock entry unchanged), are a race:
puts from one rank to one target land in order and a notify flushes them, but nothing completes a
put before a later read (under ``--visibility deferred`` the read returns the old value).

**Fenced mode** (``--visibility fenced``, ``race_fenced``): a write is an interval from its issue to
the fence (join, call end) that completes it, a scalar ``tensor.read`` from its line's fill to the
read, a DMA read from its issue to the fence (drain, join, call end) that completes it; x happens
before y iff x's end is known to y's start. A conflict that a write completed at its issue (or a
read filled at its time) would have avoided is reported as ``missing fence`` (with the release the
write was pending at) or ``missing cacheinvalid`` (with the fill and the wait); a write ordered after
a release issued while a DMA read was in flight, not after its completion, as ``missing fence (read
in flight)``; a rank's scalar read of a line its own DMA write wrote after the line's fill as
``missing cacheinvalid``. Same origin then needs a completion, not a release, between the put and
the read.

**Lost updates** (every mode): two Set releases into one signal cell by different ranks that
happens-before does not order (``lost_updates``, on rank 0 from the replayed sync logs).

**Records.** Every access to a data window is recorded by the accessing rank: (target rank, buffer,
read / write / atomic write, flat element intervals ``[start, stop)`` of the packed buffer, VC, call
site, call number). Puts, atomic puts, gets, ``remote_load`` (their regions decoded by the one transfer planner,
``transfer.py``, as the handlers decode them), and ``tile.load`` / ``tile.store`` /
``tensor.read`` / ``tensor.write`` on the rank's own windows all count; signal windows are
synchronisation, not data, and are left out. Accesses with the same VC (no notify or wait between
them) to the same target, buffer, kind and site are one record whose intervals are merged, so a
record costs one dict lookup and memory grows with synchronisation epochs, not with bytes. A rank's
remote read that follows its remote write starts a new *turn*, which splits records too: a site's
read before a put and its read after it (a loop) stay apart, so the same-origin check sees the second.
Harnesses record their own host-side accesses with :meth:`RaceDetector.host_access` (writing a
rank's inputs into its window, consuming its result).

**Checkpoint.** :meth:`RaceDetector.check` is collective and meant for the points where a harness
synchronises all ranks anyway (between iteration blocks, at the end). Its two exchanges are bounded
(``pldemu.mpi.BoundedComm``: a rank that never arrives raises RaceCheckTimeout) and one hop each
(point-to-point, :data:`CHECKPOINT_ROUNDS`): every rank sends its epoch (sync log, records) to rank 0,
which snapshots every rank's signal cells (all are in the checkpoint, none can leave before the
verdict: the next epoch's starting values), replays the sync logs, gives the records their clocks,
checks every rank's windows and sends every rank the verdict: the reports and the joined clock. Each
rank then drops its records (everything recorded so far happens before everything after the join,
so nothing later can race with it). Two records conflict when they are on
the same target and buffer, from different ranks, overlap, at least one writes (two atomic puts do
not conflict) and neither VC is <= the other; or from the same rank on another rank's window, a write
then a read with that rank's own entry unchanged (same origin, above). Per pair of ranks the concurrent records of the other
rank form a contiguous range of its (time-ordered) records, found by bisection, so checking costs
about the number of records plus the number of concurrent pairs.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from pldemu.ir import BufferKind, NotifyOp, Op, WaitCmp
from pldemu.mpi import CHECKPOINT_POLICY, BoundedComm
from pldemu.runtime.errors import Cause
from pldemu.runtime.groups import rank_text
from pldemu.runtime.instrument.completion import RULE, Point
from pldemu.runtime.instrument.intervals import MERGE_AT, Interval, merge_intervals, overlap, region_intervals
from pldemu.runtime.instrument.race_clocks import ACQ, EDGE, JOIN, REL, SyncEvent, replay
from pldemu.runtime.instrument.race_fenced import INF_EPOCH, FenceLedger, Pending, fence_notes, merge_notes
from pldemu.runtime.instrument.race_threads import Rising, TaskThreads, ThreadLog
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import CallSite, OpEvent
from pldemu.runtime.status import RankStatus
from pldemu.runtime.transfer import Region, plan_get, plan_put, remote_load_extent
from pldemu.runtime.values import Buffer, Shape, TensorRef, flat_cell, unravel

if TYPE_CHECKING:
    from pldemu.runtime.instrument.fenced import LineCache

READ, WRITE, ATOMIC, SET = 0, 1, 2, 3
"""Access kinds. Two atomic writes (element-wise MPI accumulates) do not conflict with each other;
SET is a Set notify (or ``tensor.write``) of a signal cell, for lost-update reports."""

KIND_NAMES = ("read", "write", "atomic write", "Set")

MISSING_FENCE, MISSING_INVALIDATE, LOST_UPDATE = "missing fence", "missing cacheinvalid", "lost update"
"""Report kinds besides a plain race (``RaceReport.reason``)."""

READ_IN_FLIGHT = "missing fence (read in flight)"
"""Fenced mode: a DMA read still in flight at a notify that another rank's write is ordered after."""

SIGNAL_LINE_CELLS = 16
"""INT32 signal cells per 64-byte line (the device's write-back granule, pto-isa#322)."""

MAX_NAMED = 16
"""Releases a pending write remembers for its report (the one the peer acquired is usually the first)."""

MAX_REPORTS = 200
"""Distinct reports kept per check (a broken recipe repeats the same race every call)."""

DEFAULT_TIMEOUT = 120.0
"""Seconds the checkpoint's MPI exchanges may take before ``RaceCheckTimeout``."""

STUCK_SLACK = 5.0
"""Seconds beyond the wait timeout that the checkpoint of a deadlocked job may take
(:meth:`RaceDetector.deadlock_causes`): the last rank's report settling, the replay, the exchanges."""

Clock = Callable[[], float]


class RaceCheckTimeout(RuntimeError):
    """A checkpoint exchange did not complete in time: some rank did not call ``check``/``join``."""


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RaceAccess:
    """One side of a race: who accessed, how, where in the program, in which call, when."""

    rank: int
    kind: int
    location: str
    call: int
    """1-based call number (``ProgramInstance.run()`` count) of the access; 0 before the first run."""
    t: float
    """When the access was first recorded, in microseconds: the trace clock when tracing (common to all
    ranks), else ``MPI.Wtime`` (comparable across the ranks of one node)."""

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]

    @property
    def host(self) -> bool:
        """A harness's access between calls (``RaceDetector.host_access``), not the program's."""
        return self.location.startswith("host:")

    def describe(self) -> str:
        when = f"after call {self.call}" if self.host else f"call {self.call}"
        return f"rank {self.rank} {self.kind_name} at {self.location} ({when})"


@dataclass(frozen=True)
class RaceReport:
    """Two conflicting, unordered accesses to the same elements of one rank's window."""

    buffer: str
    shape: Shape
    target: int
    """The rank whose window was accessed."""
    start: int
    stop: int
    """The first overlapping flat element interval ``[start, stop)`` of the packed buffer."""
    overlap: int
    """Elements the two accesses have in common."""
    first: RaceAccess
    second: RaceAccess
    count: int = 1
    """How many conflicting record pairs with the same two sites and ranks this report stands for."""
    reason: str = ""
    """"" (a race), MISSING_FENCE, MISSING_INVALIDATE (fenced mode) or LOST_UPDATE (two Set notifies)."""
    via: tuple[str, ...] = ()
    """The sites a fenced-mode report names besides the two accesses: missing fence, the release the
    write was pending at and "cached" if it was still in the data cache; missing cacheinvalid, the
    access that filled the line and the wait after that fill."""
    group: tuple[int, ...] | None = None
    """The buffer's comm sub-domain (``Buffer.group``): the target is then also named by its group-local peer."""

    def region_text(self) -> str:
        """``target[0, 16:32]``-style text of the first overlapping interval (flat if not a box row)."""
        return _flat_text(self.buffer, self.shape, self.start, self.stop)

    @property
    def same_origin(self) -> bool:
        """One rank's put and its own later read of the same remote elements, nothing between them."""
        return self.first.rank == self.second.rank

    def describe(self) -> str:
        more = f" ({self.count} times)" if self.count > 1 else ""
        if self.reason:
            return self._explained(more)
        why = (f"no notify by rank {self.first.rank} and no barrier between them, so nothing completes the "
               f"put before the read (it may overtake the put; under --visibility deferred it reads the old "
               f"value)" if self.same_origin else "neither happens before the other")
        return (f"race on {self.region_text()} of {rank_text(self.target, self.group)} ({self.overlap} elements){more}: "
                f"{self.first.describe()} || {self.second.describe()}: {why}")


    def _explained(self, more: str) -> str:
        a, b = self.first, self.second
        head = f"{self.reason} on {self.region_text()} of {rank_text(self.target, self.group)} ({self.overlap} elements){more}: "
        if self.reason == LOST_UPDATE:
            return (head + f"{a.describe()} || {b.describe()}: two Set notifies into one signal cell that nothing "
                    "orders; whichever lands second wipes the other (a lost update on the device too, simpler#253; "
                    "AtomicAdd keeps both)")
        if self.reason == READ_IN_FLIGHT:
            notify = self.via[0] if self.via else "its release"
            return (head + f"rank {a.rank}'s {a.kind_name} at {a.location} (call {a.call}) was still in flight at "
                    f"{notify} (no system.fence or drain between); {b.describe()} is ordered after that notify, "
                    f"not after the read's completion, so the read can return the {b.kind_name}'s bytes")
        if self.reason == MISSING_INVALIDATE and a.rank == b.rank:
            filled = f"the cached line filled at {self.via[0]}" if self.via and self.via[0] else "a cached line"
            return (head + f"rank {b.rank}'s {b.kind_name} at {b.location} (call {b.call}) used {filled}, before "
                    f"its own DMA {a.kind_name} at {a.location} (call {a.call}), which goes to memory, not the line; "
                    "no system.cacheinvalid covering that line between the write and the read, so it reads the "
                    "line's old value")
        if self.reason == MISSING_INVALIDATE:
            filler, wait = self.via
            after = f", before {wait}" if wait else ""
            return (head + f"rank {b.rank}'s {b.kind_name} at {b.location} (call {b.call}) used the cached line filled "
                    f"at {filler}{after}; no system.cacheinvalid covering that line between them, so it can miss "
                    f"{a.describe()}")
        release = self.via[0] if self.via else ""
        if a.rank == b.rank:
            return (head + f"rank {a.rank}'s {a.kind_name} at {a.location} (call {a.call}) then its own {b.kind_name} "
                    f"at {b.location} (call {b.call}) with no system.fence between them: nothing completes the write "
                    "before the read")
        state = ("was still in rank {r}'s data cache at {n} (no system.cacheinvalid covering its line, then "
                 "system.fence, between)" if "cached" in self.via[1:] else
                 "was still pending at {n} (no system.fence between)").format(r=a.rank, n=release or "its release")
        return (head + f"rank {a.rank}'s {a.kind_name} at {a.location} (call {a.call}) {state}; "
                f"{b.describe()} is ordered after that notify, not after the {a.kind_name}")


def _flat_text(name: str, shape: Shape, start: int, stop: int) -> str:
    if not shape or stop <= start:
        return f"{name}[flat {start}:{stop}]"
    a, b = unravel(start, shape), unravel(stop - 1, shape)
    if a[:-1] == b[:-1]:
        lead = "".join(f"{i}, " for i in a[:-1])
        return f"{name}[{lead}{a[-1]}:{b[-1] + 1}]"
    return f"{name}[{', '.join(map(str, a))}] .. {name}[{', '.join(map(str, b))}]"


# ---------------------------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------------------------


def _whole(buf: Buffer) -> list[Interval]:
    return [(0, buf.numel)] if buf.numel else []


def _data_window(t: Any) -> Buffer | None:
    """The buffer of a tensor value if it is a data window (not a signal, not rank-local)."""
    if isinstance(t, TensorRef):
        b = t.buffer
        if b.window is not None and b.kind is not BufferKind.SIGNAL:
            return b
    return None


def _checkpoint_timeout(what: str) -> RaceCheckTimeout:
    return RaceCheckTimeout(f"race check: {what} did not complete (a rank did not reach the checkpoint)")


# ---------------------------------------------------------------------------------------------
# The detector
# ---------------------------------------------------------------------------------------------

# A record as exchanged: (rank, buffer, kind, vc, intervals, location, call, t, epoch). The epoch,
# (sync segment, turn), orders the accessing rank's records in time: the segment counts its sync
# events, the turn its remote reads that follow a remote write (see RaceDetector._record). Fenced
# mode's intervals (race_fenced) have a tenth field, (end clock, end epoch, detail for the report):
# a write's completion, a scalar read's actual time (its clock is its line's fill).
_Wire = tuple[Any, ...]


CHECKPOINT_ROUNDS = 2
"""MPI rounds of one :meth:`RaceDetector.check` (``BoundedComm.rounds``: two one-hop exchanges); pinned
by tests/races/test_race_single_rank.py so that a change cannot add exchanges silently."""

CHECK_TAGS = 1 << 13
"""Checkpoints before the message tags repeat (two tags each, within MPI's guaranteed 32767)."""

_LogKey = tuple[int, int, int, int, int, int | str, int]
"""A point record's key: (segment, call, target, buffer, kind, site, turn)."""


@dataclass(frozen=True)
class _Epoch:
    """One rank's epoch as rank 0 judges it at the checkpoint: its sync log (with each event's site and
    call), its signal cells at the epoch's start, fenced mode's scalar signal reads, its records (points
    and intervals, clocks unresolved) and its program-order clock."""

    rank: int
    sync: list[SyncEvent]
    meta: list[tuple[int, int]]
    init: dict[int, np.ndarray] | None
    """Its signal cells at the epoch's start, at the first checkpoint only (then rank 0 keeps them)."""
    stale: list[tuple[Any, ...]]
    log: dict[_LogKey, list[Any]]
    spans: dict[tuple[Any, ...], list[Any]]
    vc: list[int]
    own: list[RaceReport]
    """Fenced mode's own-rank stale reads, reported as they are (program order decides them)."""
    threads: list[ThreadLog] = field(default_factory=list)
    """Its task threads (``race_threads``; the fields above are then its main thread's), else empty."""


@dataclass(frozen=True)
class _Verdict:
    """What rank 0 hands every rank at the checkpoint: the reports (sorted), each rank's (exact,
    coarse) acquire counts, the joined clock, fenced mode's notes on shared signal lines."""

    reports: list[RaceReport]
    acquires: list[tuple[int, int]]
    joined: list[int]
    notes: set[str]


class RaceDetector(MonitorBase):
    """This rank's sync log, program-order clock and access log; a monitor of the instance's program.

    Built collectively by ``ProgramInstance`` when ``RuntimeOptions.race_detect`` is set (available as
    ``inst.races``). Harnesses call :meth:`host_access` for their own window accesses, :meth:`join`
    at their own all-rank barriers, and :meth:`check` (collective) to get the reports.
    """

    def __init__(self, comm: MPI.Intracomm, buffers: Sequence[Buffer], sites: list[CallSite],
                 clock: Clock | None = None, timeout: float = DEFAULT_TIMEOUT, cache: LineCache | None = None) -> None:
        self._freed = False
        self._ledger = FenceLedger(cache) if cache is not None else None
        """Fenced mode (``race_fenced``): writes stamped at their completion, scalar reads at their fill."""
        self._spans: dict[tuple[Any, ...], list[Any]] = {}
        self._own: dict[tuple[int, int, int, int], RaceReport] = {}
        """Fenced mode: own-rank stale reads found since the last checkpoint (``_own_stale_read``)."""
        self._notes: set[str] = set()
        self.rank = comm.Get_rank()
        self.nranks = comm.Get_size()
        self.timeout = timeout
        self._buffers = list(buffers)
        self._by_name = {b.name: b for b in buffers}
        self._sites = sites
        self._clock: Clock = clock if clock is not None else _wtime_us
        self._signals = [b for b in buffers if b.kind is BufferKind.SIGNAL and b.window is not None]
        self._signal_index = {b.index for b in self._signals}
        # Before the Dup below returns on any rank, no rank has notified yet.
        self._init: dict[int, np.ndarray] | None = self._snapshot(self.rank)
        """My cells at the start of the first epoch; rank 0 snapshots every rank's at each checkpoint."""
        self._rest: list[dict[int, np.ndarray]] = []
        self._checks = 0
        # Our exchanges never match the program's or the harness's messages.
        self._comm: MPI.Intracomm = comm.Dup()
        self._bounded = BoundedComm(self._comm, timeout, _checkpoint_timeout, CHECKPOINT_POLICY)
        self._patient_verdict = True
        # My own entry starts at 1: an access must never look ordered before another rank's merely
        # because neither rank has released anything yet (0 <= 0).
        self._vc = [0] * self.nranks
        self._vc[self.rank] = 1
        self._run = 0
        self._sync: list[SyncEvent] = []
        self._meta: list[tuple[int, int]] = []  # per sync event: (site id, call), for the reports
        self._log: dict[_LogKey, list[Any]] = {}
        self._merged: dict[_LogKey, int] = {}
        """A log entry's interval count after its last merge."""
        # The same-origin check needs the order of this rank's remote writes and reads, which one
        # record per site and segment loses (a site's read before a put and its read after it would
        # be one record): a remote read after a remote write starts a new turn, and turns split records.
        self._turn = 0
        self._wrote_remote = False
        self.exact_acquires = 0
        """Acquires resolved exactly (``race_clocks``), counted at each checkpoint."""
        self.coarse_acquires = 0
        """Acquires that took every candidate release into the cell (``race_clocks`` says when)."""
        self.on_reports: Callable[[list[RaceReport]], None] | None = None
        """Called on every rank with each checkpoint's reports (the tracer draws them)."""
        self.total_reports = 0
        """Reports found so far over all checkpoints."""
        self.extra_reports: Callable[[], list[RaceReport]] | None = None
        """This rank's reports found by another checker since the last checkpoint (races between its tasks:
        ``race_tasks``), joined to the checkpoint's verdict."""
        self._threads: TaskThreads | None = None
        """The rank's logical threads when it runs tasks concurrently (:meth:`attach_tasks`), else None."""
        self._here: ThreadLog | None = None
        self._after = {
            Op.PUT: self._put,
            Op.GET: self._get,
            Op.REMOTE_LOAD: self._remote_load,
            Op.WAIT: self._wait,
            Op.TENSOR_READ: self._tensor_read,
            Op.TENSOR_WRITE: self._tensor_write,
            Op.TILE_LOAD: self._tile_load,
            Op.TILE_STORE: self._tile_store,
        }
        if self._ledger is not None:
            self._after[Op.FENCE] = self._fence
            self._after[Op.BAR_ALL] = self._drain

    def attach_tasks(self, sched: Any) -> None:
        """This rank runs tasks concurrently on ``sched`` (``runtime.tasksched``): keep a sync log, records
        and clock per logical thread (``race_threads``), so that whatever order the tasks ran in, a task's
        acquires order only its own later accesses and its releases only what happens before it. Fenced
        mode keeps one thread per rank."""
        if self._ledger is not None:
            return
        self._clock = Rising(self._clock)
        self._threads = TaskThreads(sched, self._clock, lambda: self._run)
        main = self._threads.main
        main.sync, main.meta, main.log = self._sync, self._meta, self._log
        self._here = main
        sched.observer = self._threads

    def _enter(self) -> None:
        """Point the logs at the logical thread that runs now."""
        assert self._threads is not None
        th = self._threads.current()
        if th is not self._here:
            self._here = th
            self._sync, self._meta, self._log = th.sync, th.meta, th.log

    # -- clocks --------------------------------------------------------------------------------

    @property
    def vc(self) -> tuple[int, ...]:
        """This rank's clock as far as program order and joins tell (its own entry counts its
        releases); what its waits acquired is resolved at the checkpoint (``race_clocks``)."""
        return tuple(self._vc)

    def _snapshot(self, rank: int) -> dict[int, np.ndarray]:
        """The values of rank ``rank``'s signal cells (an epoch's starting point for the replay)."""
        return {b.index: b.window.load_words(rank, 0, b.numel).astype(np.int64)
                for b in self._signals if b.window is not None}

    def _release(self, site: int, peer: int, buffer: int, cell: int, value: int, is_set: bool) -> None:
        self._sync.append((REL, self._clock(), peer, buffer, cell, value, is_set))
        self._meta.append((site, self._run))
        self._vc[self.rank] += 1

    def _acquire(self, site: int, buffer: int, cell: int, eq: bool, value: int | None) -> None:
        """A satisfied wait for my cell to reach (Ge) or equal (Eq) ``value``: what it acquires is
        resolved at the checkpoint."""
        self._sync.append((ACQ, self._clock(), buffer, cell, eq, value))
        self._meta.append((site, self._run))

    def _join_clocks(self) -> None:
        out = self._bounded.allreduce(np.array(self._vc, dtype=np.int64), MPI.MAX, "the clock join")
        self._vc = [int(v) for v in out]
        self._vc[self.rank] += 1

    def join(self, comm: MPI.Intracomm | None = None) -> None:
        """Collective: every rank's VC becomes the element-wise maximum (model an all-rank barrier of
        the caller: everything before it happens before everything after it)."""
        self._complete_all(Point.JOIN)  # the host's barrier lands every write (Schedule.host_sync)
        if self._threads is not None:
            self._enter()
            self._threads.joins += 1
        self._join_clocks()
        self._sync.append((JOIN, self._clock()))
        self._meta.append((-1, self._run))

    # -- monitor -------------------------------------------------------------------------------

    def wants(self, op: Op) -> bool:
        return op is Op.NOTIFY or op in self._after or (self._ledger is not None and op is Op.CACHEINVALID)

    def run_started(self, run: int) -> None:
        self._run = run

    def run_ended(self, run: int, error: BaseException | None) -> None:
        self._complete_all(Point.CALL_END)  # the kernel's exit completes every write (the tail flush cleans the cache)

    def before(self, event: OpEvent) -> None:
        if self._threads is not None:
            self._enter()
        op = event.op
        if op is Op.NOTIFY:
            sig, peer = event.args[0], event.args[1]
            cell = self._cell(sig, event.args[2], peer)
            if cell is not None:
                self._release(event.site.id, operator.index(peer), sig.buffer.index, cell, _int32(event.args[3]),
                              event.site.attrs["op"] is NotifyOp.Set)
        elif op is Op.TENSOR_WRITE:
            t = event.args[0]
            if isinstance(t, TensorRef) and t.buffer.kind is BufferKind.SIGNAL:
                cell = self._cell(t, event.args[1], self.rank)
                if cell is not None:
                    self._release(event.site.id, self.rank, t.buffer.index, cell, _int32(event.args[2]), True)
        elif op is Op.CACHEINVALID and self._ledger is not None:
            self._cacheinvalid(event.site, event.args)

    def after(self, event: OpEvent, result: Any) -> None:
        if self._threads is not None:
            self._enter()
        if event.op is Op.TENSOR_READ:
            self._tensor_read(event.site, event.args, result)
            return
        fn = self._after.get(event.op)
        if fn is not None:
            fn(event.site, event.args)

    def _cell(self, sig: Any, index: Any, peer: Any) -> int | None:
        """The flat cell a signal op addresses, or None when the handler is about to refuse it."""
        if not isinstance(sig, TensorRef) or sig.buffer.index not in self._signal_index:
            return None
        try:
            p = operator.index(peer)
            if not 0 <= p < self.nranks:
                return None
            return flat_cell("race", self.rank, p, sig, tuple(index))
        except Exception:  # the handler raises the proper error itself
            return None

    # -- recording -----------------------------------------------------------------------------

    def _record(self, target: int, buf: Buffer, kind: int, site: int | str, ivs: list[Interval],
                dma: bool = False) -> None:
        """Record an access; ``dma``: a DMA read (remote_load, a get's or put's source, a tile.load), which fenced
        mode keeps in flight until a fence, a drain, a join or the call's end completes it."""
        if not ivs:
            return
        if target != self.rank:
            if kind == WRITE or (kind == ATOMIC and self._ledger is not None):
                self._wrote_remote = True
            elif kind == READ and self._wrote_remote:
                self._turn += 1
                self._wrote_remote = False
        if self._ledger is not None and (kind != READ or dma) and isinstance(site, int):
            # Fenced mode: a program's write is pending, its DMA read in flight, until what completes it
            # (race_fenced).
            p = Pending(target, buf, kind, site, ivs, len(self._sync), self._turn, self._run, self._clock())
            if kind == READ:
                self._ledger.reads.append(p)
                return
            if target == self.rank:
                self._ledger.dma_write(buf, site, self._run, self._clock(), ivs)
            self._ledger.pending.append(p)
            return
        key = (len(self._sync), self._run, target, buf.index, kind, site, self._turn)
        rec = self._log.get(key)
        if rec is None:
            self._log[key] = [self._clock(), ivs]
            return
        have: list[Interval] = rec[1]
        have.extend(ivs)
        # merged again only once it has doubled since: a long loop of tile loads of one site (a model-scale
        # weight's thousands of row runs) re-sorted its whole list at every access, quadratic in Python
        if len(have) >= max(MERGE_AT, 2 * self._merged.get(key, 0)):
            rec[1] = merge_intervals(have)
            self._merged[key] = len(rec[1])

    def host_access(self, name: str, write: bool, where: str = "harness", *,
                    offsets: Shape | None = None, extent: Shape | None = None) -> None:
        """Record a host-side access by this rank to its own window ``name`` (whole buffer unless a
        region of the declared shape is given): a harness writing inputs (``write=True``) or
        consuming a result. Rank-local and signal buffers are ignored."""
        buf = self._by_name[name]
        if buf.window is None or buf.kind is BufferKind.SIGNAL:
            return
        if self._threads is not None:
            self._enter()
        if offsets is None or extent is None:
            ivs = _whole(buf)
        else:
            ivs = region_intervals(buf.shape, tuple(offsets), tuple(extent))
        self._record(self.rank, buf, WRITE if write else READ, "host: " + where, ivs)

    def _put(self, site: CallSite, args: tuple[Any, ...]) -> None:
        plan = plan_put(self.rank, site, args)
        if plan is None:
            return
        if plan.src is not None:
            self._record_region(self.rank, plan.src, READ, site.id, dma=True)
        self._record_region(plan.peer, plan.dst, ATOMIC if site.attrs["atomic"] else WRITE, site.id)

    def _get(self, site: CallSite, args: tuple[Any, ...]) -> None:
        plan = plan_get(self.rank, site, args)
        if plan is not None:
            self._record_region(plan.peer, plan.src, READ, site.id, dma=True)
            self._record_region(self.rank, plan.dst, WRITE, site.id)

    def _record_region(self, target: int, side: Region, kind: int, site: int, dma: bool = False) -> None:
        """Record an access to one end of a transfer if it is a data window."""
        buf = _data_window(side.tensor)
        if buf is not None:
            self._record(target, buf, kind, site, region_intervals(side.tensor.shape, side.offsets, side.extent),
                         dma)

    def _remote_load(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is not None:
            self._record(args[1], buf, READ, site.id, region_intervals(t.shape, args[2], remote_load_extent(args)),
                         dma=True)

    def _wait(self, site: CallSite, args: tuple[Any, ...]) -> None:
        sig = args[0]
        cell = self._cell(sig, args[1], self.rank)
        if cell is not None:
            # The wait needed the cell to reach (or equal) ``expected``, whatever it read.
            self._acquire(site.id, sig.buffer.index, cell, site.attrs["cmp"] is WaitCmp.Eq, operator.index(args[2]))
            if self._ledger is not None:  # TWAIT cleans its cell's line before every poll: fresh now
                self._ledger.signal_fills[(sig.buffer.index, cell // SIGNAL_LINE_CELLS)] = (len(self._sync), site.id,
                                                                                            False)

    def _tensor_read(self, site: CallSite, args: tuple[Any, ...], result: Any = None) -> None:
        t = args[0]
        if not isinstance(t, TensorRef) or t.buffer.window is None:
            return
        if t.buffer.kind is BufferKind.SIGNAL:
            cell = self._cell(t, args[1], self.rank)
            if cell is not None:
                if self._ledger is not None:
                    self._signal_line(site, t.buffer.index, cell)
                # The read saw the cell equal to what it returned.
                value = int(result) if isinstance(result, int | np.integer) else None
                self._acquire(site.id, t.buffer.index, cell, True, value)
            return
        flat = flat_cell("race", self.rank, self.rank, t, args[1])
        if self._ledger is not None:
            self._cached_read(site, t.buffer, flat)
            self._own_stale_read(site, t.buffer, flat)
            return
        self._record(self.rank, t.buffer, READ, site.id, [(flat, flat + 1)])

    def _tensor_write(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is None:
            return
        flat = flat_cell("race", self.rank, self.rank, t, args[1])
        ledger = self._ledger
        if ledger is None:
            self._record(self.rank, buf, WRITE, site.id, [(flat, flat + 1)])
            return
        ledger.fill(buf, flat, (len(self._sync), self._turn), site.id)  # a write miss fills the line too
        ledger.store(ledger.cache.key_of(buf, flat),
                     Pending(self.rank, buf, WRITE, site.id, [(flat, flat + 1)], len(self._sync), self._turn,
                             self._run, self._clock()))

    # -- fenced mode (race_fenced) ---------------------------------------------------------------

    def _cached_read(self, site: CallSite, buf: Buffer, flat: int) -> None:
        """A scalar read served from a cached line: from the line's fill to now."""
        assert self._ledger is not None
        now = (len(self._sync), self._turn)
        seg, turn, filler = self._ledger.fill(buf, flat, now, site.id)
        if seg == now[0]:
            self._record(self.rank, buf, READ, site.id, [(flat, flat + 1)])  # no sync since the fill: a point
            return
        key = (seg, turn, now[0], now[1], self._run, self.rank, buf.index, READ, site.id, ("fill", filler))
        rec = self._spans.get(key)
        if rec is None:
            self._spans[key] = [self._clock(), [(flat, flat + 1)]]
        else:
            rec[1].append((flat, flat + 1))

    def _own_stale_read(self, site: CallSite, buf: Buffer, flat: int) -> None:
        """A scalar read served from a line this rank's own DMA write wrote after the line's fill, with
        no cacheinvalid covering it since: the read returns the line's old value (``missing
        cacheinvalid``). Program order alone decides it, so the report is made here, not at the checkpoint."""
        assert self._ledger is not None
        under = self._ledger.dma_under(self._ledger.cache.key_of(buf, flat), flat)
        if under is None:
            return
        w_site, w_run, w_t, filler = under
        key = (buf.index, flat, w_site, site.id)
        old = self._own.get(key)
        if old is not None:
            self._own[key] = replace(old, count=old.count + 1)
        elif len(self._own) < MAX_REPORTS:
            self._own[key] = RaceReport(
                buf.name, buf.shape, self.rank, flat, flat + 1, 1,
                RaceAccess(self.rank, WRITE, self._where(w_site), w_run, w_t),
                RaceAccess(self.rank, READ, self._where(site.id), self._run, self._clock()),
                reason=MISSING_INVALIDATE, via=(self._where(filler) if filler >= 0 else "", ""), group=buf.group)

    def _signal_line(self, site: CallSite, buf: int, cell: int) -> None:
        """A scalar read of a signal cell goes through the data cache on the device (only TWAIT cleans
        its own line): if the line was filled in an earlier segment, keep the read for the checkpoint."""
        assert self._ledger is not None
        key = (buf, cell // SIGNAL_LINE_CELLS)
        fill = self._ledger.signal_fills.get(key)
        now = len(self._sync)
        if fill is None:
            self._ledger.signal_fills[key] = (now, site.id, True)
        elif fill[0] < now:
            self._ledger.signal_reads.append((fill[0], fill[1], now, buf, cell, site.id, self._run, self._clock()))

    def _complete(self, done: list[Pending], hi: tuple[int, int]) -> None:
        """Log writes completed at epoch ``hi`` as intervals from their issue; a write to this rank's
        own window completed in the segment it was issued in is a point (no same-origin question)."""
        for p in done:
            if p.seg == hi[0] and (p.target == self.rank or p.kind == READ):
                self._log_point(p)  # a read completed before any release: a point, as in the other modes
                continue
            how = ("flight",) if p.kind == READ else ("fence", p.cleaned)
            key = (p.seg, p.turn, hi[0], hi[1], p.run, p.target, p.buf.index, p.kind, p.site, how)
            rec = self._spans.get(key)
            if rec is None:
                self._spans[key] = [p.t, list(p.ivs)]
            else:
                rec[1].extend(p.ivs)

    def _log_point(self, p: Pending) -> None:
        key = (p.seg, p.run, p.target, p.buf.index, p.kind, p.site, p.turn)
        rec = self._log.get(key)
        if rec is None:
            self._log[key] = [p.t, list(p.ivs)]
        else:
            rec[1].extend(p.ivs)

    def _completion(self, done: list[Pending]) -> tuple[int, int]:
        """A completion point's epoch; a new turn if it completed a remote write (the same-origin
        check's order: a read of that turn or later comes after the completion)."""
        if any(p.target != self.rank for p in done):
            self._turn += 1
        return len(self._sync), self._turn

    def _fence(self, site: CallSite, args: tuple[Any, ...]) -> None:
        self._complete_at(Point.FENCE, site.id)

    def _drain(self, site: CallSite, args: tuple[Any, ...]) -> None:
        """``system.bar_all``: the rank's DMA reads have their bytes (its writes stay pending)."""
        self._complete_at(Point.DRAIN, site.id)

    def _complete_all(self, point: Point) -> None:
        if self._ledger is not None:
            self._complete_at(point)

    def _complete_at(self, point: Point, site: int = -1) -> None:
        """What ``point`` completes by the one rule the run follows too (``completion.RULE``): a fence its
        pending writes (dirty lines stay in the cache), a join or the call's end every write (the tail
        flush cleans the lines), each of them and a drain the reads in flight; stamped now."""
        assert self._ledger is not None
        rule, ledger = RULE[point], self._ledger
        writes: list[Pending] = []
        if rule.writes:
            writes = ledger.fence(site) if point is Point.FENCE else ledger.complete_all()
        reads = ledger.land_reads() if rule.reads else []
        if writes or reads:
            self._complete(writes + reads, self._completion(writes))

    def _cacheinvalid(self, site: CallSite, args: tuple[Any, ...]) -> None:
        assert self._ledger is not None
        key: tuple[int, int] | None = None
        buf: int | None = None
        fills = self._ledger.signal_fills
        signal_lines = sum(f[2] for f in fills.values())
        if not args:
            fills.clear()
        else:
            t = args[0]
            b = _data_window(t)
            base = self._base_cell(t, args[2])
            if base is None:
                return
            if b is not None:
                key, buf = self._ledger.cache.key_of(b, base), b.index
            else:  # a signal view (rank-local tensors are not cached)
                key = (t.buffer.index, base // SIGNAL_LINE_CELLS)
                if t.buffer.index not in self._signal_index:
                    return
            gone = fills.pop(key, None) if b is None else None
            signal_lines = int(gone is not None and gone[2])
        self._ledger.invalidate(site.id, key, buf, self._where, len(self._sync), signal_lines)

    def _base_cell(self, t: Any, offsets: Any) -> int | None:
        """The flat cell of a region cacheinvalid's view base (None: the handler refuses it)."""
        if not isinstance(t, TensorRef):
            return None
        try:
            return flat_cell("race", self.rank, self.rank, t, tuple(operator.index(i) for i in offsets))
        except Exception:  # the handler raises the proper error itself
            return None

    def _tile_load(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is not None:
            extent = args[3] if len(args) > 3 else args[2]
            self._record(self.rank, buf, READ, site.id, region_intervals(t.shape, args[1], extent), dma=True)

    def _tile_store(self, site: CallSite, args: tuple[Any, ...]) -> None:
        tile, t = args[0], args[2]
        buf = _data_window(t)
        if buf is not None:
            kind = ATOMIC if site.attrs.get("atomic", False) else WRITE  # pl.assemble(..., atomic=Add)
            self._record(self.rank, buf, kind, site.id, region_intervals(t.shape, args[1], tile.valid))

    @property
    def pending(self) -> int:
        """Records logged since the last checkpoint."""
        if self._threads is not None:
            return sum(len(th.log) for th in self._threads.threads)
        return len(self._log)

    # -- checkpoint ----------------------------------------------------------------------------

    def _where(self, site: int | str) -> str:
        if isinstance(site, str):
            return site
        return self._sites[site].where if 0 <= site < len(self._sites) else f"<site {site}>"

    def check(self, comm: MPI.Intracomm | None = None) -> list[RaceReport]:
        """Collective checkpoint: find the races among everything recorded since the last one, on
        every rank's windows; return all of them (the same list on every rank); join the clocks and
        drop the records. ``comm`` is accepted for symmetry with harness code (the detector uses
        its own duplicate of the instance's communicator).

        Two exchanges of one hop each (:data:`CHECKPOINT_ROUNDS`, point-to-point, no tree): every
        rank sends its epoch straight to rank 0, which replays the sync logs, gives every record its
        clock and checks every rank's windows (one computation, not one per rank: the others wait,
        backing off, instead of sharing the cores with it); then rank 0 sends each rank the verdict.
        Each round needs the ranks it waits for scheduled, which on shared cores costs more than the
        computation it would save to spread."""
        if self._ledger is not None:
            self._complete(self._ledger.complete_all(), INF_EPOCH)  # never completed in this epoch
        stale = self._ledger.signal_reads if self._ledger is not None else []
        extra = self.extra_reports() if self.extra_reports is not None else []
        threads: list[ThreadLog] = []
        if self._threads is not None:
            main = self._threads.main
            self._sync, self._meta, self._log = main.sync, main.meta, main.log
            threads = self._threads.take()
        mine = _Epoch(self.rank, self._sync, self._meta, self._init, stale, self._log, self._spans, self._vc,
                      list(self._own.values()) + extra, threads)
        self._own = {}
        self._init = None  # rank 0 snapshots every rank's cells from now on
        tag = 2 * (self._checks % CHECK_TAGS)  # a timed-out checkpoint's messages never match a later one
        self._checks += 1
        epochs = self._bounded.gather_direct(mine, "the epoch gather", tag)
        if self._ledger is not None:
            self._ledger.signal_reads = []
        verdict = self._judge(epochs) if epochs is not None else None
        # Every rank has sent its epoch; rank 0 judges them, which takes long at model scale (a layer's
        # thousands of tile accesses): the others wait for that without the exchange's deadline, except in
        # the deadlock diagnosis, where rank 0 may give up on a rank that never comes and send nothing.
        verdict = self._bounded.bcast_direct(verdict, "the verdict", tag + 1, patient=self._patient_verdict)
        if isinstance(verdict, str):
            raise RuntimeError(verdict)
        exact, coarse = verdict.acquires[self.rank]
        self.exact_acquires += exact
        self.coarse_acquires += coarse
        self._notes.update(verdict.notes)
        self._log.clear()
        self._merged.clear()
        self._spans.clear()
        self._sync = []
        self._meta = []
        if self._threads is not None:
            self._here = main = self._threads.main
            self._sync, self._meta, self._log = main.sync, main.meta, main.log
        if self._ledger is not None:
            self._ledger.fills.clear()
        self._vc = list(verdict.joined)
        self._vc[self.rank] += 1
        reports = verdict.reports
        self.total_reports += len(reports)
        if self.on_reports is not None and reports:
            self.on_reports(reports)
        return reports

    def deadlock_causes(self, statuses: Sequence[RankStatus], wait_timeout: float) -> tuple[Cause, ...]:
        """When a wait gives up: the races among what was recorded since the last checkpoint (the
        hanging call's accesses), as causes for the deadlock report. Only when the board shows every
        rank blocked: each one's wait then gives up within ``wait_timeout`` and it comes here too, so
        the checkpoint's exchanges (bounded by that) complete; otherwise, or if they do not, none."""
        if not statuses or not all(st.blocked for st in statuses):
            return ()
        keep = self._bounded
        self._bounded = BoundedComm(self._comm, wait_timeout + STUCK_SLACK, _checkpoint_timeout)
        self._patient_verdict = False
        try:
            reports = self.check()
        except RuntimeError:  # a rank did not come (its wait was satisfied after all): report without
            return ()
        finally:
            self._bounded = keep
            self._patient_verdict = True
        return tuple(Cause("race", max(r.first.call, r.second.call) - 1, r.describe()) for r in reports)

    def _judge(self, epochs: Sequence[_Epoch]) -> _Verdict | str:
        """Rank 0's part of the checkpoint: every rank's epoch replayed (``race_clocks``), its records
        given their clocks and checked on their target's windows, the lost updates among the Set
        notifies; or the replay's error, for every rank to raise."""
        known = self._rest
        # Every rank is in this checkpoint (its epoch arrived) and none can leave it before the verdict:
        # every signal cell is at rest, the next epoch's starting point.
        self._rest = [self._snapshot(r) for r in range(self.nranks)]
        try:
            if any(e.init is None for e in epochs) and not known:
                raise RuntimeError("race detector: an earlier checkpoint timed out; its epoch cannot be replayed")
            views, ranks, parts = _thread_views(epochs)
            threaded = len(views) > len(epochs)
            res = replay([v.sync for v in views], [e.init if e.init is not None else known[e.rank] for e in epochs],
                         ranks if threaded else None, parts if threaded else None)
            sync = [(v.sync, v.meta) for v in views]
            lost = lost_updates(sync, res.segments, self._buffers, self._where)
            if any(e.stale for e in epochs):
                lost += stale_signal_reads(sync, res.segments, [e.stale for e in epochs], self._buffers, self._where)
            notes = shared_line_notes(sync, self._buffers, self._sites) if self._ledger is not None else set()
        except RuntimeError as err:
            return str(err)
        wires = [_wires(v, res.segments[v.rank], self._where) for v in views]
        found: list[RaceReport] = []
        if threaded:
            lost = _on_ranks(lost, ranks)
        for target in range(self.nranks):
            races = find_races(target, self._buffers, [w for out in wires for w in out[target]],
                               ranks if threaded else None)
            found += _on_ranks(races, ranks) if threaded else races
            found += [r for e in epochs for r in e.own if r.target == target]
            if target == 0:
                found += lost
        reports = sorted(found, key=lambda r: (r.target, r.buffer, r.start, r.first.rank, r.second.rank))
        joined = [max(col) for col in zip(*(e.vc for e in epochs), strict=True)]
        acquires = [(0, 0)] * self.nranks
        for r, exact, coarse in zip(ranks, res.exact, res.coarse, strict=True):
            acquires[r] = (acquires[r][0] + exact, acquires[r][1] + coarse)
        return _Verdict(reports, acquires, joined, notes)

    def notes(self) -> list[str]:
        """Collective (fenced mode; else empty): the notes on markers that were useless or insufficient
        on every execution since the detector was made, and on scalar writes into signal lines other
        ranks notify (found at the checkpoints), the same list on every rank."""
        if self._ledger is None:
            return []
        parts = self._bounded.allgather((self._ledger.notes.wire(), sorted(self._notes)), "the notes exchange")
        counts = merge_notes([c for c, _ in parts])
        return fence_notes(counts, self._where, self._placed_by) + sorted({n for _, ns in parts for n in ns})

    def _placed_by(self, site: int) -> str:
        """The pass that placed the marker at ``site`` (empty: the user's own)."""
        origin = self._sites[site].location.origin if 0 <= site < len(self._sites) else None
        return "" if origin is None else origin.placed_by

    def free(self) -> None:
        """Free the private communicator (collective; idempotent)."""
        if self._freed:
            return
        self._freed = True
        self._comm.Free()


def _int32(value: Any) -> int:
    """A notify operand as the cell receives it (the windows layer wraps it to INT32)."""
    v = operator.index(value) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _wtime_us() -> float:
    return MPI.Wtime() * 1e6


def _thread_views(epochs: Sequence[_Epoch]) -> tuple[list[_Epoch], list[int], list[int | None]]:
    """Every rank's logical threads as the replay sees them (``race_clocks``: "Logical threads"): one epoch
    per thread, its ``rank`` the thread's index, an EDGE's source translated to that index; with the
    thread's rank and part (None: a main thread). Without tasks, the epochs themselves."""
    if not any(e.threads for e in epochs):
        return list(epochs), [e.rank for e in epochs], [None] * len(epochs)
    views: list[_Epoch] = []
    ranks: list[int] = []
    parts: list[int | None] = []
    for e in epochs:
        base = len(views)
        for th in [ThreadLog(e.sync, e.meta, e.log), *e.threads]:
            sync = [(EDGE, ev[1], base + ev[2], ev[3]) if ev[0] == EDGE else ev for ev in th.sync]
            view = replace(e, rank=len(views), sync=sync, meta=th.meta, log=th.log, threads=[])
            # a task thread's records are all in its log (fenced mode, with its spans, keeps one thread)
            views.append(view if th.part is None else replace(view, spans={}, stale=[], own=[]))
            ranks.append(e.rank)
            parts.append(th.part)
    return views, ranks, parts


def _on_ranks(reports: Sequence[RaceReport], ranks: Sequence[int]) -> list[RaceReport]:
    """Reports between logical threads told as between their ranks; two that then name the same
    accesses are one (their counts added)."""
    out: dict[tuple[Any, ...], RaceReport] = {}
    for r in reports:
        r = replace(r, first=replace(r.first, rank=ranks[r.first.rank]),
                    second=replace(r.second, rank=ranks[r.second.rank]))
        key = (r.reason, r.buffer, r.target, r.first.rank, r.first.location, r.first.kind, r.second.rank,
               r.second.location, r.second.kind)
        old = out.get(key)
        out[key] = r if old is None else replace(old, count=old.count + r.count)
    return list(out.values())[:MAX_REPORTS]


def _wires(ep: _Epoch, segments: Sequence[Sequence[int]], where: Callable[[int | str], str]) -> list[list[_Wire]]:
    """Rank ``ep.rank``'s records as wires, per target, with their resolved clocks; records of one site
    that the replay gave the same clock are merged (a wait that acquired nothing new splits nothing)."""
    merged: dict[tuple[Any, ...], list[Any]] = {}
    same = _clock_runs(segments)
    for (seg, run, target, buf, kind, site, turn), (t, ivs) in ep.log.items():
        key = (same[seg], run, target, buf, kind, site, turn)
        rec = merged.get(key)
        if rec is None:
            merged[key] = [seg, t, list(ivs)]
        else:
            rec[0], rec[1] = min(rec[0], seg), min(rec[1], t)
            rec[2].extend(ivs)
    nranks = len(ep.vc)
    outgoing: list[list[_Wire]] = [[] for _ in range(nranks)]
    for (first, run, target, buf, kind, site, turn), (seg, t, ivs) in merged.items():
        outgoing[target].append((ep.rank, buf, kind, segments[first], merge_intervals(ivs), where(site), run, t,
                                 (seg, turn)))
    for (seg, turn, hi_seg, hi_turn, run, target, buf, kind, site, how), (t, ivs) in ep.spans.items():
        hi = segments[hi_seg] if hi_seg < len(segments) else (INF_EPOCH[0],) * nranks
        detail = _span_detail(ep, how, (seg, hi_seg), segments, where)
        outgoing[target].append((ep.rank, buf, kind, segments[seg], merge_intervals(ivs), where(site), run, t,
                                 (seg, turn), (hi, (hi_seg, hi_turn), detail)))
    return outgoing


def _clock_runs(segments: Sequence[Sequence[int]]) -> list[int]:
    """For each segment of a thread, the first segment of the run of equal clocks that holds it: a thread's
    clocks never decrease, so equal ones are consecutive, and records are merged by it rather than by
    hashing clocks as wide as the epoch's threads (thousands of entries each at model scale)."""
    out = [0] * len(segments)
    for s in range(1, len(segments)):
        out[s] = out[s - 1] if segments[s] == segments[s - 1] else s
    return out


def _span_detail(ep: _Epoch, how: tuple[Any, ...], span: tuple[int, int], segments: Sequence[Sequence[int]],
                 where: Callable[[int | str], str]) -> tuple[Any, ...]:
    """What a fenced-mode report says of an interval (segments ``span``): for a write, the releases it
    was pending at (its rank's own clock entry at each, where, and whether the write was still in the
    data cache then; the first MAX_NAMED); for a read, the access that filled its line and the waits
    between that fill and the read (each with the clock it left)."""
    me, sync, meta = ep.rank, ep.sync, ep.meta
    seg, end = span[0], min(span[1], len(sync))
    if how[0] in ("fence", "flight"):
        cleaned = how[1] if how[0] == "fence" else 0
        named = tuple((segments[i][me], where(meta[i][0]), i < cleaned) for i in range(seg, end) if sync[i][0] == REL)
        return (how[0], named[:MAX_NAMED])
    waits = tuple((segments[i + 1], where(meta[i][0])) for i in range(seg, end)
                  if sync[i][0] == ACQ and segments[i + 1] != segments[i])
    return ("fill", where(how[1]), waits)


def find_races(target: int, buffers: Sequence[Buffer], records: Sequence[_Wire],
               ranks: Sequence[int] | None = None) -> list[RaceReport]:
    """The races among ``records`` (all accesses to rank ``target``'s windows since the last
    checkpoint, from every rank), deduplicated per (buffer, ranks, sites, kinds). ``ranks``: the records
    are by logical threads (``race_threads``), thread i of rank ``ranks[i]``; two threads of one rank are
    left to the task race check (``race_tasks``)."""
    by_buf: dict[int, dict[int, list[_Wire]]] = {}
    for w in records:
        by_buf.setdefault(w[1], {}).setdefault(w[0], []).append(w)
    found: dict[tuple[Any, ...], RaceReport] = {}
    for buf_index, per_rank in sorted(by_buf.items()):
        buf = buffers[buf_index]
        threads = sorted(per_rank)
        for r in threads:
            per_rank[r].sort(key=_epoch_of)  # each rank's records in its time order
        later = _other_ranks(threads, ranks)
        for i, p in enumerate(threads):
            if (p if ranks is None else ranks[p]) != target:
                _same_origin(buf, target, per_rank[p], found)
            for q in threads[later[i] :]:
                if ranks is None or ranks[p] != ranks[q]:
                    _pair(buf, target, p, per_rank[p], q, per_rank[q], found)
    return list(found.values())[:MAX_REPORTS]


def _other_ranks(threads: Sequence[int], ranks: Sequence[int] | None) -> list[int]:
    """For each of ``threads`` (sorted), where the run of threads of its rank that holds it ends: a rank's
    threads are numbered together (``_thread_views``), so the pairs to check start there, and thousands of
    task threads of one rank are not compared with each other only to be skipped."""
    if ranks is None:
        return list(range(1, len(threads) + 1))
    ends = [0] * len(threads)
    end = len(threads)
    for i in range(len(threads) - 1, -1, -1):
        if i + 1 < len(threads) and ranks[threads[i + 1]] != ranks[threads[i]]:
            end = i + 1
        ends[i] = end
    return ends


_SetRelease = tuple[Sequence[int], int, int, float]
"""A Set release as ``lost_updates`` sees it: (its clock, site id, call, time)."""


def lost_updates(sync: Sequence[tuple[Sequence[SyncEvent], Sequence[tuple[int, int]]]],
                 segments: Sequence[Sequence[Sequence[int]]], buffers: Sequence[Buffer],
                 where: Callable[[int], str]) -> list[RaceReport]:
    """Two Set notifies (or ``tensor.write`` Sets) into one signal cell by different ranks that
    happens-before does not order: whichever lands second wipes the other (simpler#253). ``sync``:
    every rank's (sync log, per-event (site, call)); ``segments``: the replay's clocks (a release's
    clock is the one before it). AtomicAdds never conflict. Per pair of ranks the concurrent Sets of
    the other form a contiguous range of its program order, found by bisection, as in ``_pair``."""
    cells: dict[tuple[int, int, int], dict[int, list[_SetRelease]]] = {}
    for r, (log, meta) in enumerate(sync):
        for i, ev in enumerate(log):
            if ev[0] == REL and ev[6]:
                cells.setdefault((ev[2], ev[3], ev[4]), {}).setdefault(r, []).append(
                    (segments[r][i], meta[i][0], meta[i][1], ev[1]))
    found: dict[tuple[Any, ...], RaceReport] = {}
    for (target, b, cell), per in sorted(cells.items()):
        ranks = sorted(per)
        buf = buffers[b]
        for i, p in enumerate(ranks):
            for q in ranks[i + 1 :]:
                qs = per[q]
                q_own, q_of_p = [c[q] for c, *_ in qs], [c[p] for c, *_ in qs]
                for a in per[p]:
                    for c in qs[bisect_right(q_own, a[0][q]) : bisect_left(q_of_p, a[0][p])]:
                        # The lower rank first, not the earlier Set: either may land second, and the
                        # report (and its count) must not depend on which did in this run.
                        key = (b, target, cell, p, a[1], q, c[1])
                        old = found.get(key)
                        found[key] = replace(old, count=old.count + 1) if old is not None else RaceReport(
                            buf.name, buf.shape, target, cell, cell + 1, 1,
                            RaceAccess(p, SET, where(a[1]), a[2], a[3]),
                            RaceAccess(q, SET, where(c[1]), c[2], c[3]), reason=LOST_UPDATE, group=buf.group)
    return list(found.values())[:MAX_REPORTS]


def stale_signal_reads(sync: Sequence[tuple[Sequence[SyncEvent], Sequence[tuple[int, int]]]],
                       segments: Sequence[Sequence[Sequence[int]]], reads: Sequence[Sequence[tuple[Any, ...]]],
                       buffers: Sequence[Buffer], where: Callable[[int], str]) -> list[RaceReport]:
    """Fenced mode: a ``tensor.read`` of a signal cell served from a line filled before a release
    into that cell by another rank that is ordered before the read (through another cell: the
    all_to_all_v ``recv_counts`` pattern) but not before the fill, with no cacheinvalid between:
    on the device the read can return the old count (``missing cacheinvalid``)."""
    releases: dict[tuple[int, int, int], list[tuple[int, Sequence[int], int, int, float, bool]]] = {}
    for w, (log, meta) in enumerate(sync):
        for j, ev in enumerate(log):
            if ev[0] == REL and ev[2] != w:
                releases.setdefault((ev[2], ev[3], ev[4]), []).append(
                    (w, segments[w][j], meta[j][0], meta[j][1], ev[1], bool(ev[6])))
    found: dict[tuple[Any, ...], RaceReport] = {}
    for r, mine in enumerate(reads):
        log, meta = sync[r]
        for fill_seg, fill_site, i, b, cell, site, run, t in mine:
            fill, pre = segments[r][fill_seg], segments[r][i]
            for w, c, rel_site, rel_run, rel_t, is_set in releases.get((r, b, cell), []):
                if not fill[w] < c[w] <= pre[w]:
                    continue
                wait = next((where(meta[k][0]) for k in range(fill_seg, i)
                             if log[k][0] == ACQ and segments[r][k + 1][w] >= c[w]), "")
                key = (b, r, cell, w, rel_site, site)
                old = found.get(key)
                buf = buffers[b]
                found[key] = replace(old, count=old.count + 1) if old is not None else RaceReport(
                    buf.name, buf.shape, r, cell, cell + 1, 1,
                    RaceAccess(w, SET if is_set else ATOMIC, where(rel_site), rel_run, rel_t),
                    RaceAccess(r, READ, where(site), run, t), reason=MISSING_INVALIDATE, via=(where(fill_site), wait),
                    group=buf.group)
    return list(found.values())[:MAX_REPORTS]


def shared_line_notes(sync: Sequence[tuple[Sequence[SyncEvent], Sequence[tuple[int, int]]]],
                      buffers: Sequence[Buffer], sites: Sequence[CallSite]) -> set[str]:
    """A Set (a ``tensor.write`` of a signal cell, or a Set notify: both a scalar store on the device)
    into a 64-byte line of a signal buffer that other ranks notify: the device's write-back rewrites
    the whole line and can restore a neighbour's old value (pto-isa#322; a structural note, the model
    keeps signal cells atomic per cell)."""
    notified: dict[tuple[int, int, int], set[int]] = {}
    for r, (log, _) in enumerate(sync):
        for ev in log:
            if ev[0] == REL:
                notified.setdefault((ev[2], ev[3], ev[4] // SIGNAL_LINE_CELLS), set()).add(r)
    out = set()
    for r, (log, meta) in enumerate(sync):
        for ev, (site, _) in zip(log, meta, strict=True):
            if ev[0] != REL or not ev[6] or not 0 <= site < len(sites):
                continue
            line = ev[4] // SIGNAL_LINE_CELLS
            others = notified.get((ev[2], ev[3], line), set()) - {r}
            if others:
                what = "tensor.write" if sites[site].op is Op.TENSOR_WRITE else "Set notify"
                out.add(f"note: the {what} at {sites[site].where} stores into 64-byte line {line} of rank {ev[2]}'s "
                        f"signal '{buffers[ev[3]].name}', which rank(s) {', '.join(map(str, sorted(others)))} also "
                        "notify: on the device its write-back rewrites the whole line and can restore a neighbour's "
                        "old value (pto-isa#322)")
    return out


def _epoch_of(w: _Wire) -> tuple[int, int]:
    return w[8]


def _order(w: _Wire) -> tuple[float, int]:
    """Which side of a report comes first: the earlier access, then the lower rank."""
    return (w[7], w[0])


def _same_origin(buf: Buffer, target: int, ps: list[_Wire], found: dict[tuple[Any, ...], RaceReport]) -> None:
    """A rank's put into ``target``'s window followed by its own read of the same elements with no
    release of that rank between them (its own clock entry unchanged): puts land in order, and a
    notify flushes them, but nothing completes a put before a later get or remote_load. "Followed"
    is the epoch's order, (segment, turn): a read of the write's own turn came before it. In fenced
    mode (a write is an interval) only a completion (fence, join, call end) between them orders them."""
    p = ps[0][0]
    by_entry: dict[int, list[_Wire]] = {}
    spans = [w for w in ps if len(w) > 9 and w[2] != READ]
    if spans:
        _same_origin_fenced(buf, target, spans, [w for w in ps if w[2] == READ], found)
    for w in ps:
        if w[2] != ATOMIC and len(w) <= 9:
            by_entry.setdefault(w[3][p], []).append(w)
    for group in by_entry.values():
        writes = [w for w in group if w[2] == WRITE]
        for b in group:
            if b[2] != READ:
                continue
            for a in writes:
                if a[8] >= b[8]:
                    continue  # the read came first: within a turn every remote read precedes every remote write
                common = overlap(a[4], b[4])
                if common is not None:
                    _add(found, buf, target, (buf.index, "same-origin", p, a[5], b[5]), common, a, b)


def _same_origin_fenced(buf: Buffer, target: int, writes: list[_Wire], reads: list[_Wire],
                        found: dict[tuple[Any, ...], RaceReport]) -> None:
    """Fenced mode: a remote write and the same rank's later remote read of it, no completion between
    (the read's turn is after the write's and before the turn its completion started)."""
    for a in writes:
        lo, hi = a[8][1], a[9][1][1]
        for b in reads:
            if lo < b[8][1] < hi:
                common = overlap(a[4], b[4])
                if common is not None:
                    _add(found, buf, target, (buf.index, "same-origin", a[0], a[5], b[5]), common, a, b,
                         (MISSING_FENCE, ""))


def _add(found: dict[tuple[Any, ...], RaceReport], buf: Buffer, target: int, key: tuple[Any, ...],
         common: tuple[int, int, int], first: _Wire, second: _Wire, why: tuple[str, ...] = ()) -> None:
    """Count a conflict under ``key``: a new report, or one more of an existing one. ``why``: the
    report's kind and its extra sites (fenced mode), empty for a plain race."""
    old = found.get(key)
    if old is not None:
        found[key] = replace(old, count=old.count + 1)
        return
    found[key] = RaceReport(
        buf.name, buf.shape, target, common[0], common[1], common[2],
        RaceAccess(first[0], first[2], first[5], first[6], first[7]),
        RaceAccess(second[0], second[2], second[5], second[6], second[7]),
        reason=why[0] if why else "", via=tuple(why[1:]), group=buf.group,
    )


def _hi(w: _Wire) -> tuple[int, ...]:
    """The clock at the end of a record's interval (its completion; a point: its clock)."""
    return w[9][0] if len(w) > 9 else w[3]


def _explain(a: _Wire, b: _Wire) -> tuple[tuple[str, ...], _Wire, _Wire] | None:
    """Why two unordered records conflict when one is an interval (fenced mode): a write that would
    be ordered before the other access had it completed at its issue (``missing fence``: the release
    it was still pending at), or a read that would be ordered after the write had its line been filled
    at the read (``missing cacheinvalid``: the fill and the wait after it). None: a plain race."""
    for x, y in ((a, b), (b, a)):
        r = x[0]
        if len(x) > 9 and x[9][2][0] == "flight":
            if y[2] != READ and x[3][r] <= y[3][r] < _hi(x)[r]:
                # y is ordered after a release issued while the read was in flight, not after its completion
                named = [where for own, where, _ in x[9][2][1] if own <= y[3][r]]
                return (READ_IN_FLIGHT, named[-1] if named else ""), x, y
            continue
        y_end = _hi(y)[r]
        if x[2] == READ or x[3][r] > y_end:  # completed at its issue, x would still not come before y
            continue
        if len(x) > 9 and _hi(x)[r] > y_end:
            # The release y is ordered after: the last one of x's rank whose clock y knows.
            named = [(where, cached) for own, where, cached in x[9][2][1] if own <= y_end]
            where, cached = named[-1] if named else ("", False)
            return (MISSING_FENCE, where, "cached" if cached else ""), x, y
        if len(y) > 9 and y[2] == READ and y[9][2][0] == "fill":
            _, filler, waits = y[9][2]
            wait = next((w for vc, w in waits if vc[r] >= _hi(x)[r]), "")
            return (MISSING_INVALIDATE, filler, wait), x, y
    return None


def _pair(buf: Buffer, target: int, p: int, ps: list[_Wire], q: int, qs: list[_Wire],
          found: dict[tuple[Any, ...], RaceReport]) -> None:
    """Conflicts between rank p's and rank q's records (each list in its rank's time order). A record
    is an interval from its clock to ``_hi`` (fenced mode; else a point): x happens before y iff x's
    end is known to y's start. q's points are bisected (their clocks grow in time order), q's
    intervals (fenced mode's pending writes and stale reads) are checked one by one."""
    points = [w for w in qs if len(w) <= 9 or w[9][0] == w[3]]
    spans = [w for w in qs if len(w) > 9 and w[9][0] != w[3]] if len(points) < len(qs) else []
    q_own = [w[3][q] for w in points]  # q's clock at each of its records: b -> a iff b.vc[q] <= a.vc[q]
    q_of_p = [w[3][p] for w in points]  # what q knew of p: a -> b iff a.vc[p] <= b.vc[p]
    for a in ps:
        a_end = _hi(a)[p]
        lo = bisect_right(q_own, a[3][q])
        hi = bisect_left(q_of_p, a_end)
        for b in points[lo:hi]:
            _conflict(buf, target, a, b, found)
        for b in spans:
            if _hi(b)[q] > a[3][q] and a_end > b[3][p]:
                _conflict(buf, target, a, b, found)


def _conflict(buf: Buffer, target: int, a: _Wire, b: _Wire, found: dict[tuple[Any, ...], RaceReport]) -> None:
    """Report two unordered records if they overlap and at least one writes (not two atomics)."""
    if a[2] == b[2] and a[2] != WRITE:  # read/read, atomic/atomic
        return
    common = overlap(a[4], b[4])
    if common is None:
        return
    key = (buf.index, *sorted(((a[0], a[5], a[2]), (b[0], b[5], b[2]))))
    told = _explain(a, b) if len(a) > 9 or len(b) > 9 else None
    if told is not None:
        why, first, second = told
        _add(found, buf, target, key, common, first, second, why)
        return
    first, second = (a, b) if _order(a) <= _order(b) else (b, a)
    _add(found, buf, target, key, common, first, second)


__all__ = [
    "ATOMIC",
    "CHECKPOINT_ROUNDS",
    "LOST_UPDATE",
    "MISSING_FENCE",
    "MISSING_INVALIDATE",
    "READ",
    "READ_IN_FLIGHT",
    "SET",
    "WRITE",
    "RaceAccess",
    "RaceCheckTimeout",
    "RaceDetector",
    "RaceReport",
    "find_races",
    "lost_updates",
]
