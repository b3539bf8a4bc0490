"""Execution traces in the Chrome / Perfetto trace-event format (``RuntimeOptions(trace="FILE.json")``).

Open the file in https://ui.perfetto.dev or chrome://tracing, or draw it with ``pldemu trace-plot``.

* one process per rank (``pid`` = rank, one thread ``tid`` 0), named ``rank R``;
* every executed op except pure metadata (rank queries, views, valid-shape changes) is a complete
  slice (``"ph": "X"``) with its program location and call number; each ``run()`` is a ``call N``
  slice around its ops. ``cat`` is the primitive kind (put, atomic put, get, remote_load, notify,
  wait, tensor, load/store, compute);
* a flow arrow (``"ph": "s"`` / ``"f"``) goes from a notify to each wait it satisfied (see below);
* race reports (``cat: race``, one instant on each side, sharing ``args.pair``) and failures
  (``cat: error``) are instant events.

**Clock.** Timestamps are microseconds of one common clock: at construction rank 0 measures every
rank's ``MPI.Wtime`` offset by ping-pong (the round trip with the smallest duration of a few; the
error is at most half of it, microseconds on one node) and every rank subtracts its own origin.

**Which notify satisfied a wait.** A waiter only learns that its cell reached the value, not who
put it there, so flows are matched after the fact on rank 0, from every traced modification of the
cell (notifies from all ranks and ``tensor.write`` of signal cells; cells start at 0). The
modifications are replayed in the order of their slices' midpoints (an atomic lands somewhere inside
its notify's slice). For a wait ending at time T, the replay runs up to T (extended by modifications
that started before T if the condition does not hold yet); the matched notify is the one that made
the condition hold and after which it kept holding up to T. When the replay never satisfies the
condition (clock error, a value written outside the trace), the fallback is the last notify to that
cell that started before T from the rank the wait-for edge points to (``status.source_rank``: row r
of a mesh signal counts rank r's credits, column r of a ring signal), else from any other rank; if
even that seems to start after T (clock error), the one starting nearest to T.
Both rules are heuristics: with clock error below a notify's duration they are exact for the
credit protocol, where each cell has one remote writer.

**Collection.** Each rank keeps its own raw records; :meth:`Tracer.flush` (collective) gathers them
to rank 0, which converts them; :meth:`Tracer.close` (collective, called by
``ProgramInstance.close``) flushes and rank 0 writes the one file. A rank whose run fails writes
what it holds to ``FILE.rankR.json`` at once (the job may never reach a collective close).
"""

from __future__ import annotations

import json
import math
import operator
import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

from pldemu.ir import BufferKind, NotifyOp, Op, WaitCmp
from pldemu.mpi import BoundedComm
from pldemu.runtime.instrument.races import RaceReport
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import CallSite, OpEvent
from pldemu.runtime.status import source_rank
from pldemu.runtime.values import Buffer, TensorRef, flat_cell

SKIPPED = frozenset({Op.GET_COMM_CTX, Op.RANK, Op.NRANKS, Op.TENSOR_VIEW, Op.TILE_SET_VALIDSHAPE})
"""Metadata ops: no work worth a slice."""

KINDS: dict[Op, str] = {
    Op.PUT: "put",
    Op.GET: "get",
    Op.REMOTE_LOAD: "remote_load",
    Op.NOTIFY: "notify",
    Op.WAIT: "wait",
    Op.TENSOR_READ: "tensor",
    Op.TENSOR_WRITE: "tensor",
    Op.TILE_LOAD: "load/store",
    Op.TILE_STORE: "load/store",
}
"""Slice category per op; every other traced op is ``compute``."""

PING_ROUNDS = 8
"""Round trips per rank for the clock offset (the fastest one is used)."""

DEFAULT_MAX_EVENTS = 2_000_000
"""Op slices kept per rank between flushes; beyond it slices are counted but dropped."""

GATHER_TIMEOUT = 300.0
"""Seconds a flush may wait for the slowest rank."""

