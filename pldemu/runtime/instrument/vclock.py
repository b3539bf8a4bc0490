"""The race detector's vector clocks at the checkpoint replay (``race_clocks``): immutable, chunked, shared.

Why: with logical threads (``race_threads``) a clock has one entry per thread of the epoch, thousands at
model scale, and the replay keeps a clock per sync event of every thread (``Resolved.segments``). As dense
tuples that is threads x events entries, and every join, tick and copy walks all of them (a fan of 1,200
independent tasks at 2 ranks: 328 MiB; docs/benchmarks.md). Most of those clocks differ from the clock
they came from in one or two places: a task's clock is its Orchestration's at its submission plus its own
entry, a drain adds one thread's entries at a time.

A :class:`VClock` is its entries (counts: never negative) cut into chunks of :data:`CHUNK`, a tuple of chunk tuples; an operation
builds only the chunks it changes and shares the others with its operands (all-zero chunks are one
object), so a clock costs ``width / CHUNK`` references plus its changed chunks, and a join of two clocks
that came from one another compares most chunks by identity. It reads as the dense tuple it stands for
(``len``, indexing, slicing, iteration, ``==`` and ``hash`` with an equal tuple), so every reader of the
replay's clocks reads the same values as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress
from operator import is_not
from typing import Any, overload

CHUNK = 64
"""Entries per chunk: a changed entry copies one chunk, a clock holds width / CHUNK references."""

_ZERO: tuple[int, ...] = (0,) * CHUNK


def _chunk(values: Sequence[int]) -> tuple[int, ...]:
    """One chunk of ``values`` (at most CHUNK of them), padded with zeros; the shared zero chunk if all are 0."""
    if not any(values):
        return _ZERO
    out = tuple(values)
    return out + _ZERO[len(out):] if len(out) < CHUNK else out


def _max(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The element-wise maximum of two chunks, as one of them when it dominates (it stays shared). Entries
    are counts (never negative), so the zero chunk adds nothing: a drain's join of a task that knew a few
    threads with an Orchestration that knows thousands compares those few chunks, not all."""
    if a is b or b is _ZERO:
        return a
    if a is _ZERO:
        return b
    m = tuple(map(max, a, b))
    return a if m == a else b if m == b else m


class VClock(Sequence[int]):
    """An immutable vector clock of ``width`` entries (see the module docstring)."""

    __slots__ = ("_hash", "chunks", "width")

    def __init__(self, chunks: tuple[tuple[int, ...], ...], width: int) -> None:
        self.chunks = chunks
        self.width = width
        self._hash: int | None = None

    @classmethod
    def of(cls, values: Iterable[int]) -> VClock:
        """The clock with these entries."""
        dense = tuple(values)
        return cls(tuple(_chunk(dense[i:i + CHUNK]) for i in range(0, len(dense), CHUNK)), len(dense))

    @classmethod
    def zeros(cls, width: int) -> VClock:
        """The clock of ``width`` entries, all 0."""
        return cls((_ZERO,) * -(-width // CHUNK), width)

    def dense(self) -> tuple[int, ...]:
        """The entries as a tuple."""
        out = tuple(chain.from_iterable(self.chunks))
        return out if len(out) == self.width else out[: self.width]

    def set(self, x: int, value: int) -> VClock:
        """This clock with entry ``x`` set to ``value``."""
        if x < 0 or x >= self.width:
            raise IndexError(f"clock entry {x} out of range for width {self.width}")
        k, i = divmod(x, CHUNK)
        old = self.chunks[k]
        if old[i] == value:
            return self
        new = (*old[:i], value, *old[i + 1:])
        return VClock((*self.chunks[:k], _ZERO if not any(new) else new, *self.chunks[k + 1:]), self.width)

    def tick(self, x: int) -> VClock:
        """This clock with entry ``x`` one more."""
        return self.set(x, self[x] + 1)

    def join(self, other: VClock) -> VClock:
        """The element-wise maximum; this clock itself when it already knows everything ``other`` does."""
        if other is self:
            return self
        if other.width != self.width:
            raise ValueError(f"joining clocks of widths {self.width} and {other.width}")
        mine, theirs = self.chunks, other.chunks
        out: list[tuple[int, ...]] | None = None
        # the chunks that are not shared, found at C speed: most are (a clock and one it came from)
        for k in compress(range(len(mine)), map(is_not, mine, theirs)):
            m = _max(mine[k], theirs[k])
            if m is not mine[k]:
                if out is None:
                    out = list(mine)
                out[k] = m
        return self if out is None else VClock(tuple(out), self.width)

    def __len__(self) -> int:
        return self.width

    @overload
    def __getitem__(self, x: int) -> int: ...

    @overload
    def __getitem__(self, x: slice) -> tuple[int, ...]: ...

    def __getitem__(self, x: int | slice) -> int | tuple[int, ...]:
        if isinstance(x, slice):
            return self.dense()[x]
        if x < 0:
            x += self.width
        if not 0 <= x < self.width:
            raise IndexError(f"clock entry {x} out of range for width {self.width}")
        return self.chunks[x // CHUNK][x % CHUNK]

    def __iter__(self) -> Iterator[int]:
        return iter(self.dense())

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, VClock):
            return other is self or (self.width == other.width and self.chunks == other.chunks)
        if isinstance(other, tuple):
            return self.dense() == other
        return NotImplemented

    def __hash__(self) -> int:
        # the hash of the equal tuple: a VClock and a tuple that are == are one dict key
        if self._hash is None:
            self._hash = hash(self.dense())
        return self._hash

    def __repr__(self) -> str:
        return f"VClock({self.dense()!r})"


def join_all(clocks: Iterable[VClock]) -> VClock:
    """The element-wise maximum of one or more clocks."""
    it = iter(clocks)
    out = next(it)
    for c in it:
        out = out.join(c)
    return out


def meet_all(clocks: Sequence[VClock]) -> VClock:
    """The element-wise minimum of one or more clocks (chunks that all of them share are kept as they are)."""
    first = clocks[0]
    if len(clocks) == 1:
        return first
    chunks = []
    for k, a in enumerate(first.chunks):
        column = [c.chunks[k] for c in clocks]
        chunks.append(a if all(b is a for b in column) else _chunk(tuple(map(min, *column))))
    return VClock(tuple(chunks), first.width)


__all__ = ["CHUNK", "VClock", "join_all", "meet_all"]
