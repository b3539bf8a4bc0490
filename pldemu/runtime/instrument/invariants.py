"""Protocol invariant checks of the self-clearing credit protocol (``RuntimeOptions(invariants=True)``).

The collectives' correctness rests on a few claims about their signal cells. A broken recipe often
breaks one of them long before (or without ever) producing a wrong element, so checking them
directly catches bugs sooner and says what went wrong. Checked here, as the program runs:

* **never negative**: a signal cell never holds a negative value. Every ``notify`` is executed as a
  fetching atomic (``Window.fetch_notify``), so the notifier learns the exact value its atomic
  produced (the old value plus its operand, or the operand of a Set) rather than a later re-read
  that could include a peer's update; every satisfied ``wait`` and every ``tensor.read`` of a signal
  cell checks the value it observed.
* **no Set/AtomicAdd mixing**: within a run (the instance's life), a signal cell is written either
  by Set or by AtomicAdd (``tensor.write`` of a signal cell counts as a Set), never both: a Set
  clobbers a counter a fast peer has already advanced. The cell's owner hosts a shadow INT32 window
  per signal buffer (``NAME.writers``) counting, per cell, the ranks that Set it (low 16 bits) and
  the ranks that added to it (high bits). The first time a rank writes a cell with a kind, it adds
  its count there with a fetching atomic: the old value says whether the other kind was used
  before, by any rank, so the second kind is caught the moment it is first used, whatever the
  timing. :meth:`InvariantChecker.scan` reads every rank's shadow one-sidedly, so even a
  deadlocked job can tell that the deadlock came from mixing.

Who has posted to a cell is kept the same way, for the deadlock report: a second shadow per signal
buffer (``NAME.posters``) holds, per cell, a bit per rank that has ever notified it (set by that
rank's first notify of the cell; ranks from :data:`POSTER_BITS` - 1 on share the last bit), so a
blocked rank's wait-for edge can name the rank it waits for whatever the buffer's layout, and a cell
nobody ever notified can be called so (:meth:`InvariantChecker.posters`).

Checked by the harness (``pldemu.harness.check.run_check``), which owns the points where they hold:

* **cells at rest are zero**: once all ranks have retired a call and no next-call credit has
  arrived (an all-rank barrier between calls), every cell of the credit signal is 0;
* **one call ahead at most**: when a rank's call ``i`` returns, every peer is in call ``i`` or
  ``i + 1``.

Each violation names the rank that saw it, the buffer, the cell (and whose cell), the value, the
program location and the call.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu import windows
from pldemu.ir import BufferKind, NotifyOp, Op
from pldemu.mpi import BoundedComm
from pldemu.runtime.errors import Cause
from pldemu.runtime.groups import rank_text
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import CallSite
from pldemu.runtime.status import RankStatus, StatusBoard
from pldemu.runtime.values import Buffer, TensorRef, flat_cell, unravel, wrap_int32

NEGATIVE = "negative-cell"
MIXED = "set-and-add"
NONZERO = "nonzero-at-rest"
OUT_OF_STEP = "out-of-step"
INVARIANT_KINDS = (NEGATIVE, MIXED, NONZERO, OUT_OF_STEP)
"""The invariants, by the name reports use."""

MAX_KEPT = 64
"""Violations a rank keeps between checkpoints (the rest are only counted): a broken recipe can
violate an invariant on every call, and the first few say everything."""

POSTER_BITS = 31
"""Ranks the posters shadow tells apart (bits of a non-negative INT32); higher ranks share the last."""

_SET, _ADD = 1, 2
_SET_ONE, _ADD_ONE = 1, 1 << 16
"""What a first writer of each kind adds to a cell's shadow counter (Set writers low, adders high)."""