# Raw per-rank records (cheap tuples; converted to JSON dicts on rank 0).
# op: (run, site id, t0, t1, detail)   detail: None | (peer,) | notify (peer, buf, cell, value) |
#     wait (buf, cell, expected)
_RawOp = tuple[int, int, float, float, Any]
# mark: (name, category, t, args)
_RawMark = tuple[str, str, float, dict[str, Any]]


class Notify(NamedTuple):
    """A traced modification of a signal cell (a notify, or ``tensor.write`` of a signal cell)."""

    event: int
    """Index of its slice in the converted events."""
    rank: int
    target: int
    buffer: int
    cell: int
    value: int
    is_set: bool
    t0: float
    t1: float

    @property
    def mid(self) -> float:
        return (self.t0 + self.t1) / 2


class Wait(NamedTuple):
    """A traced, satisfied wait."""

    event: int
    rank: int
    buffer: int
    cell: int
    expected: int
    ge: bool
    t0: float
    t1: float


class TraceClock:
    """Microseconds of a clock common to all ranks (collective to build; see the module docstring)."""

    def __init__(self, comm: MPI.Intracomm, rounds: int = PING_ROUNDS) -> None:
        me, size = comm.Get_rank(), comm.Get_size()
        comm.Barrier()
        self.offsets_us: list[float] = [0.0] * size
        """Each rank's Wtime minus rank 0's, as rank 0 measured it (known on rank 0 only)."""
        self.uncertainty_us: list[float] = [0.0] * size
        """Half the fastest round trip per rank: the bound on the offset's error (rank 0 only)."""
        origins: list[float] | None = None
        ping = np.zeros(1, dtype=np.float64)
        if me == 0:
            t_zero = MPI.Wtime()
            for r in range(1, size):
                best = math.inf
                for _ in range(rounds):
                    t_send = MPI.Wtime()
                    comm.Send(ping, dest=r, tag=71)
                    comm.Recv(ping, source=r, tag=72)
                    t_back = MPI.Wtime()
                    if t_back - t_send < best:
                        best = t_back - t_send
                        self.offsets_us[r] = (float(ping[0]) - (t_send + t_back) / 2) * 1e6
                        self.uncertainty_us[r] = best / 2 * 1e6
            origins = [t_zero + off / 1e6 for off in self.offsets_us]
        else:
            for _ in range(rounds):
                comm.Recv(ping, source=0, tag=71)
                ping[0] = MPI.Wtime()
                comm.Send(ping, dest=0, tag=72)
        self.origin: float = comm.scatter(origins, root=0)

    def now(self) -> float:
        """Microseconds since rank 0's origin, on the common clock."""
        return (MPI.Wtime() - self.origin) * 1e6


def _gather_timeout(what: str) -> TimeoutError:
    return TimeoutError("trace: gathering the ranks' events timed out (a rank did not reach the flush)")


