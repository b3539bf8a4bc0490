"""Happens-before race detection on RMA windows (``RuntimeOptions(race_detect=True)``).

Why: a sequentially consistent emulator hides most reuse bugs, because the bytes usually happen to
arrive in time. A race detector does not wait for wrong data: it flags two accesses to the same
window elements that nothing orders, whichever won this time.

**Clocks.** Every rank keeps a vector clock ``VC`` (one entry per rank). Signals are the only
synchronisation the programs have, so they carry the clocks:

* ``notify`` is a *release*. Before its atomic is issued, the notifier records its VC in the
  *shadow* of the target cell (hosted by the target rank in one MPI window; see ``ShadowClocks``):
  an entry in the cell's history for this notifier, with how much it has added to the cell in total.
  The entry is complete at the target before the notify's atomic can be observed. Then the notifier
  increments its own entry. ``tensor.write`` of a signal cell (a local atomic Set) is a release into
  this rank's own cell.
* a satisfied ``wait`` is an *acquire* of what the wait needed: the cell to reach ``expected``. For
  a counter with one remote writer (every cell of the credit protocol) the waiter knows what it
  added itself, hence how much the writer must have added, and acquires exactly the writer's release
  that got there (``ShadowClocks.acquire_exact``), not a later one that may already be in the
  counter: a fast peer's next-call credit does not order what the peer did after this call's credit.
  Anything else falls back to the coarse clock.
* ``tensor.read`` of a signal cell is an acquire too, of the value it read. Decision: programs
  branch on such reads (or use them to retire what peers published, as all_to_all_v does with
  recv_counts), and a program that reads a count a peer published with release semantics is
  entitled to the data published before it; treating the read as relaxed would report races the
  hardware's acquire fence prevents. A speculative read may thus order more than the program relies
  on: that can hide a race, never invent one.
* ``join`` (all ranks, e.g. an MPI barrier of the harness, and every ``check``) sets every VC to the
  element-wise maximum: whatever happened before the join happens before whatever follows it.

What the fallback costs: the coarse clock (every source's latest release) holds every release into
the cell, including ones whose atomic has not landed yet, so a coarse acquire may order more than
the wait saw (a false negative, never a false report). The exact acquire is what makes reuse races show in every call rather than
only in the calls whose interleaving happens to expose them.

**Records.** Every access to a data window is recorded by the accessing rank: (target rank, buffer,
read / write / atomic write, flat element intervals ``[start, stop)`` of the packed buffer, VC, call
site, call number). Puts, atomic puts, gets, ``remote_load`` (their regions decoded by the one transfer planner,
``transfer.py``, as the handlers decode them), and ``tile.load`` / ``tile.store`` /
``tensor.read`` / ``tensor.write`` on the rank's own windows all count; signal windows are
synchronisation, not data, and are left out. Accesses with the same VC (no notify or wait between
them) to the same target, buffer, kind and site are one record whose intervals are merged, so a
record costs one dict lookup and memory grows with synchronisation epochs, not with bytes.
Harnesses record their own host-side accesses with :meth:`RaceDetector.host_access` (writing a
rank's inputs into its window, consuming its result).

**Checkpoint.** :meth:`RaceDetector.check` is collective and meant for the points where a harness
synchronises all ranks anyway (between iteration blocks, at the end). Its exchanges are bounded
(``pldemu.mpi.BoundedComm``: a rank that never arrives raises RaceCheckTimeout). The ranks exchange their
records so that each target rank checks the accesses to its own windows, gather the reports
everywhere, join their clocks and drop the records (everything recorded so far happens before
everything after the join, so nothing later can race with it). Two records conflict when they are on
the same target and buffer, from different ranks, overlap, at least one writes (two atomic puts do
not conflict) and neither VC is <= the other. Per pair of ranks the concurrent records of the other
rank form a contiguous range of its (time-ordered) records, found by bisection, so checking costs
about the number of records plus the number of concurrent pairs.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu import windows
from pldemu.ir import BufferKind, NotifyOp, Op
from pldemu.mpi import BoundedComm
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import CallSite, OpEvent
from pldemu.runtime.transfer import Region, plan_get, plan_put, remote_load_extent
from pldemu.runtime.values import Buffer, Shape, TensorRef, flat_cell

READ, WRITE, ATOMIC = 0, 1, 2
"""Access kinds. Two atomic writes (element-wise MPI accumulates) do not conflict with each other."""

KIND_NAMES = ("read", "write", "atomic write")

MAX_RUNS = 4096
"""A region with more contiguous runs than this is recorded as its bounding interval (a strided
access touching thousands of runs; collectives never make one). That over-approximates: documented
as a possible false positive for such programs."""

MERGE_AT = 64
"""Merge a record's interval list once it holds this many entries (bounded memory in loops)."""

