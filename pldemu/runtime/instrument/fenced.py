"""Fenced visibility (``visibility="fenced"``): the device's weak order, where only explicit markers
order memory (facts and sources: shared/reference/fences.md, sections 2 and 5.3).

Per rank, on top of deferred mode's write buffer (``schedule.WriteBuffer``, the same FIFO, the
same transfer planner):

* **Writes stay pending.** A put (atomic data puts too), a ``tile.store`` into a window and the
  destination write of a get are buffered as in deferred mode, but a ``notify`` no longer lands
  them: only ``system.fence`` does (every target, in order: a completion barrier), besides the
  host's synchronisation and a rank's reads of its own window (read-your-writes). The call's end
  completes them (``completion.RULE``, the rule the race detector follows too): they land at the
  rank's next release, own read of their target, host access or join (``_Fenced._land_completed``).
  Under the ``latest`` policy (the default) nothing else lands a write, so a missing fence gives the
  old data on every call and replays exactly; ``random`` adds deferred mode's seeded due points.
* **A scalar data cache.** ``tensor.read`` / ``tensor.write`` of a data window go through a per-rank
  cache of 64-byte lines (of the buffer's packed element order; window bases are taken as
  64-byte aligned). A read fills its line from memory on a miss and is then served from the line,
  stale until a ``system.cacheinvalid`` covering it drops it. A write updates the cached line and
  marks the element dirty: it reaches memory only when a ``cacheinvalid`` cleans the line (the
  write-back then joins the write buffer, so a ``fence`` completes it) or at the end of the call
  (the tail flush cleans it into the write buffer, complete with the call's other writes). ``system.cacheinvalid()`` covers every line; the region form only the line
  holding the view's base, as on the device.
* **Signal cells stay atomic and uncached**: a notify, a wait and a ``tensor.read`` / ``tensor.write``
  of a signal cell go to memory (the device's TWAIT cleans the waited line before every poll).
  DMA reads (``tile.load``, ``remote_load``, ``get``) read memory, never the cache.
* **A spin on a cached line** (``while tensor.read(flag, ...) == 0`` with nothing that refreshes
  the line) would never end; after ``SPIN_LIMIT`` reads of one cached line with no primitive,
  fence or cacheinvalid in between, the read fails with a report instead of hanging.

Limits: the device writes back a whole 64-byte line on a clean (a stale neighbour can overwrite a
peer's value, pto-isa#322); this model writes back only the elements the rank wrote.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from pldemu.ir import BufferKind, Op
from pldemu.mpi import precise_sleep
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.instrument.schedule import Reading, WriteBuffer, deferred_handlers
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Buffer, TensorRef, flat_cell

LINE_BYTES = 64
"""The scalar data cache's line size (the device's ``dcci`` granule)."""

PUBLISH_WAIT_S = 5.0
"""How long a rank about to land what its last call's end completed waits, at most, for the targets to
have started this call too (``_Fenced._land_completed``)."""

SPIN_LIMIT = 100_000
"""Reads of one cached line with no primitive, fence or cacheinvalid in between that count as a spin."""


@dataclass(slots=True)
class _Line:
    """One cached line: elements ``start .. start + len(data)`` of ``buffer``'s packed order."""

    buffer: Buffer
    start: int
    data: np.ndarray
    dirty: np.ndarray
    epoch: int = 0
    hits: int = 0
    fill: int = 0
    """Which fill of the cache made this line (its ``fills`` count then): the race detector's stamp."""


