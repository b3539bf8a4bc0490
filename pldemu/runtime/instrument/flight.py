"""DMA reads in flight in the run (``--visibility fenced --fence-policy random``; facts:
shared/reference/fences.md, PTOAS#711; the rule: ``completion``).

A DMA read of a window (a ``remote_load``, a get's source, a put's source, a ``tile.load``) runs on a
DMA engine: its bytes are read some time between its issue and the point that completes it
(``completion.RULE``: the rank's next ``system.fence``, its drain ``system.bar_all``, an all-rank join,
the call's end), and the signal of a notify issued meanwhile can overtake it. Under the ``random``
policy (the one that samples at completion) a read in flight therefore reads its source again, with
a seeded even chance, when it completes: the bytes may be those of any write that landed after the
issue (the overwrite a "read, notify consumed, peer overwrites" program invites). Where the bytes go
decides what else completes the read first:

* a ``remote_load``'s or a ``tile.load``'s tile: the first op that uses the tile (which waits for them);
* a get into a rank-local tensor: the first op that uses that tensor;
* a get into a window, a put: the landing of the write that carries the bytes (a write cannot land
  bytes not yet read).

Under ``latest`` (deterministic: a missing fence shows on every call) the bytes stay the issue's; the
race detector reports the read in flight either way (``missing fence (read in flight)``,
``race_fenced``). The draws come from one seeded stream per rank, in the rank's program order, so a
seed replays the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pldemu.ir import BufferKind, Op
from pldemu.runtime.instrument.schedule import Stream
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import TensorRef, Tile

STREAM_FLIGHT = 3
"""The seeded stream (after schedule's jitter, skew and visibility streams) of the completion draws."""

LATE = 0.5
"""The chance that a read in flight takes the bytes of its completion rather than its issue's."""

Key = tuple[str, int]
"""What completes a read when an op uses it: ("tile", id of the tile) or ("tensor", buffer index)."""


@dataclass(slots=True)
class Read:
    """One read in flight: its bytes are in ``dest``; ``again()`` reads its source now."""

    dest: np.ndarray
    again: Callable[[], np.ndarray]
    keep: object
    """What ``dest`` belongs to (a tile): kept alive so that its id stays this read's key."""
    done: bool = False


class Flight:
    """One rank's DMA reads in flight (see the module docstring)."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._reads: dict[Key, list[Read]] = {}
        self._carried: list[Read] = []
        """Reads whose bytes a pending write carries (a put, a get into a window): no op uses them."""

    def issue(self, dest: np.ndarray, again: Callable[[], np.ndarray], key: Key | None = None,
              keep: object = None) -> Read:
        """A read that put its issue's bytes in ``dest``; ``key``: the tile or tensor whose use completes
        it (None: the write that carries it settles it, :meth:`settle`)."""
        r = Read(dest, again, keep)
        if key is None:
            self._carried.append(r)
        else:
            self._reads.setdefault(key, []).append(r)
        return r

    def settle(self, r: Read) -> None:
        """Read ``r`` completes now (if it has not yet)."""
        if r.done:
            return
        r.done = True
        if self._stream.next() < LATE:
            np.copyto(r.dest, np.asarray(r.again()).reshape(r.dest.shape), casting="unsafe")

    def complete(self) -> None:
        """A completion point (``completion.RULE``): every read in flight has its bytes, in issue order
        per kind."""
        reads, carried = self._reads, self._carried
        self._reads, self._carried = {}, []
        for rs in reads.values():
            for r in rs:
                self.settle(r)
        for r in carried:
            self.settle(r)

    def consume(self, args: tuple[object, ...]) -> None:
        """An op is about to use ``args``: a tile or tensor still being read among them gets its bytes first."""
        for a in args:
            key: Key | None = ("tile", id(a)) if isinstance(a, Tile) else (
                ("tensor", a.buffer.index) if isinstance(a, TensorRef) else None)
            rs = self._reads.pop(key, None) if key is not None else None
            for r in rs or ():
                self.settle(r)

    def handlers(self, table: Mapping[Op, Handler], plain: Mapping[Op, Handler]) -> dict[Op, Handler]:
        """``table`` with reads in flight: remote_loads and tile.loads of a window issue one (the
        deferred get and put handlers issue theirs through :meth:`issue`), fence and drain complete
        them, every other op first lands the tiles and tensors it uses; ``plain``: the handlers that read
        again."""
        out = {op: self._using(h) for op, h in table.items()}
        out[Op.REMOTE_LOAD] = self._using(self._loading(table[Op.REMOTE_LOAD], plain[Op.REMOTE_LOAD], 0))
        out[Op.TILE_LOAD] = self._using(self._loading(table[Op.TILE_LOAD], plain[Op.TILE_LOAD], 0))
        for op in (Op.FENCE, Op.BAR_ALL):
            out[op] = self._completing(table[op])
        return out

    def _using(self, inner: Handler) -> Handler:
        def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            if self._reads:
                self.consume(args)
            return inner(m, site, args)

        return handler

    def _completing(self, inner: Handler) -> Handler:
        def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            self.complete()
            return inner(m, site, args)

        return handler

    def _loading(self, inner: Handler, plain: Handler, src: int) -> Handler:
        """A load into a tile from the data window ``args[src]``: the tile is in flight until it is used."""
        def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Any:
            tile = inner(m, site, args)
            if isinstance(tile, Tile) and _data_window(args[src]):
                self.issue(tile.data, lambda: plain(m, site, args).data, ("tile", id(tile)), tile)
            return tile

        return handler


def _data_window(t: object) -> bool:
    """True if ``t`` is a view of a data window (the reads the race detector keeps in flight too)."""
    return isinstance(t, TensorRef) and t.buffer.window is not None and t.buffer.kind is not BufferKind.SIGNAL


__all__ = ["LATE", "STREAM_FLIGHT", "Flight", "Read"]