MAX_REPORTS = 200
"""Distinct reports kept per check (a broken recipe repeats the same race every call)."""

DEFAULT_TIMEOUT = 120.0
"""Seconds the checkpoint's MPI exchanges may take before ``RaceCheckTimeout``."""

Interval = tuple[int, int]
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

    def region_text(self) -> str:
        """``target[0, 16:32]``-style text of the first overlapping interval (flat if not a box row)."""
        return _flat_text(self.buffer, self.shape, self.start, self.stop)

    def describe(self) -> str:
        more = f" ({self.count} times)" if self.count > 1 else ""
        return (f"race on {self.region_text()} of rank {self.target} ({self.overlap} elements){more}: "
                f"{self.first.describe()} || {self.second.describe()}: neither happens before the other")


def _flat_text(name: str, shape: Shape, start: int, stop: int) -> str:
    if not shape or stop <= start:
        return f"{name}[flat {start}:{stop}]"
    a, b = _unravel(start, shape), _unravel(stop - 1, shape)
    if a[:-1] == b[:-1]:
        lead = "".join(f"{i}, " for i in a[:-1])
        return f"{name}[{lead}{a[-1]}:{b[-1] + 1}]"
    return f"{name}[{', '.join(map(str, a))}] .. {name}[{', '.join(map(str, b))}]"


def _unravel(flat: int, shape: Shape) -> tuple[int, ...]:
    out: list[int] = []
    for n in reversed(shape):
        flat, i = divmod(flat, max(n, 1))
        out.append(i)
    return tuple(reversed(out))


# ---------------------------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------------------------


def region_intervals(view: Shape, offsets: Shape, extent: Shape) -> list[Interval]:
    """Flat element intervals (sorted, disjoint) of the region ``offsets``/``extent`` of a packed
    buffer viewed with ``view``. The trailing dims the region spans fully make one contiguous run;
    the leading dims enumerate the runs."""
    n = len(view)
    if n == 0:
        return [(0, 1)]
    if 0 in extent:
        return []
    strides = [1] * n
    for i in range(n - 2, -1, -1):
        strides[i] = strides[i + 1] * view[i + 1]
    j = n - 1
    while j > 0 and extent[j] == view[j]:
        j -= 1
    run = extent[j] * strides[j]
    base = sum(o * s for o, s in zip(offsets, strides, strict=True))
    outer = [(extent[d], strides[d]) for d in range(j) if extent[d] != 1]
    if not outer:
        return [(base, base + run)]
    if math.prod(e for e, _ in outer) > MAX_RUNS:
        return [(base, base + sum((e - 1) * s for e, s in outer) + run)]
    starts = [base]
    for e, s in outer:
        starts = [st + i * s for st in starts for i in range(e)]
    return merge_intervals([(st, st + run) for st in starts])


def merge_intervals(ivs: Sequence[Interval]) -> list[Interval]:
    """Sorted, disjoint, adjacent runs joined."""
    out: list[Interval] = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def overlap(a: Sequence[Interval], b: Sequence[Interval]) -> tuple[int, int, int] | None:
    """First common interval of two sorted disjoint interval lists and the total common length."""
    i = j = 0
    first: tuple[int, int] | None = None
    total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            if first is None:
                first = (lo, hi)
            total += hi - lo
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return None if first is None else (first[0], first[1], total)


def _whole(buf: Buffer) -> list[Interval]:
    return [(0, buf.numel)] if buf.numel else []


def _data_window(t: Any) -> Buffer | None:
    """The buffer of a tensor value if it is a data window (not a signal, not rank-local)."""
    if isinstance(t, TensorRef):
        b = t.buffer
        if b.window is not None and b.kind is not BufferKind.SIGNAL:
            return b
    return None


# ---------------------------------------------------------------------------------------------
# Shadow clocks
# ---------------------------------------------------------------------------------------------


HISTORY = 8
"""Releases remembered per (cell, source rank) for the exact acquire (see ``ShadowClocks``)."""


