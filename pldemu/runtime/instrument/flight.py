"""DMA reads in flight in the run (``--visibility fenced --fence-policy random``; facts:
shared/reference/fences.md, PTOAS#711).

A ``remote_load`` from a peer runs on a DMA engine: its bytes are read some time between its issue
and the point that completes it (the rank's next ``system.fence``, its drain ``system.bar_all``, or
the first op that uses the tile, which waits for them), and the signal of a notify issued meanwhile
can overtake it. Under the ``random`` policy a read in flight therefore reads the peer's memory
again, with a seeded even chance, when it completes: the bytes may be those of a write that landed
after the issue (the overwrite a "read, notify consumed, peer overwrites" program invites). Under
``latest`` (deterministic: a missing fence shows on every call) the bytes stay the issue's; the race
detector reports the read in flight either way (``missing fence (read in flight)``, ``race_fenced``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from pldemu.ir import Op
from pldemu.runtime.instrument.schedule import Stream
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile

STREAM_FLIGHT = 3
"""The seeded stream (after schedule's jitter, skew and visibility streams) of the completion draws."""

LATE = 0.5
"""The chance that a read in flight takes the bytes of its completion rather than its issue's."""


@dataclass(frozen=True, slots=True)
class _Read:
    tile: Tile
    again: Callable[[], Tile]


class Flight:
    """One rank's remote_loads in flight (see the module docstring)."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._reads: dict[int, _Read] = {}  # by the tile's id (the entry keeps the tile alive)

    def issue(self, tile: Tile, again: Callable[[], Tile]) -> None:
        """A remote_load returned ``tile``; ``again`` reads the same region of the peer now."""
        self._reads[id(tile)] = _Read(tile, again)

    def complete(self) -> None:
        """A fence or drain: every read in flight has its bytes."""
        reads, self._reads = self._reads, {}
        for r in reads.values():
            self._land(r)

    def consume(self, args: tuple[object, ...]) -> None:
        """An op is about to use ``args``: a tile still in flight among them gets its bytes first."""
        for a in args:
            if isinstance(a, Tile):
                r = self._reads.pop(id(a), None)
                if r is not None:
                    self._land(r)

    def _land(self, r: _Read) -> None:
        if self._stream.next() < LATE:
            np.copyto(r.tile.data, r.again().data)

    def handlers(self, table: Mapping[Op, Handler], plain: Mapping[Op, Handler]) -> dict[Op, Handler]:
        """``table`` with reads in flight: remote_loads from a peer issue one, fence and drain complete
        them, every other op first lands the tiles it uses; ``plain``: the handlers that read again."""
        out = {op: self._using(h) for op, h in table.items()}
        out[Op.REMOTE_LOAD] = self._remote_load(table[Op.REMOTE_LOAD], plain[Op.REMOTE_LOAD])
        for op in (Op.FENCE, Op.BAR_ALL):
            out[op] = self._completing(table[op])
        return out

    def _using(self, inner: Handler) -> Handler:
        def handler(m: Machine, site: CallSite, args: tuple[object, ...]) -> object:
            if self._reads:
                self.consume(args)
            return inner(m, site, args)

        return handler

    def _completing(self, inner: Handler) -> Handler:
        def handler(m: Machine, site: CallSite, args: tuple[object, ...]) -> object:
            self.complete()
            return inner(m, site, args)

        return handler

    def _remote_load(self, inner: Handler, plain: Handler) -> Handler:
        def handler(m: Machine, site: CallSite, args: tuple[object, ...]) -> object:
            tile = inner(m, site, args)
            if isinstance(tile, Tile) and args[1] != m.rank:
                self.issue(tile, lambda: plain(m, site, args))
            return tile

        return handler


__all__ = ["LATE", "STREAM_FLIGHT", "Flight"]