class Tracer(MonitorBase):
    """This rank's trace recorder (a monitor); rank 0 also holds the converted events of every rank.

    Built collectively by ``ProgramInstance`` when ``RuntimeOptions.trace`` is set (``inst.tracer``).
    """

    def __init__(self, comm: MPI.Intracomm, path: str, buffers: Sequence[Buffer], sites: list[CallSite],
                 program: str = "", max_events: int = DEFAULT_MAX_EVENTS) -> None:
        self._comm: MPI.Intracomm = comm.Dup()  # never matches the program's or a harness's messages
        self.path = path
        self.rank = comm.Get_rank()
        self.nranks = comm.Get_size()
        self.program = program
        self.max_events = max_events
        self._buffers = list(buffers)
        self._sites = sites
        self.clock = TraceClock(self._comm)
        self._now = self.clock.now
        self._ops: list[_RawOp] = []
        self._marks: list[_RawMark] = []
        self._calls: list[tuple[int, float, float, bool]] = []
        self._dropped = 0
        self._run = 0
        self._t0 = 0.0
        self._run_t0 = 0.0
        self._closed = False
        # rank 0: every rank's converted events, plus what flow matching needs
        self._events: list[dict[str, Any]] = []
        self._notifies: list[Notify] = []
        self._waits: list[Wait] = []
        self._race_pairs = 0
        self.dropped_total = 0

    # -- monitor -------------------------------------------------------------------------------

    def wants(self, op: Op) -> bool:
        return op not in SKIPPED

    def run_started(self, run: int) -> None:
        self._run = run
        self._run_t0 = self._now()

    def run_ended(self, run: int, error: BaseException | None) -> None:
        self._calls.append((run, self._run_t0, self._now(), error is not None))
        if error is not None:
            self.write_partial()

    def before(self, event: OpEvent) -> None:
        self._t0 = self._now()

    def after(self, event: OpEvent, result: Any) -> None:
        t1 = self._now()
        if len(self._ops) >= self.max_events:
            self._dropped += 1
            return
        self._ops.append((self._run, event.site.id, self._t0, t1, self._detail(event)))

    def failed(self, event: OpEvent, error: BaseException) -> None:
        t1 = self._now()
        self._ops.append((self._run, event.site.id, self._t0, t1, self._detail(event, failed=True)))
        text = str(error)
        self._marks.append((f"error: {type(error).__name__}", "error", t1,
                            {"at": event.site.where, "call": self._run, "message": text[:2000]}))

    def _detail(self, event: OpEvent, failed: bool = False) -> Any:
        op, args = event.op, event.args
        try:
            if op in (Op.PUT, Op.GET, Op.REMOTE_LOAD):
                return (operator.index(args[1]),)
            if failed:
                return None
            if op is Op.NOTIFY:
                peer = operator.index(args[1])
                cell = flat_cell("trace", self.rank, peer, args[0], args[2])
                return (peer, args[0].buffer.index, cell, operator.index(args[3]))
            if op is Op.WAIT:
                cell = flat_cell("trace", self.rank, self.rank, args[0], args[1])
                return (args[0].buffer.index, cell, operator.index(args[2]))
            if op is Op.TENSOR_WRITE:
                t = args[0]
                if isinstance(t, TensorRef) and t.buffer.kind is BufferKind.SIGNAL:
                    cell = flat_cell("trace", self.rank, self.rank, t, args[1])
                    return (self.rank, t.buffer.index, cell, operator.index(args[2]))
        except Exception:  # a detail is a nicety: never fail the program over it
            return None
        return None

    # -- marks -----------------------------------------------------------------------------------

    def mark(self, name: str, category: str = "mark", args: dict[str, Any] | None = None) -> None:
        """An instant event on this rank's track, now (harnesses: iteration boundaries, checks)."""
        self._marks.append((name, category, self._now(), dict(args or {})))

    def add_races(self, reports: Sequence[RaceReport]) -> None:
        """Draw race reports (rank 0 keeps them; every rank gets the same list from the checkpoint)."""
        if self.rank != 0:
            return
        for rep in reports:
            self._race_pairs += 1
            text = rep.describe()
            for side in (rep.first, rep.second):
                ts = side.t if not math.isnan(side.t) else 0.0
                self._events.append({
                    "name": f"race: {rep.region_text()}", "cat": "race", "ph": "i", "s": "t", "ts": ts,
                    "pid": side.rank, "tid": 0,
                    "args": {"pair": self._race_pairs, "report": text, "target": rep.target,
                             "buffer": rep.buffer, "start": rep.start, "stop": rep.stop,
                             "kind": side.kind_name, "at": side.location, "call": side.call},
                })

    # -- collection ------------------------------------------------------------------------------

    def _take(self) -> tuple[list[_RawOp], list[_RawMark], list[tuple[int, float, float, bool]], int]:
        raw = (self._ops, self._marks, self._calls, self._dropped)
        self._ops, self._marks, self._calls, self._dropped = [], [], [], 0
        return raw

    def flush(self) -> None:
        """Collective: move every rank's records to rank 0 (converted there)."""
        parts = BoundedComm(self._comm, GATHER_TIMEOUT, _gather_timeout).gather(self._take())
        if parts is not None:
            for rank, part in enumerate(parts):
                self._convert(rank, part)

    def close(self) -> None:
        """Collective: flush, and rank 0 writes the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
            if self.rank == 0:
                self.write(self.path)
        finally:
            self._comm.Free()

    def write_partial(self) -> str:
        """Write what this rank holds (its own unflushed records; on rank 0 also everything already
        gathered) to ``FILE.rankR.json`` without any communication. Returns the path."""
        self._convert(self.rank, self._take())
        path = partial_path(self.path, self.rank)
        self.write(path)
        return path

    def _convert(self, rank: int, part: tuple[list[_RawOp], list[_RawMark], list[Any], int]) -> None:
        ops, marks, calls, dropped = part
        self.dropped_total += dropped
        out = self._events
        sites = self._sites
        for run, site_id, t0, t1, detail in ops:
            site = sites[site_id]
            op = site.op
            kind = KINDS.get(op, "compute")
            name = op.text.rsplit(".", 1)[-1]
            args: dict[str, Any] = {"at": site.where, "call": run}
            if op is Op.PUT and site.attrs.get("atomic"):
                kind = "atomic put"
            if detail is not None:
                if op in (Op.PUT, Op.GET, Op.REMOTE_LOAD):
                    args["peer"] = detail[0]
                    name = f"{name} {'->' if op is Op.PUT else '<-'} {detail[0]}"
                elif op is Op.NOTIFY or op is Op.TENSOR_WRITE:
                    peer, buf, cell, value = detail
                    is_set = op is Op.TENSOR_WRITE or site.attrs.get("op") is NotifyOp.Set
                    args.update(peer=peer, cell=self._cell_text(buf, cell), value=value,
                                op="set" if is_set else "add")
                    if op is Op.NOTIFY:
                        name = f"notify -> {peer}"
                    self._notifies.append(Notify(len(out), rank, peer, buf, cell, value, is_set, t0, t1))
                elif op is Op.WAIT:
                    buf, cell, expected = detail
                    ge = site.attrs.get("cmp") is WaitCmp.Ge
                    args.update(cell=self._cell_text(buf, cell), expected=expected, cmp="ge" if ge else "eq")
                    self._waits.append(Wait(len(out), rank, buf, cell, expected, ge, t0, t1))
            out.append({"name": name, "cat": kind, "ph": "X", "ts": t0, "dur": max(t1 - t0, 0.0),
                        "pid": rank, "tid": 0, "args": args})
        for run, t0, t1, failed in calls:
            out.append({"name": f"call {run}", "cat": "call", "ph": "X", "ts": t0, "dur": max(t1 - t0, 0.0),
                        "pid": rank, "tid": 0, "args": {"call": run, "failed": failed}})
        for name, cat, t, args in marks:
            out.append({"name": name, "cat": cat, "ph": "i", "s": "t", "ts": t, "pid": rank, "tid": 0,
                        "args": args})

    def _cell_text(self, buf: int, cell: int) -> str:
        b = self._buffers[buf]
        idx: list[int] = []
        flat = cell
        for n in reversed(b.shape):
            flat, i = divmod(flat, max(n, 1))
            idx.append(i)
        return f"{b.name}[{', '.join(map(str, reversed(idx)))}]"

    def write(self, path: str) -> None:
        """Write every converted event, the matched flows and metadata to ``path`` (JSON)."""
        events = list(self._events)
        for k, (n, w) in enumerate(match_flows(self._notifies, self._waits, self._buffers, self.nranks), 1):
            wait_slice = self._events[w.event]
            ts_f = max(w.t0, w.t1 - min(0.5, (w.t1 - w.t0) / 2))
            # The atomic landed inside the notify's slice and before the wait ended: start the arrow at
            # the slice's midpoint unless the wait had already ended by then.
            ts_s = max(n.t0, min(n.mid, ts_f))
            events.append({"name": "signal", "cat": "flow", "ph": "s", "id": k, "pid": n.rank, "tid": 0,
                           "ts": ts_s})
            events.append({"name": "signal", "cat": "flow", "ph": "f", "bp": "e", "id": k, "pid": w.rank,
                           "tid": 0, "ts": ts_f})
            wait_slice["args"]["satisfied_by"] = f"rank {n.rank} {self._events[n.event]['args'].get('at', '')}"
        events.sort(key=lambda e: (e["ts"], e["ph"] != "X"))
        meta: list[dict[str, Any]] = []
        for r in range(self.nranks):
            meta.append({"name": "process_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
            meta.append({"name": "process_sort_index", "ph": "M", "pid": r, "tid": 0, "args": {"sort_index": r}})
            meta.append({"name": "thread_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": "ops"}})
        doc = {
            "traceEvents": meta + events,
            "displayTimeUnit": "ns",
            "otherData": {
                "tool": "pldemu",
                "program": self.program,
                "nranks": self.nranks,
                "clock": "MPI.Wtime aligned to rank 0 by ping-pong (microseconds)",
                "clock_offsets_us": self.clock.offsets_us,
                "clock_uncertainty_us": self.clock.uncertainty_us,
                "dropped_slices": self.dropped_total,
            },
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        with open(tmp, "w") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, target)


def partial_path(path: str, rank: int) -> str:
    """Where a failing rank writes its own events: ``FILE.rankR.json`` next to ``FILE.json``."""
    p = Path(path)
    stem = p.name[: -len(".json")] if p.name.endswith(".json") else p.name
    return str(p.with_name(f"{stem}.rank{rank}.json"))


def match_flows(notifies: Sequence[Notify], waits: Sequence[Wait], buffers: Sequence[Buffer],
                nranks: int) -> list[tuple[Notify, Wait]]:
    """For every wait, the notify that satisfied it (see the module docstring for the heuristic)."""
    by_cell: dict[tuple[int, int, int], list[Notify]] = {}
    for n in notifies:
        by_cell.setdefault((n.target, n.buffer, n.cell), []).append(n)
    replay: dict[tuple[int, int, int], tuple[list[Notify], list[float], list[int]]] = {}
    for key, mods in by_cell.items():
        mods.sort(key=lambda n: n.mid)
        values: list[int] = []
        v = 0
        for n in mods:
            v = n.value if n.is_set else v + n.value
            values.append(v)
        replay[key] = (mods, [n.mid for n in mods], values)
    out: list[tuple[Notify, Wait]] = []
    for w in waits:
        entry = replay.get((w.rank, w.buffer, w.cell))
        if entry is None:
            continue
        mods, mids, values = entry
        found = _replayed(w, mods, mids, values)
        if found is None:
            found = _fallback(w, mods, buffers, nranks)
        if found is not None:
            out.append((found, w))
    return out


def _holds(w: Wait, value: int) -> bool:
    return value >= w.expected if w.ge else value == w.expected


def _replayed(w: Wait, mods: list[Notify], mids: list[float], values: list[int]) -> Notify | None:
    end = bisect_right(mids, w.t1)  # modifications replayed up to the end of the wait
    while not (end and _holds(w, values[end - 1])):
        # Not satisfied yet: a notify that had started by then may have landed already.
        if end < len(mods) and mods[end].t0 <= w.t1:
            end += 1
        else:
            return None
    j = end - 1
    while j > 0 and _holds(w, values[j - 1]):
        j -= 1
    return mods[j]


def _fallback(w: Wait, mods: list[Notify], buffers: Sequence[Buffer], nranks: int) -> Notify | None:
    b = buffers[w.buffer]
    index: list[int] = []
    flat = w.cell
    for n in reversed(b.shape):
        flat, i = divmod(flat, max(n, 1))
        index.append(i)
    src = source_rank(b.shape, tuple(reversed(index)), nranks)
    others = [n for n in mods if n.rank != w.rank]
    pool = [n for n in others if n.rank == src] or others
    started = [n for n in pool if n.t0 <= w.t1]
    if started:
        return max(started, key=lambda n: n.t0)
    # Every candidate seems to start after the wait ended: clock error larger than the gap. The
    # nearest one in time is the best guess.
    return min(pool, key=lambda n: n.t0 - w.t1) if pool else None


__all__ = ["Notify", "TraceClock", "Tracer", "Wait", "match_flows", "partial_path"]
