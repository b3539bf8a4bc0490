"""Adversarial schedules and deferred visibility: seeded, replayable perturbations of a run.

The ranks of an MPI job on one machine interleave in whatever way the OS scheduler likes, which is
usually kind: races stay hidden. The knobs of ``RuntimeOptions`` make it unkind, and make it unkind
the same way again for the same ``seed``:

**Schedule** (``jitter_us``, ``straggler``, ``skew_us``). Each rank owns a :class:`Schedule` whose
generators are seeded by ``(seed, rank, stream)`` (``numpy.random.SeedSequence``), one stream per
knob, so the n-th draw of a stream is a pure function of the seed, the rank and n, and turning one
knob on does not change another's draws. Before every primitive (``pld.tile.put``, ``pld.tile.get``,
``pld.tile.remote_load``, ``pld.system.notify``, ``pld.system.wait``) the rank sleeps
``jitter_us * U[0, 1)`` microseconds, plus ``us`` on the straggler rank ``straggler = (rank, us)``;
at the start of every call it sleeps ``skew_us * U[0, 1)`` (ranks enter calls out of step). The
delays are replayed exactly; what the OS makes of them is not, which is why a failing seed
reproduces its failure with high probability rather than always (``docs/races.md`` measures it).

**Visibility** (``visibility="deferred"``). The model, per rank:

* A ``pld.tile.put`` into a data window, and a store into a data window (``tile.store``,
  ``tensor.write``, the destination write of ``pld.tile.get``), does not touch memory when it
  executes: it is appended, with a snapshot of its data, to this rank's FIFO *write buffer*.
* The buffer drains *in order*. Everything in it lands before this rank's next ``notify`` on any
  signal (the release point: the fence pypto's InsertCommFence puts between a put and a notify),
  and before a ``tensor.write`` into a signal cell (also a release). Otherwise each entry lands at a
  seeded random later point: it is given a due count, uniform in 1..``VISIBILITY_SPAN``
  primitives of this rank later (never earlier than the entry before it), and lands when this rank
  has executed that many more primitives. A call's end is *not* a release point: an entry can stay
  pending into the host code and the next call, until a release, its due point, or a harness-level
  synchronisation (``Schedule.host_sync``: the harness's MPI barriers, after which the host may
  assume every kernel write before it is visible).
* Read-your-writes: a read by this rank of its *own* window (``tile.load``, ``tensor.read``,
  ``remote_load``/``get`` with ``peer == me``, the source of a put) first lands every buffered
  write aimed at this rank (in their order), so a rank always sees its own stores; so does the host
  before it writes inputs or consumes results (``Schedule.host_access``). Writes aimed at peers stay
  buffered: order is kept per target, not between targets (nothing orders a put to one peer against
  a put to another without a release). A store that has landed in a rank's own window is in its
  memory, which peers read too: there is no private copy.
* ``remote_load``/``get`` from a peer read whatever is in the peer's memory now: possibly the value
  from before a write the peer has issued but not released.
* Signal cells are synchronisation and change only through atomics (``notify``, and a
  ``tensor.write`` of a signal cell); those, and element-wise atomic puts (``atomic=Add``), are
  never deferred, so a wait can never block on a buffered write and deferral cannot cause a
  deadlock by itself.

A correct recipe releases (notifies) after its puts and stores and before any peer may read them,
so it passes in deferred mode; a recipe that relies on a write landing in time without a release
in between fails.

The deferred handlers (:func:`deferred_handlers`) wrap the plain or invariant-checking ones; a
put or get is decoded by the one transfer planner (``transfer.py``) exactly as the eager handler
decodes it, and a deferred put is refused at issue time by the window's own checks
(``Window.check_put``), so it fails where the program put, with the eager mode's message.

**Zero cost when off.** Nothing here runs unless a knob is set: :func:`prepare` fills
``Machine.overrides`` at prepare time, and the compiler picks the handler per call site once.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pldemu.ir import BufferKind, Op
from pldemu.mpi import precise_sleep
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.sites import CallSite
from pldemu.runtime.transfer import plan_get, plan_put
from pldemu.runtime.values import Shape, TensorRef, Tile, prefix, region
from pldemu.windows import Window

if TYPE_CHECKING:
    pass

PRIMITIVES = (Op.PUT, Op.GET, Op.REMOTE_LOAD, Op.NOTIFY, Op.WAIT)
"""The ops a jitter / straggler delay precedes, and the ops that count toward a due point."""

VISIBILITY_SPAN = 16
"""A deferred write lands at most this many primitives of its rank after it was issued (unless a
release or a read of the rank's own window drains it earlier)."""

_BATCH = 256
"""Uniform draws made at once per stream (a numpy call per draw would cost more than the op)."""

STREAM_JITTER, STREAM_SKEW, STREAM_VISIBILITY = 0, 1, 2
"""Generator stream per knob: enabling one knob leaves the others' draws unchanged."""


def schedule_active(options: RuntimeOptions) -> bool:
    """True if ``options`` asks for any perturbation or invariant check (i.e. :func:`prepare` matters)."""
    return bool(options.jitter_us or options.straggler is not None or options.skew_us
                or options.visibility != "eager" or options.invariants)


NO_PERTURBATION = "no perturbation"


def describe_schedule(options: RuntimeOptions) -> str:
    """The perturbations ``options`` asks for, as a short phrase (:data:`NO_PERTURBATION` if none)."""
    parts = []
    if options.jitter_us:
        parts.append(f"jitter {options.jitter_us:g} us")
    if options.straggler is not None:
        parts.append(f"straggler {options.straggler[0]}:{options.straggler[1]:g} us")
    if options.skew_us:
        parts.append(f"skew {options.skew_us:g} us")
    if options.visibility != "eager":
        parts.append(f"visibility {options.visibility}")
    return ", ".join(parts) if parts else NO_PERTURBATION


class Stream:
    """Uniform [0, 1) draws from the generator seeded by ``(seed, rank, stream)``, drawn in batches."""

    def __init__(self, seed: int, rank: int, stream: int) -> None:
        # SeedSequence needs non-negative entropy words: fold any Python int into 64 bits.
        entropy = [seed % (1 << 64), rank, stream]
        self._rng = np.random.default_rng(np.random.SeedSequence(entropy))
        self._buf: list[float] = []
        self._i = 0

    def next(self) -> float:
        """The next draw."""
        i = self._i
        if i >= len(self._buf):
            self._buf = self._rng.random(_BATCH).tolist()
            i = 0
        self._i = i + 1
        return self._buf[i]


NEVER_DUE = 1 << 62
"""The due point of a write that lands only at a release (fenced mode's ``latest`` policy)."""


class WriteBack(Protocol):
    """What the schedule asks of fenced mode's line cache (``pldemu.runtime.instrument.fenced``)."""

    def write_back(self) -> None:
        """Write every dirty line back to memory."""

    def tail_flush(self) -> None:
        """The call's end: every dirty line cleaned into the write buffer, every line dropped."""


class Completing(Protocol):
    """What the schedule asks of fenced mode's reads in flight (``pldemu.runtime.instrument.flight``)."""

    def complete(self) -> None:
        """Every read in flight has its bytes."""


class Reading(Protocol):
    """What the deferred handlers ask of fenced mode's reads in flight (``flight.Flight``)."""

    def issue(self, dest: np.ndarray, again: Callable[[], np.ndarray], key: Any = None, keep: object = None) -> Any:
        """A read whose issue's bytes are in ``dest``; ``again()`` reads its source now."""

    def settle(self, r: Any) -> None:
        """Read ``r`` completes now (if it has not yet)."""


class WriteBuffer:
    """One rank's FIFO of writes not yet visible (deferred visibility; see the module docstring).

    ``span``: an entry lands at most that many primitives after it was issued; None: only at a
    release (``flush``) or a read of this rank's own window (fenced mode, ``latest`` policy)."""

    def __init__(self, rank: int, stream: Stream, span: int | None = VISIBILITY_SPAN) -> None:
        self.rank = rank
        self._stream = stream
        self._span = span
        self._q: list[tuple[int, int, Callable[[], Any], int]] = []  # (target, due, apply, serial)
        self._serial = 0
        self._completed = 0
        """Entries with a serial up to this one are complete (fenced mode: a call's end) but not landed."""
        self._ticks = 0
        self._last_due = 0
        self._to_self = 0
        self.deferred = 0
        """Writes ever buffered (a test can see that deferral happened)."""

    @property
    def pending(self) -> int:
        """Writes buffered now."""
        return len(self._q)

    def add(self, target: int, apply: Callable[[], Any]) -> None:
        """Buffer a write to ``target``'s memory; ``apply()`` performs it when it lands."""
        span = self._span
        due = NEVER_DUE if span is None else max(self._last_due, self._ticks + 1 + int(self._stream.next() * span))
        self._last_due = due
        self._serial += 1
        self._q.append((target, due, apply, self._serial))
        self.deferred += 1
        if target == self.rank:
            self._to_self += 1

    def tick(self) -> None:
        """One primitive of this rank executed: land every entry whose due point has come."""
        self._ticks += 1
        q = self._q
        if not q or q[0][1] > self._ticks:
            return
        # Dues never decrease along the queue, so the entries due now are a prefix of it.
        n = 0
        while n < len(q) and q[n][1] <= self._ticks:
            n += 1
        due, self._q = q[:n], q[n:]
        for target, _, apply, _ in due:
            if target == self.rank:
                self._to_self -= 1
            apply()

    def flush(self) -> None:
        """Land everything (a release point)."""
        q, self._q = self._q, []
        self._to_self = 0
        for _, _, apply, _ in q:
            apply()

    def flush_self(self) -> None:
        """Land every entry aimed at this rank, in order (read-your-writes); the others stay."""
        if not self._to_self:
            return
        me = self.rank
        mine = [e for e in self._q if e[0] == me]
        self._q = [e for e in self._q if e[0] != me]
        self._to_self = 0
        for _, _, apply, _ in mine:
            apply()

    def complete(self) -> None:
        """Every entry buffered now is complete (fenced mode: the call's end, ``completion.RULE``): it
        lands at this rank's next :meth:`land_completed` (a release, its own read of the target), a
        flush, or its due point, whichever comes first."""
        self._completed = self._serial

    def completed_targets(self, target: int | None = None) -> set[int]:
        """The targets of the complete entries not yet landed (only ``target``, if given)."""
        done = self._completed
        return {e[0] for e in self._q if e[3] <= done and (target is None or e[0] == target)}

    def land_completed(self, target: int | None = None) -> None:
        """Land, in order, the complete entries (to ``target`` only, if given); the others stay."""
        done = self._completed
        q = self._q
        if not q or q[0][3] > done:
            return
        now = [e for e in q if e[3] <= done and (target is None or e[0] == target)]
        if not now:
            return
        self._q = [e for e in q if not (e[3] <= done and (target is None or e[0] == target))]
        self._to_self -= sum(e[0] == self.rank for e in now)
        for _, _, apply, _ in now:
            apply()


class Schedule(MonitorBase):
    """One rank's seeded perturbations (see the module docstring).

    Also a monitor (``ProgramInstance.add_monitor``) that wants no op: it only sleeps the skew
    delay when a call starts, so a compiled call site is unchanged by it.
    """

    def __init__(self, options: RuntimeOptions, rank: int, nranks: int) -> None:
        self.rank = rank
        self.jitter_us = float(options.jitter_us)
        self.skew_us = float(options.skew_us)
        st = options.straggler
        if st is not None and st[0] >= nranks:
            raise ProgramError(f"straggler rank {st[0]} is not a rank of {nranks} (ranks are 0..{nranks - 1})")
        self.extra_us = float(st[1]) if st is not None and st[0] == rank else 0.0
        self._jitter = Stream(options.seed, rank, STREAM_JITTER)
        self._skew = Stream(options.seed, rank, STREAM_SKEW)
        self.writes: WriteBuffer | None = None
        self.cache: WriteBack | None = None
        """Fenced mode's scalar line cache (``pldemu.runtime.instrument.fenced``), else None."""
        self.flight: Completing | None = None
        """Fenced mode's reads in flight under ``--fence-policy random`` (``flight``), else None."""
        if options.visibility != "eager":
            latest = options.visibility == "fenced" and options.fence_policy == "latest"
            self.writes = WriteBuffer(rank, Stream(options.seed, rank, STREAM_VISIBILITY),
                                      None if latest else VISIBILITY_SPAN)

    @property
    def delays(self) -> bool:
        """True if primitives of this rank are delayed (jitter, or this rank is the straggler)."""
        return bool(self.jitter_us or self.extra_us)

    def next_delay_us(self) -> float:
        """The delay before this rank's next primitive (drawn: the sequence is fixed by the seed)."""
        return self.jitter_us * self._jitter.next() + self.extra_us

    def next_skew_us(self) -> float:
        """The delay before this rank's next call."""
        return self.skew_us * self._skew.next()

    def delay(self) -> None:
        us = self.next_delay_us()
        if us > 0:
            precise_sleep(us * 1e-6)  # a 20 us jitter lasts 20 us, not the thread's 50 us of timer slack more

    # -- host synchronisation (the harness calls these) -------------------------------------------

    def host_access(self) -> None:
        """The host is about to read or write this rank's own windows: its own writes land first."""
        if self.cache is not None:
            self.cache.write_back()  # the host reads memory: the tail flush of every dirty line
        if self.writes is not None:
            self.writes.flush_self()

    def host_sync(self) -> None:
        """An all-rank synchronisation of the host (an MPI barrier): every buffered write lands."""
        if self.flight is not None:
            self.flight.complete()
        if self.cache is not None:
            self.cache.write_back()
        if self.writes is not None:
            self.writes.flush()

    # -- monitor ----------------------------------------------------------------------------------

    def run_ended(self, run: int, error: BaseException | None) -> None:
        # Fenced mode: the kernel's tail completes every read and write (``completion.RULE``); the
        # writes land at the rank's next release, join, host access or own read of their target.
        if self.flight is not None:
            self.flight.complete()
        if self.cache is not None:
            self.cache.tail_flush()
        if self.cache is not None and self.writes is not None:
            self.writes.complete()

    def run_started(self, run: int) -> None:
        if self.skew_us:
            us = self.next_skew_us()
            if us > 0:
                precise_sleep(us * 1e-6)


def delayed(sched: Schedule, inner: Handler) -> Handler:
    """``inner`` after the schedule's delay before a primitive (jitter, straggler)."""
    delay = sched.delay

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
        delay()
        return inner(m, site, args)

    return handler


# ---------------------------------------------------------------------------------------------
# Deferred visibility
# ---------------------------------------------------------------------------------------------


def _data_window(t: Any) -> Window | None:
    """The window behind ``t`` if it is a data window (the only kind whose writes are deferred)."""
    if isinstance(t, TensorRef) and t.buffer.kind is not BufferKind.SIGNAL:
        return t.buffer.window
    return None


def _copy_into(view: np.ndarray, data: np.ndarray) -> None:
    view[...] = data


def _settled(read: Callable[[], None], apply: Callable[[], Any]) -> None:
    read()  # a write cannot land bytes its source read has not read yet
    apply()


def deferred_handlers(wb: WriteBuffer, inner: Mapping[Op, Handler], *,
                      buffers_atomics: bool = False, reads: Reading | None = None) -> dict[Op, Handler]:
    """The handlers of deferred-visibility mode, wrapping ``inner`` (plain or invariant-checking);
    ``buffers_atomics``: buffer element-wise atomic data puts too (fenced mode reuses these);
    ``reads``: a get's and a put's source reads of a window stay in flight (fenced, ``random``)."""
    d = _Deferred(wb, inner, buffers_atomics, reads)
    return {
        Op.PUT: d.put,
        Op.GET: d.get,
        Op.REMOTE_LOAD: d.remote_load,
        Op.NOTIFY: d.notify,
        Op.WAIT: d.wait,
        Op.TILE_LOAD: d.tile_load,
        Op.TILE_STORE: d.tile_store,
        Op.TENSOR_READ: d.tensor_read,
        Op.TENSOR_WRITE: d.tensor_write,
    }


class _Deferred:
    """One rank's deferred-visibility handlers: each buffers, releases or drains through ``wb`` and
    leaves the rest of the op to ``inner``'s handler (see the module docstring)."""

    def __init__(self, wb: WriteBuffer, inner: Mapping[Op, Handler], buffers_atomics: bool,
                 reads: Reading | None = None) -> None:
        self._wb = wb
        self._reads = reads
        self.buffers_atomics = buffers_atomics
        """Element-wise atomic puts into data windows are buffered too (fenced mode: they are data)."""
        self._inner = dict(inner)  # a snapshot: the caller's table gets these handlers next

    def put(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        wb = self._wb
        wb.tick()
        atomic = site.attrs["atomic"]
        if isinstance(args[2], TensorRef) and args[2].buffer.window is not None:
            wb.flush_self()  # read-your-writes: the put reads this rank's own stores, deferred or not
        if _data_window(args[0]) is None or (atomic and not self.buffers_atomics):
            return self._inner[Op.PUT](m, site, args)  # signals (and, deferred, atomics) are never deferred
        plan = plan_put(m.rank, site, args)
        if plan is None:
            return None
        w, peer, view = plan.window, plan.peer, plan.dst.tensor.shape
        w.check_put(peer, view, plan.dst.offsets, plan.data)  # refused where the program put
        snap = np.array(plan.data, dtype=w.dtype, copy=True)  # the data as it is now, whatever happens later
        read = None
        if self._reads is not None and plan.src is not None and _data_window(plan.src.tensor) is not None:
            read = partial(self._reads.settle, self._reads.issue(snap, lambda: plan.data))
        for at, piece in plan.pieces(args[3] if m.stage_pieces else None):
            apply = partial(w.put, peer, view, at, snap[piece], atomic)  # a view of snap: a late read shows
            wb.add(peer, apply if read is None else partial(_settled, read, apply))
        return None

    def get(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        self._wb.tick()
        if operator.index(args[1]) == m.rank:
            self._wb.flush_self()  # read-your-writes
        reads = self._reads if _data_window(args[2]) is not None else None
        if _data_window(args[0]) is None:  # into a rank-local tensor: private memory, nothing to defer
            self._inner[Op.GET](m, site, args)
            plan = plan_get(m.rank, site, args) if reads is not None else None
            if reads is not None and plan is not None:
                reads.issue(plan.target, plan.read, ("tensor", args[0].buffer.index))
            return None
        plan = plan_get(m.rank, site, args)
        if plan is not None:
            data = plan.read()  # read now: possibly stale
            apply = partial(_copy_into, plan.target, data)
            if reads is not None:
                apply = partial(_settled, partial(reads.settle, reads.issue(data, plan.read)), apply)
            self._wb.add(m.rank, apply)
        return None

    def remote_load(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        self._wb.tick()
        if args[1] == m.rank:
            self._wb.flush_self()
        result: Tile = self._inner[Op.REMOTE_LOAD](m, site, args)
        return result

    def notify(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        self._wb.tick()
        self._wb.flush()  # the release point: everything this rank wrote lands before the signal does
        return self._inner[Op.NOTIFY](m, site, args)

    def wait(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        self._wb.tick()
        return self._inner[Op.WAIT](m, site, args)

    def tile_load(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        if _data_window(args[0]) is not None:
            self._wb.flush_self()
        result: Tile = self._inner[Op.TILE_LOAD](m, site, args)
        return result

    def tile_store(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[2]
        atomic = site.attrs.get("atomic", False)
        if _data_window(t) is None:
            return self._inner[Op.TILE_STORE](m, site, args)
        if atomic and not self.buffers_atomics:  # an atomic add, like an atomic put, is not deferred; it reads
            self._wb.flush_self()  # the region, so this rank's own earlier stores land first (read-your-writes)
            return self._inner[Op.TILE_STORE](m, site, args)
        tile: Tile = args[0]
        valid = tile.valid
        view = t.array[region("tile.store", m.rank, m.rank, f"window '{t.buffer.name}'", t.shape, args[1], valid)]
        snap = np.array(tile.data[prefix(valid)], copy=True)
        w = t.buffer.window
        apply = partial(w.put, m.rank, t.shape, tuple(args[1]), snap, True) if atomic and w is not None else \
            partial(_copy_into, view, snap)
        self._wb.add(m.rank, apply)
        return None

    def tensor_read(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
        if _data_window(args[0]) is not None:
            self._wb.flush_self()
        return self._inner[Op.TENSOR_READ](m, site, args)

    def tensor_write(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        t = args[0]
        if not isinstance(t, TensorRef) or t.buffer.window is None:
            return self._inner[Op.TENSOR_WRITE](m, site, args)
        if t.buffer.kind is BufferKind.SIGNAL:
            self._wb.flush()  # a store into a signal cell is a release, like a notify
            return self._inner[Op.TENSOR_WRITE](m, site, args)
        index: Shape = args[1]
        region("tensor.write", m.rank, m.rank, f"window '{t.buffer.name}'", t.shape, index, (1,) * len(index))
        view = t.array[tuple(slice(i, i + 1) for i in index)]
        self._wb.add(m.rank, partial(_copy_into, view, np.array(args[2], dtype=t.array.dtype)))
        return None


__all__ = [
    "NO_PERTURBATION",
    "PRIMITIVES",
    "VISIBILITY_SPAN",
    "Completing",
    "Reading",
    "Schedule",
    "Stream",
    "WriteBack",
    "WriteBuffer",
    "deferred_handlers",
    "delayed",
    "describe_schedule",
    "schedule_active",
]