@dataclass(frozen=True)
class Violation:
    """One broken invariant."""

    invariant: str
    """One of :data:`INVARIANT_KINDS`."""
    rank: int
    """The rank that saw it."""
    buffer: str
    cell: tuple[int, ...]
    target: int
    """The rank whose cell it is."""
    value: int
    location: str
    call: int
    """1-based call number on the observing rank (0: not known)."""
    detail: str = ""
    group: tuple[int, ...] | None = None
    """The buffer's comm sub-domain (``Buffer.group``): the target is then also named by its group-local peer."""

    @property
    def iteration(self) -> int:
        """The 0-based harness iteration of :attr:`call` (-1 when not known)."""
        return self.call - 1

    def describe(self) -> str:
        cell = f"{self.buffer}[{', '.join(map(str, self.cell))}] of {rank_text(self.target, self.group)}"
        text = {
            NEGATIVE: f"signal cell {cell} went negative ({self.value})",
            MIXED: f"signal cell {cell} written by both Set and AtomicAdd",
            NONZERO: f"signal cell {cell} is {self.value}, not 0, with every call retired",
            OUT_OF_STEP: f"rank {self.target} out of step (at call {self.value})",
        }.get(self.invariant, f"{self.invariant} on {cell} value {self.value}")
        more = f"; {self.detail}" if self.detail else ""
        return f"invariant {self.invariant}: {text}, seen by rank {self.rank} at {self.location} (call {self.call}){more}"