def _elements_per_line(buffer: Buffer) -> int:
    return max(1, LINE_BYTES // buffer.array.dtype.itemsize)


def _write_back(buffer: Buffer, start: int, data: np.ndarray, dirty: np.ndarray) -> None:
    flat = buffer.array.reshape(-1) if buffer.array.flags.c_contiguous else None
    for i in np.flatnonzero(dirty):
        if flat is not None:
            flat[start + i] = data[i]
        else:
            buffer.array[np.unravel_index(start + int(i), buffer.shape)] = data[i]


class LineCache:
    """One rank's scalar data cache of 64-byte lines of its own data windows (see the module docstring)."""

    def __init__(self, rank: int, writes: WriteBuffer) -> None:
        self.rank = rank
        self._writes = writes
        self._lines: dict[tuple[int, int], _Line] = {}
        self._epoch = 0
        self.fills = 0
        """Lines ever filled from memory (a test can see that the cache served reads)."""

    def progress(self) -> None:
        """A primitive, fence or cacheinvalid ran: whatever spins on a line is not a pure spin."""
        self._epoch += 1

    def _line(self, buffer: Buffer, cell: int) -> _Line:
        per = _elements_per_line(buffer)
        n = cell // per
        key = (buffer.index, n)
        line = self._lines.get(key)
        if line is None:
            self._writes.flush_self()  # a fill reads this rank's memory: its own writes land first
            start = n * per
            stop = min(start + per, buffer.numel)
            data = np.array(buffer.array.reshape(-1)[start:stop] if buffer.array.flags.c_contiguous
                            else [buffer.array[np.unravel_index(i, buffer.shape)] for i in range(start, stop)],
                            dtype=buffer.array.dtype)
            self.fills += 1
            line = _Line(buffer, start, data, np.zeros(stop - start, dtype=bool), self._epoch, fill=self.fills)
            self._lines[key] = line
        return line

    def read(self, site: CallSite, buffer: Buffer, cell: int) -> Any:
        """The value of ``cell`` as the cache serves it (filling its line on a miss)."""
        line = self._line(buffer, cell)
        if line.epoch == self._epoch:
            line.hits += 1
            if line.hits > SPIN_LIMIT:
                raise ProgramError(
                    f"spin on a cached line: {site.where} read line {cell // _elements_per_line(buffer)} of "
                    f"{buffer.kind.value} '{buffer.name}' {line.hits} times with no primitive, system.fence or "
                    "system.cacheinvalid in between: the line never refreshes, so on the device this loop "
                    "never ends (put a system.cacheinvalid() in the loop)")
        else:
            line.epoch, line.hits = self._epoch, 1
        return line.data[cell - line.start].item()

    def write(self, buffer: Buffer, cell: int, value: Any) -> None:
        """A scalar store: into the cached line, dirty until a cacheinvalid cleans it."""
        line = self._line(buffer, cell)
        line.data[cell - line.start] = value
        line.dirty[cell - line.start] = True

    def invalidate(self, key: tuple[int, int] | None = None) -> int:
        """Clean and drop line ``key`` (None: every line); dirty data joins the write buffer, for the
        next fence to complete. Returns the number of lines dropped."""
        keys = list(self._lines) if key is None else ([key] if key in self._lines else [])
        for k in keys:
            line = self._lines.pop(k)
            if line.dirty.any():
                self._writes.add(self.rank, partial(_write_back, line.buffer, line.start, line.data, line.dirty))
        self.progress()
        return len(keys)

    def fill_of(self, buffer: Buffer, cell: int) -> int | None:
        """The fill number of the cached line holding ``cell`` (None: not cached)."""
        line = self._lines.get(self.key_of(buffer, cell))
        return None if line is None else line.fill

    def line_fill(self, key: tuple[int, int]) -> int | None:
        """The fill number of cached line ``key`` (None: not cached)."""
        line = self._lines.get(key)
        return None if line is None else line.fill

    def is_cached(self, key: tuple[int, int]) -> bool:
        """True if line ``key`` is in the cache."""
        return key in self._lines

    def cached_lines(self) -> int:
        """Lines in the cache now."""
        return len(self._lines)

    def lines_of(self, buffer: Buffer, start: int, stop: int) -> range:
        """The line numbers that elements ``start .. stop`` of ``buffer`` fall in."""
        per = _elements_per_line(buffer)
        return range(start // per, (stop - 1) // per + 1)

    def key_of(self, buffer: Buffer, cell: int) -> tuple[int, int]:
        """The line that holds ``cell`` of ``buffer``."""
        return buffer.index, cell // _elements_per_line(buffer)

    def tail_flush(self) -> None:
        """The call's end (PTOAS#698's tail ``dcci ENTIRE OUT``): every dirty line cleaned into the write
        buffer, complete with the call's other writes (``completion.RULE``); every line dropped."""
        self.invalidate()

    def write_back(self) -> None:
        """The tail flush (a call's end, the host's access): dirty lines to memory now, every line dropped."""
        lines, self._lines = self._lines, {}
        for line in lines.values():
            if line.dirty.any():
                _write_back(line.buffer, line.start, line.data, line.dirty)


def _cached(t: Any) -> Buffer | None:
    """The buffer behind ``t`` if scalar accesses to it go through the cache (a data window)."""
    if isinstance(t, TensorRef) and t.buffer.window is not None and t.buffer.kind is not BufferKind.SIGNAL:
        return t.buffer
    return None


class _Fenced:
    """The handlers fenced mode adds on top of deferred mode's (see the module docstring)."""

    def __init__(self, wb: WriteBuffer, cache: LineCache, plain: Mapping[Op, Handler],
                 transfers: Mapping[Op, Handler]) -> None:
        self._wb = wb
        self._cache = cache
        self._plain = dict(plain)  # notify and signal-cell scalars: straight to memory, no release
        self._inner = dict(transfers)  # deferred mode's buffering transfer handlers

    def _progress(self, op: Op) -> Handler:
        inner, cache = self._inner[op], self._cache

        def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            cache.progress()
            return inner(m, site, args)

        return handler

    def _land_completed(self, m: Machine, target: int | None = None) -> None:
        """Land the writes the last call's end completed (to ``target`` only, if given), once every rank
        they are aimed at has started this call: nothing the target did in the previous call or in the
        host code after it (consuming a result) is ordered after that end, so it must not see them, and
        it sees them here only if the timing lets it (``completion.LANDS_AT``). Waiting is only a delay
        (bounded: :data:`PUBLISH_WAIT_S`): the targets start their next call on their own."""
        wb = self._wb
        targets = wb.completed_targets(target) - {m.rank}
        board = m.status
        if targets and board is not None:
            run, deadline = board.run, time.monotonic() + PUBLISH_WAIT_S
            for t in sorted(targets):
                while board.read(t).run < run and time.monotonic() < deadline:
                    precise_sleep(50e-6)
        wb.land_completed(target)

    def _reading(self, op: Op) -> Handler:
        """A DMA read of a peer's memory: the rank's writes to it that a call's end completed land first
        (program order after their completion; ``completion.LANDS_AT``)."""
        inner, cache = self._inner[op], self._cache

        def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            cache.progress()
            if isinstance(args[1], int | np.integer):  # else the handler refuses it
                self._land_completed(m, int(args[1]))
            return inner(m, site, args)

        return handler

    def notify(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        self._wb.tick()  # not a release of pending writes: they stay pending
        self._land_completed(m)  # but what a call's end completed is visible to whatever this orders
        self._cache.progress()
        return self._plain[Op.NOTIFY](m, site, args)

    def tensor_read(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
        buffer = _cached(args[0])
        if buffer is None:
            return self._plain[Op.TENSOR_READ](m, site, args)
        cell = flat_cell("tensor.read", m.rank, m.rank, args[0], args[1])
        return self._cache.read(site, buffer, cell)

    def tensor_write(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        buffer = _cached(args[0])
        if buffer is None:
            if isinstance(args[0], TensorRef) and args[0].buffer.kind is BufferKind.SIGNAL:
                self._land_completed(m)  # a Set of a signal cell is a release, like a notify
            return self._plain[Op.TENSOR_WRITE](m, site, args)
        cell = flat_cell("tensor.write", m.rank, m.rank, args[0], args[1])
        self._cache.write(buffer, cell, args[2])
        return None

    def fence(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        self._wb.flush()  # every pending write of this rank completes, to every target, in order
        self._cache.progress()

    def cacheinvalid(self, m: Machine, site: CallSite, args: tuple[Any, ...]) -> None:
        if not args:
            self._cache.invalidate()
            return
        buffer = _cached(args[0])
        if buffer is None:
            self._cache.progress()
            return
        base = flat_cell("system.cacheinvalid", m.rank, m.rank, args[0], tuple(operator.index(i) for i in args[2]))
        self._cache.invalidate(self._cache.key_of(buffer, base))  # only the line of the view's base


def fenced_handlers(rank: int, wb: WriteBuffer, inner: Mapping[Op, Handler],
                    reads: Reading | None = None) -> tuple[LineCache, dict[Op, Handler]]:
    """This rank's line cache and the handlers of fenced mode, wrapping ``inner`` (plain or
    invariant-checking); deferred mode's transfer handlers are reused, atomics buffered too;
    ``reads``: a get's and a put's source reads stay in flight (``flight``, ``--fence-policy random``)."""
    cache = LineCache(rank, wb)
    table = dict(inner)
    table.update(deferred_handlers(wb, inner, buffers_atomics=True, reads=reads))
    f = _Fenced(wb, cache, inner, table)
    table.update({op: f._progress(op) for op in (Op.PUT, Op.WAIT)})
    table.update({op: f._reading(op) for op in (Op.GET, Op.REMOTE_LOAD)})
    table.update({
        Op.NOTIFY: f.notify,
        Op.TENSOR_READ: f.tensor_read,
        Op.TENSOR_WRITE: f.tensor_write,
        Op.FENCE: f.fence,
        Op.CACHEINVALID: f.cacheinvalid,
    })
    return cache, table


__all__ = ["LINE_BYTES", "SPIN_LIMIT", "LineCache", "fenced_handlers"]