class ShadowClocks:
    """The synchronisation shadow of every signal cell, hosted by the cell's owner in one window.
    Collective to build.

    Per cell and per source rank: a header ``[count, irregular]`` and a ring of that source's last
    ``HISTORY`` releases into the cell, each ``[cumsum, vc...]``, where ``cumsum`` is everything the
    source has added to the cell so far (the source knows it without reading the cell) and
    ``irregular`` says it once Set the cell or added a negative value. Only the source writes its
    part, so a release needs no read-modify-write: it stores its entry, then (ordered after it) the
    header, and both are complete before the notify's atomic can be observed. A rank's releases into
    its own cells are not stored: it knows them.

    * :meth:`acquire` (coarse): the element-wise maximum of every source's latest entry, which is
      every release into the cell so far (a source's clocks only grow).
    * :meth:`acquire_exact`: for a counter with one remote writer (every cell of the credit protocol:
      a mesh cell counts one rank's credits, a ring cell one column's, and the owner retires its own),
      the awaited value minus what the owner added itself says how much the writer must have added;
      the first history entry whose ``cumsum`` reaches it is the release to acquire, not a later one
      that may already be in the counter (a fast peer's next-call credit). Anything else (several
      remote writers, an irregular one, an entry overwritten by a writer ``HISTORY`` releases ahead)
      is None: the caller falls back to the coarse clock, which orders at least as much.

    The shadow is an INT64 window of ``pldemu.windows`` (``race.shadow``, on the instance's back end),
    written with ``Window.store_words`` and read with ``Window.load_words``: word-atomic accesses
    (``shared``: aligned stores and loads between memory barriers, no MPI accumulate, which costs
    milliseconds on an oversubscribed node; ``rma``: ``MPI_Accumulate(MPI_REPLACE)`` and
    ``MPI_Get_accumulate(MPI_NO_OP)``, flushed). A reader detects an entry overwritten while it read it by
    re-reading the header afterwards: entry ``k`` is intact iff that count is below ``k + HISTORY``,
    because a source only starts overwriting entry ``k`` after publishing count ``k + HISTORY``.
    """

    def __init__(self, comm: MPI.Intracomm, buffers: Sequence[Buffer], backend: str = "rma") -> None:
        self.nranks = nr = comm.Get_size()
        self.rank = comm.Get_rank()
        self._entry = 1 + nr
        self._src = 2 + HISTORY * self._entry
        self._block = nr * self._src
        self._base: dict[int, int] = {}
        total = 0
        for b in buffers:
            if b.kind is BufferKind.SIGNAL:
                self._base[b.index] = total
                total += b.numel * self._block
        self._win: windows.Window | None = windows.allocate_window(
            comm, "race.shadow", max(total, 1), np.int64, backend=backend, fill=0)

    def hosts(self, buffer: int) -> bool:
        """True if ``buffer`` (an index) is a signal buffer with shadow clocks."""
        return buffer in self._base

    def release(self, peer: int, buffer: int, cell: int, vc: Sequence[int], seq: int, cumsum: int,
                regular: bool) -> None:
        """Record this rank's release number ``seq`` into ``peer``'s cell (``peer`` is not this rank):
        its clock ``vc`` and ``cumsum``, everything this rank has added to the cell so far; ``regular``
        False once this rank ever Set the cell or added a negative value. Complete on return."""
        win = self._live()
        src = self._base[buffer] + cell * self._block + self.rank * self._src
        slot = src + 2 + (seq % HISTORY) * self._entry
        # The entry is complete at the target before the header that announces it is written.
        win.store_words(peer, slot, np.array([cumsum, *vc], dtype=np.int64))
        win.store_words(peer, src, np.array([seq + 1, 0 if regular else 1], dtype=np.int64))

    def acquire(self, buffer: int, cell: int) -> list[int]:
        """The coarse clock of this rank's cell: every release into it so far."""
        nr, h, e, size = self.nranks, HISTORY, self._entry, self._src
        at = self._base[buffer] + cell * self._block
        out = [0] * nr
        for _ in range(1000):
            block = self._read(at, self._block)
            torn = False
            for s in range(nr):
                count = int(block[s * size])
                if s == self.rank or count == 0:
                    continue
                if int(self._read(at + s * size, 1)[0]) >= count - 1 + h:
                    torn = True  # the source ran HISTORY releases ahead while we read: read again
                    break
                k = (count - 1) % h
                entry = block[s * size + 2 + k * e : s * size + 2 + (k + 1) * e]
                out = [max(a, int(b)) for a, b in zip(out, entry[1:], strict=True)]
            if not torn:
                return out
        raise RuntimeError("race detector: a shadow clock kept changing under its reader")

    def acquire_exact(self, buffer: int, cell: int, needed: int) -> list[int] | None:
        """The clock of the release that brought the remote writer's contribution to this rank's cell
        up to ``needed``; ``[]`` when nothing remote is needed; None when that cannot be told (the
        caller falls back to :meth:`acquire`)."""
        if needed <= 0:
            return []
        nr, me, h, e, size = self.nranks, self.rank, HISTORY, self._entry, self._src
        at = self._base[buffer] + cell * self._block
        block = self._read(at, self._block)
        writers = [s for s in range(nr) if s != me and block[s * size] > 0]
        if len(writers) != 1:
            return None
        src = writers[0] * size
        count, irregular = int(block[src]), int(block[src + 1])
        if irregular:
            return None
        after = int(self._read(at + src, 1)[0])  # re-read: which entries were not overwritten meanwhile
        lo = max(0, after - h + 1)
        prev: int | None = None
        for k in range(lo, count):
            entry = block[src + 2 + (k % h) * e : src + 2 + (k % h + 1) * e]
            cumsum = int(entry[0])
            if prev is not None and cumsum < prev:
                return None  # not a monotone counter after all
            if cumsum >= needed:
                if k > lo or k == 0:  # entry k - 1 (if any) is in the window and did not reach it
                    return [int(v) for v in entry[1:]]
                return None  # the oldest entry left already reaches it: an overwritten one might have
            prev = cumsum
        return None

    def _read(self, at: int, count: int) -> np.ndarray:
        return self._live().load_words(self.rank, at, count)

    def _live(self) -> windows.Window:
        win = self._win
        assert win is not None, "shadow clocks used after free"
        return win

    def free(self) -> None:
        """Collective; idempotent."""
        win, self._win = self._win, None
        if win is not None:
            win.free()