class InvariantChecker(MonitorBase):
    """This rank's invariant state; builds the checking handlers; a monitor only for call numbers."""

    def __init__(self, rank: int, buffers: Sequence[Buffer]) -> None:
        self.rank = rank
        self._buffers = list(buffers)
        self.run = 0
        self.violations: list[Violation] = []
        """Violations seen by this rank since the last checkpoint (at most :data:`MAX_KEPT`)."""
        self.dropped = 0
        self.total = 0
        """Violations seen by this rank over the instance's life."""
        # (buffer index, target, flat cell, kind) this rank has already counted in the shadow.
        self._counted: set[tuple[int, int, int, int]] = set()
        self._writers: dict[int, windows.Window] = {}
        self._posters: dict[int, windows.Window] = {}
        self.board: StatusBoard | None = None
        """Where violations are published (bound once the instance has its status window)."""
        self._posted: set[tuple[int, int, int]] = set()
        """(buffer index, target, flat cell) this rank has already marked in the posters shadow."""

    # -- monitor: only the call number ------------------------------------------------------------

    def run_started(self, run: int) -> None:
        self.run = run

    # -- recording ----------------------------------------------------------------------------------

    def record(self, v: Violation, site: int = -1, flat: int = -1) -> None:
        """Keep ``v`` for the next checkpoint (or count it when enough are kept) and publish it on the
        status board (``site``: its call site id, ``flat``: its flat cell), where a rank that reports a
        deadlock reads it one-sidedly as the deadlock's likely root cause."""
        if self.board is not None:
            buffer = next((b.index for b in self._buffers if b.name == v.buffer), -1)
            self.board.broken((INVARIANT_KINDS.index(v.invariant), buffer, flat, v.target, v.value, site, v.call))
        self.total += 1
        if len(self.violations) < MAX_KEPT:
            self.violations.append(v)
        else:
            self.dropped += 1

    def _value(self, buf: Buffer, target: int, cell: int, value: int, site: CallSite, detail: str = "") -> None:
        if value < 0:
            self.record(Violation(NEGATIVE, self.rank, buf.name, unravel(cell, buf.shape), target, value,
                                  site.where, self.run, detail, buf.group), site.id, cell)

    def attach(self, ws: windows.WindowSet) -> None:
        """Collectively allocate the writer-kind shadow of every signal buffer (after the buffers)."""
        signals = [b for b in self._buffers if b.kind is BufferKind.SIGNAL]
        made = iter(ws.allocate_many([windows.WindowSpec(f"{b.name}.{what}", b.shape, np.int32, signal=True)
                                      for b in signals for what in ("writers", "posters")]))
        for b in signals:
            self._writers[b.index] = next(made)
            self._posters[b.index] = next(made)

    def _posted_to(self, buf: Buffer, target: int, cell: int) -> None:
        key = (buf.index, target, cell)
        if key in self._posted:
            return
        self._posted.add(key)
        w = self._posters.get(buf.index)
        if w is not None:
            w.fetch_notify(target, cell, 1 << min(self.rank, POSTER_BITS - 1), NotifyOp.AtomicAdd)

    def posters(self, buffer: int, owner: int, cell: int) -> tuple[int, ...] | None:
        """The ranks that have ever notified flat cell ``cell`` of ``owner``'s signal buffer number
        ``buffer`` (one-sided; no collective, usable in a deadlock); None when not known (no shadow, a
        read that failed, or a rank beyond :data:`POSTER_BITS` among them)."""
        w = self._posters.get(buffer)
        if w is None:
            return None
        try:
            mask = int(w.get(owner, self._buffers[buffer].numel, cell, 1)[0])
        except windows.WindowError:
            return None
        if mask < 0 or mask >> (POSTER_BITS - 1):
            return None
        return tuple(r for r in range(POSTER_BITS - 1) if mask >> r & 1)

    def writers(self, buffer: int, owner: int, cell: int) -> tuple[tuple[int, ...] | None, int]:
        """:meth:`posters` of the cell and :meth:`setters` of it (the deadlock report reads both)."""
        return self.posters(buffer, owner, cell), self.setters(buffer, owner, cell)

    def setters(self, buffer: int, owner: int, cell: int) -> int:
        """How many ranks have written flat cell ``cell`` of ``owner``'s signal buffer number ``buffer``
        with Set (one-sided, from the cell's writer-kind shadow; 0 when not known)."""
        w = self._writers.get(buffer)
        if w is None:
            return 0
        try:
            return int(w.get(owner, self._buffers[buffer].numel, cell, 1)[0]) & 0xFFFF
        except windows.WindowError:
            return 0

    def _op(self, buf: Buffer, target: int, cell: int, kind: int, site: CallSite) -> None:
        key = (buf.index, target, cell, kind)
        if key in self._counted:
            return  # this rank already counted itself as a writer of this kind
        self._counted.add(key)
        w = self._writers.get(buf.index)
        if w is None:
            return
        old = w.fetch_notify(target, cell, _SET_ONE if kind == _SET else _ADD_ONE, NotifyOp.AtomicAdd)
        sets, adds = old & 0xFFFF, old >> 16
        other = adds if kind == _SET else sets
        if other:
            mine, theirs = ("Set", "AtomicAdd") if kind == _SET else ("AtomicAdd", "Set")
            self.record(Violation(MIXED, self.rank, buf.name, unravel(cell, buf.shape), target, 0, site.where,
                                  self.run, f"{mine} here, after {other} rank(s) wrote it by {theirs}", buf.group),
                        site.id, cell)

    def known_causes(self, statuses: Sequence[RankStatus], where: Callable[[int], str]) -> tuple[Cause, ...]:
        """The first invariant violation every rank has published on the status board (``statuses``, read
        one-sidedly by a rank reporting a deadlock), as causes of that deadlock; ``where(site)`` names a
        call site."""
        out = []
        for st in statuses:
            if st.broken <= 0 or len(st.first_broken) != 7:
                continue
            kind, buffer, flat, target, value, site, call = st.first_broken
            if not (0 <= kind < len(INVARIANT_KINDS) and 0 <= buffer < len(self._buffers)):
                continue
            buf = self._buffers[buffer]
            v = Violation(INVARIANT_KINDS[kind], st.rank, buf.name, unravel(max(flat, 0), buf.shape), target, value,
                          where(site) if site >= 0 else "(at rest)", call, group=buf.group)
            more = f" (and {st.broken - 1} more on rank {st.rank})" if st.broken > 1 else ""
            out.append(Cause("invariant", v.iteration, v.describe() + more))
        return tuple(out)

    def scan(self) -> list[Violation]:
        """Every cell of every rank written by both Set and AtomicAdd so far, read one-sidedly from the
        owners' shadows (no collective: usable when the job is deadlocked)."""
        out = []
        for b, w in self._writers.items():
            buf = self._buffers[b]
            for r in range(w.size):
                counts = w.get(r, buf.numel, 0, buf.numel)
                for cell in np.flatnonzero((counts & 0xFFFF) & (counts >> 16)):
                    v = int(counts[cell])
                    out.append(Violation(MIXED, self.rank, buf.name, unravel(int(cell), buf.shape), r, 0,
                                         "(read from the cell's shadow)", self.run,
                                         f"{v & 0xFFFF} rank(s) Set it, {v >> 16} added to it", buf.group))
        return out

    # -- handlers ----------------------------------------------------------------------------------

    def handlers(self, inner: Mapping[Op, Handler]) -> dict[Op, Handler]:
        """Checking versions of notify, wait, tensor.read and tensor.write (``inner`` for the rest of
        what those ops do on non-signal buffers)."""
        base_read, base_write = inner[Op.TENSOR_READ], inner[Op.TENSOR_WRITE]
        add_op = NotifyOp.AtomicAdd

        def notify(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
            sig: TensorRef = args[0]
            peer = args[1]
            cell = flat_cell("notify", m.rank, peer, sig, args[2])
            w = sig.buffer.window
            if w is None:
                return inner[Op.NOTIFY](m, site, args)  # the plain handler raises the proper error
            value = wrap_int32(operator.index(args[3]))
            op = site.attrs["op"]
            # The writer kind is marked before the notify lands, so a rank whose wait sees this notify
            # also sees the mark: the writer that comes second in causal order is the one reporting.
            self._op(sig.buffer, peer, cell, _ADD if op is add_op else _SET, site)
            self._posted_to(sig.buffer, peer, cell)
            old = w.fetch_notify(peer, cell, value, op)
            new = wrap_int32(old + value) if op is add_op else value
            self._value(sig.buffer, peer, cell, new, site, f"{old} {'+' if op is add_op else 'set to'} {value}")
            return None

        def wait(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
            sig: TensorRef = args[0]
            w = sig.buffer.window
            if w is None:
                return inner[Op.WAIT](m, site, args)
            cell = flat_cell("wait", m.rank, m.rank, sig, args[1])
            expected = operator.index(args[2])
            if m.park is not None and not w.test(cell, expected, site.attrs["cmp"]):
                m.park(site, sig.buffer, w, cell, expected)  # a task's block parks on its core (runtime.tasksched)
            board = m.status
            assert board is not None
            board.wait_started(site.id, sig.buffer.index, cell, expected, site.attrs["cmp_code"])
            try:
                seen = w.wait(cell, expected, site.attrs["cmp"], time.monotonic() + m.timeout, hook=board.hook,
                              policy=m.wait_policy)
            except windows.WaitTimeout as err:
                raise m.deadlock(site, sig.buffer, err) from None
            board.wait_ended()
            self._value(sig.buffer, m.rank, cell, seen, site, "observed by a satisfied wait")
            return None

        def tensor_read(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            value = base_read(m, site, args)
            t = args[0]
            if isinstance(t, TensorRef) and t.buffer.kind is BufferKind.SIGNAL and t.buffer.window is not None:
                cell = flat_cell("tensor.read", m.rank, m.rank, t, args[1])
                self._value(t.buffer, m.rank, cell, int(value), site, "observed by tensor.read")
            return value

        def tensor_write(m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
            t = args[0]
            base_write(m, site, args)
            if isinstance(t, TensorRef) and t.buffer.kind is BufferKind.SIGNAL and t.buffer.window is not None:
                cell = flat_cell("tensor.write", m.rank, m.rank, t, args[1])
                self._op(t.buffer, m.rank, cell, _SET, site)
                self._value(t.buffer, m.rank, cell, operator.index(args[2]), site, "stored by tensor.write")

        return {Op.NOTIFY: notify, Op.WAIT: wait, Op.TENSOR_READ: tensor_read, Op.TENSOR_WRITE: tensor_write}

    def at_rest(self, cells: Mapping[str, np.ndarray], where: str) -> None:
        """Record a :data:`NONZERO` violation for each signal buffer of this rank whose cells (``name ->``
        values read at rest, every call retired) are not all 0: its first non-zero cell, and how many."""
        for name, values in cells.items():
            bad = np.flatnonzero(values)
            if bad.size:
                first = int(bad[0])
                self.record(Violation(NONZERO, self.rank, name, unravel(first, values.shape), self.rank,
                                      int(values.flat[first]), where, self.run,
                                      f"{bad.size} cell(s) != 0 in {name} of rank {self.rank}; a program that "
                                      "leaves signal cells non-zero on purpose: --no-cell-check"), -1, first)

    # -- checkpoint ----------------------------------------------------------------------------------

    def checkpoint(self, comm: MPI.Intracomm, timeout: float = 60.0) -> list[Violation]:
        """Collective: every rank's violations since the last checkpoint; the same list on every
        rank, ordered by call."""
        mine, self.violations, self.dropped = self.violations, [], 0
        found = [v for part in BoundedComm(comm, timeout).allgather(mine) for v in part]
        found.sort(key=lambda v: (v.call, v.invariant, v.rank))
        return found


__all__ = [
    "INVARIANT_KINDS",
    "MIXED",
    "NEGATIVE",
    "NONZERO",
    "OUT_OF_STEP",
    "InvariantChecker",
    "Violation",
]