def _checkpoint_timeout(what: str) -> RaceCheckTimeout:
    return RaceCheckTimeout(f"race check: {what} did not complete (a rank did not reach the checkpoint)")


# ---------------------------------------------------------------------------------------------
# The detector
# ---------------------------------------------------------------------------------------------

# A record as exchanged: (rank, buffer, kind, vc, intervals, location, call, t, epoch). The epoch
# counts the accessing rank's clock changes: it orders that rank's records in time.
_Wire = tuple[int, int, int, tuple[int, ...], list[Interval], str, int, float, int]


class RaceDetector(MonitorBase):
    """This rank's vector clock, shadow clocks and access log; a monitor of the instance's program.

    Built collectively by ``ProgramInstance`` when ``RuntimeOptions.race_detect`` is set (available as
    ``inst.races``). Harnesses call :meth:`host_access` for their own window accesses, :meth:`join`
    at their own all-rank barriers, and :meth:`check` (collective) to get the reports.
    """

    def __init__(self, comm: MPI.Intracomm, buffers: Sequence[Buffer], sites: list[CallSite],
                 clock: Clock | None = None, timeout: float = DEFAULT_TIMEOUT, backend: str = "rma") -> None:
        # Our exchanges never match the program's or the harness's messages.
        self._comm: MPI.Intracomm = comm.Dup()
        self._bounded = BoundedComm(self._comm, timeout, _checkpoint_timeout)
        self._freed = False
        self.rank = comm.Get_rank()
        self.nranks = comm.Get_size()
        self.timeout = timeout
        self._buffers = list(buffers)
        self._by_name = {b.name: b for b in buffers}
        self._sites = sites
        self._clock: Clock = clock if clock is not None else _wtime_us
        self._shadow = ShadowClocks(self._comm, buffers, backend)
        # My own entry starts at 1: an access must never look ordered before another rank's merely
        # because neither rank has released anything yet (0 <= 0).
        self._vc = [0] * self.nranks
        self._vc[self.rank] = 1
        self._snap: tuple[int, ...] = tuple(self._vc)
        self._epoch = 0
        self._run = 0
        self._log: dict[tuple[int, int, int, int, int, int | str], list[Any]] = {}
        self._sent: dict[tuple[int, int, int], list[int]] = {}
        self.exact_acquires = 0
        """Acquires that found the release that satisfied them in the cell's history."""
        self.coarse_acquires = 0
        """Acquires that took every release into the cell (the history could not tell)."""
        self.on_reports: Callable[[list[RaceReport]], None] | None = None
        """Called on every rank with each checkpoint's reports (the tracer draws them)."""
        self.total_reports = 0
        """Reports found so far over all checkpoints."""
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

    # -- clocks --------------------------------------------------------------------------------

    @property
    def vc(self) -> tuple[int, ...]:
        """This rank's vector clock now."""
        return self._snap

    def _changed(self) -> None:
        self._snap = tuple(self._vc)
        self._epoch += 1

    def _release(self, peer: int, buffer: int, cell: int, value: int, is_set: bool) -> None:
        # What this rank has added to that cell so far: [releases, cumulative sum, regular counter].
        st = self._sent.get((peer, buffer, cell))
        if st is None:
            st = self._sent[(peer, buffer, cell)] = [0, 0, 1]
        if is_set:
            st[1], st[2] = value, 0
        else:
            st[1] += value
            if value < 0 and peer != self.rank:
                st[2] = 0  # a remote writer that subtracts: not a plain counter
        seq = st[0]
        st[0] += 1
        # My own notifies to my own cells need no shadow: I know them (see _needed), and my clock
        # already covers everything I did.
        if peer != self.rank:
            self._shadow.release(peer, buffer, cell, self._vc, seq, st[1], bool(st[2]))
        self._vc[self.rank] += 1
        self._changed()

    def _needed(self, buffer: int, cell: int, value: int) -> int | None:
        """How much the remote writers must have added to my cell for it to hold ``value``: ``value``
        minus what I added myself (None if I ever Set it: no arithmetic then)."""
        own = self._sent.get((self.rank, buffer, cell))
        needed = value if own is None else value - own[1] if own[2] else None
        # The cell is an INT32 that wraps; beyond that range the arithmetic no longer tells.
        return needed if needed is not None and -(2**31) <= needed < 2**31 else None

    def _acquire(self, buffer: int, cell: int, value: int | None = None) -> None:
        """Acquire what made my cell reach ``value`` (exactly when the history tells, else every
        release into the cell so far)."""
        shadow: list[int] | None = None
        if value is not None:
            needed = self._needed(buffer, cell, value)
            if needed is not None:
                shadow = self._shadow.acquire_exact(buffer, cell, needed)
                self.exact_acquires += shadow is not None
        if shadow is None:
            shadow = self._shadow.acquire(buffer, cell)
            self.coarse_acquires += 1
        if not shadow:
            return
        vc = self._vc
        if any(s > v for s, v in zip(shadow, vc, strict=True)):
            self._vc = [max(s, v) for s, v in zip(shadow, vc, strict=True)]
            self._changed()

    def join(self, comm: MPI.Intracomm | None = None) -> None:
        """Collective: every rank's VC becomes the element-wise maximum (model an all-rank barrier of
        the caller: everything before it happens before everything after it)."""
        out = self._bounded.allreduce(np.array(self._vc, dtype=np.int64), MPI.MAX, "the clock join")
        self._vc = [int(v) for v in out]
        self._vc[self.rank] += 1
        self._changed()

    # -- monitor -------------------------------------------------------------------------------

    def wants(self, op: Op) -> bool:
        return op is Op.NOTIFY or op in self._after

    def run_started(self, run: int) -> None:
        self._run = run

    def before(self, event: OpEvent) -> None:
        op = event.op
        if op is Op.NOTIFY:
            sig, peer = event.args[0], event.args[1]
            cell = self._cell(sig, event.args[2], peer)
            if cell is not None:
                self._release(operator.index(peer), sig.buffer.index, cell, _int32(event.args[3]),
                              event.site.attrs["op"] is NotifyOp.Set)
        elif op is Op.TENSOR_WRITE:
            t = event.args[0]
            if isinstance(t, TensorRef) and t.buffer.kind is BufferKind.SIGNAL:
                cell = self._cell(t, event.args[1], self.rank)
                if cell is not None:
                    self._release(self.rank, t.buffer.index, cell, _int32(event.args[2]), True)

    def after(self, event: OpEvent, result: Any) -> None:
        if event.op is Op.TENSOR_READ:
            self._tensor_read(event.site, event.args, result)
            return
        fn = self._after.get(event.op)
        if fn is not None:
            fn(event.site, event.args)

    def _cell(self, sig: Any, index: Any, peer: Any) -> int | None:
        """The flat cell a signal op addresses, or None when the handler is about to refuse it."""
        if not isinstance(sig, TensorRef) or not self._shadow.hosts(sig.buffer.index):
            return None
        try:
            p = operator.index(peer)
            if not 0 <= p < self.nranks:
                return None
            return flat_cell("race", self.rank, p, sig, tuple(index))
        except Exception:  # the handler raises the proper error itself
            return None

    # -- recording -----------------------------------------------------------------------------

    def _record(self, target: int, buf: Buffer, kind: int, site: int | str, ivs: list[Interval]) -> None:
        if not ivs:
            return
        key = (self._epoch, self._run, target, buf.index, kind, site)
        rec = self._log.get(key)
        if rec is None:
            self._log[key] = [self._snap, self._clock(), ivs]
            return
        have: list[Interval] = rec[2]
        have.extend(ivs)
        if len(have) >= MERGE_AT:
            rec[2] = merge_intervals(have)

    def host_access(self, name: str, write: bool, where: str = "harness", *,
                    offsets: Shape | None = None, extent: Shape | None = None) -> None:
        """Record a host-side access by this rank to its own window ``name`` (whole buffer unless a
        region of the declared shape is given): a harness writing inputs (``write=True``) or
        consuming a result. Rank-local and signal buffers are ignored."""
        buf = self._by_name[name]
        if buf.window is None or buf.kind is BufferKind.SIGNAL:
            return
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
            self._record_region(self.rank, plan.src, READ, site.id)
        self._record_region(plan.peer, plan.dst, ATOMIC if site.attrs["atomic"] else WRITE, site.id)

    def _get(self, site: CallSite, args: tuple[Any, ...]) -> None:
        plan = plan_get(self.rank, site, args)
        if plan is not None:
            self._record_region(plan.peer, plan.src, READ, site.id)
            self._record_region(self.rank, plan.dst, WRITE, site.id)

    def _record_region(self, target: int, side: Region, kind: int, site: int) -> None:
        """Record an access to one end of a transfer if it is a data window."""
        buf = _data_window(side.tensor)
        if buf is not None:
            self._record(target, buf, kind, site, region_intervals(side.tensor.shape, side.offsets, side.extent))

    def _remote_load(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is not None:
            self._record(args[1], buf, READ, site.id, region_intervals(t.shape, args[2], remote_load_extent(args)))

    def _wait(self, site: CallSite, args: tuple[Any, ...]) -> None:
        sig = args[0]
        cell = self._cell(sig, args[1], self.rank)
        if cell is not None:
            # The wait needed the cell to reach ``expected`` (Ge or Eq alike), whatever it read.
            self._acquire(sig.buffer.index, cell, operator.index(args[2]))

    def _tensor_read(self, site: CallSite, args: tuple[Any, ...], result: Any = None) -> None:
        t = args[0]
        if not isinstance(t, TensorRef) or t.buffer.window is None:
            return
        if t.buffer.kind is BufferKind.SIGNAL:
            cell = self._cell(t, args[1], self.rank)
            if cell is not None:
                self._acquire(t.buffer.index, cell, int(result) if isinstance(result, int) else None)
            return
        flat = flat_cell("race", self.rank, self.rank, t, args[1])
        self._record(self.rank, t.buffer, READ, site.id, [(flat, flat + 1)])

    def _tensor_write(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is not None:
            flat = flat_cell("race", self.rank, self.rank, t, args[1])
            self._record(self.rank, buf, WRITE, site.id, [(flat, flat + 1)])

    def _tile_load(self, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        buf = _data_window(t)
        if buf is not None:
            extent = args[3] if len(args) > 3 else args[2]
            self._record(self.rank, buf, READ, site.id, region_intervals(t.shape, args[1], extent))

    def _tile_store(self, site: CallSite, args: tuple[Any, ...]) -> None:
        tile, t = args[0], args[2]
        buf = _data_window(t)
        if buf is not None:
            self._record(self.rank, buf, WRITE, site.id, region_intervals(t.shape, args[1], tile.valid))

    @property
    def pending(self) -> int:
        """Records logged since the last checkpoint."""
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
        its own duplicate of the instance's communicator)."""
        outgoing: list[list[_Wire]] = [[] for _ in range(self.nranks)]
        for key, (vc, t, ivs) in self._log.items():
            epoch, run, target, buf, kind, site = key
            outgoing[target].append((self.rank, buf, kind, vc, merge_intervals(ivs), self._where(site), run, t,
                                     epoch))
        self._log.clear()
        incoming = self._bounded.alltoall(outgoing, "the record exchange")
        found = find_races(self.rank, self._buffers, [w for part in incoming for w in part])
        everyone = self._bounded.allgather(found, "the report exchange")
        reports = sorted((r for part in everyone for r in part),
                         key=lambda r: (r.target, r.buffer, r.start, r.first.rank, r.second.rank))
        self.join()
        self.total_reports += len(reports)
        if self.on_reports is not None and reports:
            self.on_reports(reports)
        return reports

    def free(self) -> None:
        """Free the shadow window and the private communicator (collective; idempotent)."""
        if self._freed:
            return
        self._freed = True
        self._shadow.free()
        self._comm.Free()


def _int32(value: Any) -> int:
    """A notify operand as the cell receives it (the windows layer wraps it to INT32)."""
    v = operator.index(value) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _wtime_us() -> float:
    return MPI.Wtime() * 1e6


def find_races(target: int, buffers: Sequence[Buffer], records: Sequence[_Wire]) -> list[RaceReport]:
    """The races among ``records`` (all accesses to rank ``target``'s windows since the last
    checkpoint, from every rank), deduplicated per (buffer, ranks, sites, kinds)."""
    by_buf: dict[int, dict[int, list[_Wire]]] = {}
    for w in records:
        by_buf.setdefault(w[1], {}).setdefault(w[0], []).append(w)
    found: dict[tuple[Any, ...], RaceReport] = {}
    for buf_index, per_rank in sorted(by_buf.items()):
        buf = buffers[buf_index]
        ranks = sorted(per_rank)
        for r in ranks:
            per_rank[r].sort(key=_epoch_of)  # each rank's records in its time order
        for i, p in enumerate(ranks):
            for q in ranks[i + 1 :]:
                _pair(buf, target, p, per_rank[p], q, per_rank[q], found)
    return list(found.values())[:MAX_REPORTS]


def _epoch_of(w: _Wire) -> int:
    return w[8]


def _order(w: _Wire) -> tuple[float, int]:
    """Which side of a report comes first: the earlier access, then the lower rank."""
    return (w[7], w[0])


def _pair(buf: Buffer, target: int, p: int, ps: list[_Wire], q: int, qs: list[_Wire],
          found: dict[tuple[Any, ...], RaceReport]) -> None:
    """Conflicts between rank p's and rank q's records (each list in its rank's time order)."""
    q_own = [w[3][q] for w in qs]  # q's clock at each of its records: b -> a iff b.vc[q] <= a.vc[q]
    q_of_p = [w[3][p] for w in qs]  # what q knew of p: a -> b iff a.vc[p] <= b.vc[p]
    for a in ps:
        lo = bisect_right(q_own, a[3][q])
        hi = bisect_left(q_of_p, a[3][p])
        for b in qs[lo:hi]:
            if a[2] == b[2] and a[2] != WRITE:  # read/read, atomic/atomic
                continue
            common = overlap(a[4], b[4])
            if common is None:
                continue
            first, second = (a, b) if _order(a) <= _order(b) else (b, a)
            key = (buf.index, *sorted(((a[0], a[5], a[2]), (b[0], b[5], b[2]))))
            old = found.get(key)
            if old is not None:
                found[key] = RaceReport(old.buffer, old.shape, old.target, old.start, old.stop, old.overlap,
                                        old.first, old.second, old.count + 1)
                continue
            found[key] = RaceReport(
                buf.name, buf.shape, target, common[0], common[1], common[2],
                RaceAccess(first[0], first[2], first[5], first[6], first[7]),
                RaceAccess(second[0], second[2], second[5], second[6], second[7]),
            )


__all__ = [
    "ATOMIC",
    "READ",
    "WRITE",
    "RaceAccess",
    "RaceCheckTimeout",
    "RaceDetector",
    "RaceReport",
    "ShadowClocks",
    "find_races",
    "merge_intervals",
    "overlap",
    "region_intervals",
]
