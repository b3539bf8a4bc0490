"""Signals: one notify -> wait hop and one all-to-all signal round, raw MPI against pldemu.

**Hop.** A token goes round the ring of all ranks, one notify observed by the next rank's wait per
hop (with 2 ranks: a ping-pong); the figure is the time of ``ROUNDS`` laps divided by the hops.

* raw MPI: ``Fetch_and_op(SUM)`` + ``Flush`` on the right neighbour's cell, and a poll loop of
  ``Fetch_and_op(NO_OP)`` + ``Flush`` on the own cell -- the minimal correct MPI-3 one-sided code,
  on a bare window allocated as pldemu's are (``pldemu.windows.mpi_window``); between polls it
  backs off exactly like pldemu's wait (``pldemu.mpi.Backoff``: spin, a few yields, short sleeps), so the
  two differ in their mechanisms, not in how politely they wait on an oversubscribed machine;
* pldemu: the same loop as a ``.pld`` program (``pld.system.notify`` / ``pld.system.wait``) run by the
  interpreter -- what a recipe pays per hop;
* windows: the same loop on ``pldemu.windows`` directly (no interpreter), to split the cost.

**Barrier round.** Every rank adds a credit to every peer's cell and waits for all its own cells.

* raw MPI: monotonically growing counters (``Fetch_and_op(SUM)`` + ``Flush`` per peer, then a
  ``Fetch_and_op(NO_OP)`` poll per cell); nothing to retire;
* pldemu: ``pld.tensor.barrier`` lowered and ``run()`` back to back (it also retires its credits,
  the self-clearing epilogue, so one signal buffer serves every call);
* windows: that recipe (credit, wait, retire) on ``pldemu.windows`` directly, without interpreter.

**Machine floor.** :class:`FutexPingPong`: ranks 0 and 1 hand a turn word (in rank 0's shared
segment) back and forth, each side sleeping in the kernel (``FUTEX_WAIT``) until the other's
``FUTEX_WAKE`` -- no spinning, no MPI, no pldemu: one hop is a wake plus a context switch, the least
a barrier phase whose waiter has gone to sleep can cost on this machine (the other ranks sit in a
bounded barrier meanwhile). None where there is no shared memory, futex or second rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.bench.common import (
    BenchError,
    Contender,
    Timing,
    barrier_instance,
    ratio,
    repeated,
    time_alternating,
)
from pldemu.ir import parse_program
from pldemu.ir.enums import NotifyOp, WaitCmp
from pldemu.mpi import DEFAULT_POLICY, Backoff, PollPolicy
from pldemu.windows import Window, allocate_window, mpi_window
from pldemu.windows.base import segment_array
from pldemu.windows.futex import Futex, load_futex

HOP_ROUNDS = 50
"""Laps of the token per timed sample."""

BARRIER_ROUNDS = 50
"""Barrier rounds per timed sample."""

WAIT_TIMEOUT = 60.0
"""Seconds a raw poll or a windows-layer wait may take before the run is declared stuck."""

_HOP_PROGRAM = """\
program bench_hop {{
  signal sig: int32[1]

  func main() {{
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    right = (me + 1) % nr
    for i in range(1, {rounds} + 1, 1) {{
      if me == 0 {{
        pld.system.notify(sig, right, [0], 1, op=AtomicAdd)
        pld.system.wait(sig, [0], i, cmp=Ge)
      }} else {{
        pld.system.wait(sig, [0], i, cmp=Ge)
        pld.system.notify(sig, right, [0], 1, op=AtomicAdd)
      }}
    }}
    # Every rank received exactly {rounds} credits and waited for them all: retire them.
    pld.system.notify(sig, me, [0], 0 - {rounds}, op=AtomicAdd)
  }}
}}
"""


def hop_program(rounds: int) -> Any:
    """The token-ring program: ``rounds`` laps, then the credits are retired (runs back to back)."""
    return parse_program(_HOP_PROGRAM.format(rounds=rounds), "<bench hop>")


@dataclass(frozen=True)
class SignalRow:
    """One signal measurement: raw MPI against pldemu (and optionally the bare windows layer)."""

    what: str
    raw: Timing
    pldemu: Timing
    windows: Timing | None = None

    @property
    def ratio(self) -> float:
        """pldemu / raw MPI."""
        return ratio(self.pldemu.median, self.raw.median)

    def as_dict(self) -> dict[str, Any]:
        """JSON form (microseconds)."""
        out: dict[str, Any] = {
            "what": self.what,
            "raw_us": self.raw.median * 1e6,
            "pldemu_us": self.pldemu.median * 1e6,
            "ratio": self.ratio,
            "raw_times_us": [t * 1e6 for t in self.raw.times],
            "pldemu_times_us": [t * 1e6 for t in self.pldemu.times],
        }
        if self.windows is not None:
            out["windows_us"] = self.windows.median * 1e6
        return out


class RawSignals:
    """A raw MPI-3 signal window (INT32 cells, one per rank) and the two raw loops; collective.

    The window is locked once (``Lock_all``), like pldemu's; cells only ever change through MPI
    atomics, and the counters only grow, so no reset is needed between samples.
    """

    def __init__(self, comm: MPI.Intracomm, backend: str) -> None:
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.win, local = mpi_window(comm, backend, self.size, np.int32)
        local[:] = 0
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.win.Sync()
        comm.Barrier()
        self._one = np.ones(1, dtype=np.int32)
        self._res = np.zeros(1, dtype=np.int32)
        self._noop = np.zeros(1, dtype=np.int32)
        self._seen = np.zeros(1, dtype=np.int32)
        self.hops = 0  # laps done so far: the token ring's cell 0 value
        self.rounds = 0  # barrier rounds done so far: every barrier cell's value

    def notify(self, peer: int, cell: int) -> None:
        """Atomic +1 on ``peer``'s ``cell``, complete at the target."""
        self.win.Fetch_and_op(self._one, self._res, peer, cell, MPI.SUM)
        self.win.Flush(peer)

    def wait(self, cell: int, expected: int) -> None:
        """Poll the own ``cell`` (atomic read + flush) until it reaches ``expected``, backing off
        exactly like pldemu's wait (the same ``Backoff``), so that the comparison measures the
        mechanisms, not two waiting strategies."""
        win, me, seen, noop = self.win, self.rank, self._seen, self._noop
        backoff = Backoff(DEFAULT_POLICY, time.monotonic() + WAIT_TIMEOUT)
        while True:
            win.Fetch_and_op(noop, seen, me, cell, MPI.NO_OP)
            win.Flush(me)
            if seen[0] >= expected:
                return
            if not backoff.pause():
                raise BenchError(f"raw signal wait: rank {me} cell {cell} never reached {expected}")

    def hop_laps(self, laps: int) -> None:
        """``laps`` laps of the token ring (cell 0 of every rank)."""
        right = (self.rank + 1) % self.size
        for _ in range(laps):
            self.hops += 1
            if self.rank == 0:
                self.notify(right, 0)
                self.wait(0, self.hops)
            else:
                self.wait(0, self.hops)
                self.notify(right, 0)

    def barrier_rounds(self, rounds: int) -> None:
        """``rounds`` all-to-all signal rounds: cell ``src`` counts rank src's credits. Use one
        instance for hops or for barriers, not both (cell 0 would carry both)."""
        me, n = self.rank, self.size
        for _ in range(rounds):
            self.rounds += 1
            for k in range(1, n):
                self.notify((me + k) % n, me)
            for k in range(1, n):
                self.wait((me + k) % n, self.rounds)

    def free(self) -> None:
        """Unlock and free the window (collective)."""
        self.win.Unlock_all()
        self.win.Free()


FLOOR_HOPS = 200
"""One-way hops of the futex ping-pong per timed sample."""


class FutexPingPong:
    """The machine floor of one barrier phase (see the module docstring); collective to build and
    free. :meth:`hops` runs ``FLOOR_HOPS`` one-way hops (ranks other than 0 and 1 return at once)."""

    def __init__(self, comm: MPI.Intracomm, futex: Futex) -> None:
        self.rank = comm.Get_rank()
        self.win, local = mpi_window(comm, "shared", 1, np.int32)
        local[:] = 0
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.win.Sync()
        comm.Barrier()
        buf, _ = self.win.Shared_query(0)
        self._word = segment_array(buf, np.dtype(np.int32), 1)
        self._addr = int(self._word.ctypes.data)
        self._futex = futex
        self._turn = 0  # hops done so far: the turn word's value

    @staticmethod
    def create(comm: MPI.Intracomm, backend: str) -> FutexPingPong | None:
        """The ping-pong on ``comm``, or None (no shared windows, no futex, one rank); collective."""
        futex = load_futex()
        ok = backend == "shared" and comm.Get_size() >= 2 and futex is not None
        if not comm.allreduce(ok, MPI.LAND):
            return None
        assert futex is not None
        return FutexPingPong(comm, futex)

    def hops(self) -> None:
        """``FLOOR_HOPS`` one-way hops: rank 0 moves the turn from even to odd, rank 1 back."""
        if self.rank > 1:
            return
        word, addr, futex = self._word, self._addr, self._futex
        mine = self.rank
        for _ in range(FLOOR_HOPS // 2):
            turn = self._turn
            if mine == 1:
                turn += 1
                self._await(turn)
            word[0] = turn + 1
            futex.wake(addr, 1)
            if mine == 0:
                self._await(turn + 2)
            self._turn += 2

    def _await(self, value: int) -> None:
        word, deadline = self._word, time.monotonic() + WAIT_TIMEOUT
        while True:
            seen = int(word[0])
            if seen == value:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"futex ping-pong: rank {self.rank} never saw turn {value}")
            self._futex.wait(self._addr, seen, 0.05)

    def free(self) -> None:
        """Unlock and free the window (collective)."""
        self.win.Unlock_all()
        self.win.Free()


def _windows_hop(sig: Window, laps_done: list[int], laps: int) -> None:
    me, n = sig.rank, sig.size
    right = (me + 1) % n
    for _ in range(laps):
        laps_done[0] += 1
        g = laps_done[0]
        if me == 0:
            sig.notify(right, 0, 1, NotifyOp.AtomicAdd)
            sig.wait(0, g, WaitCmp.Ge, timeout=WAIT_TIMEOUT)
        else:
            sig.wait(0, g, WaitCmp.Ge, timeout=WAIT_TIMEOUT)
            sig.notify(right, 0, 1, NotifyOp.AtomicAdd)


def windows_barrier(sig: Window, rounds: int, policy: PollPolicy = DEFAULT_POLICY) -> None:
    """``pld.tensor.barrier``'s recipe written against ``pldemu.windows`` directly, ``rounds`` times:
    credit every peer, wait for every peer's credit (backing off as ``policy`` says), retire the
    credits (self-notify -1 per source)."""
    me, n = sig.rank, sig.size
    for _ in range(rounds):
        for k in range(1, n):
            sig.notify((me + k) % n, me, 1, NotifyOp.AtomicAdd)
        for k in range(1, n):
            sig.wait((me + k) % n, 1, WaitCmp.Ge, timeout=WAIT_TIMEOUT, policy=policy)
        for k in range(1, n):
            sig.notify(me, (me + k) % n, -1, NotifyOp.AtomicAdd)


def bench_signals(comm: MPI.Intracomm, options: Any, warmup: int, iters: int) -> list[SignalRow]:
    """The hop and the barrier round, raw MPI against pldemu; collective. Figures are per hop and
    per barrier round (seconds, max over ranks, median over samples)."""
    from pldemu.runtime.interpreter import ProgramInstance

    n = comm.Get_size()
    hops = HOP_ROUNDS * n
    with ProgramInstance(hop_program(HOP_ROUNDS), comm, options) as hop:
        laps = [0]
        hop_row = _three_way(comm, hop.backend, ("notify->wait hop", "bench.hop", 1), lambda raw, sig: [
            Contender("raw", lambda: raw.hop_laps(HOP_ROUNDS), per_call=hops),
            Contender("pldemu", hop.run, per_call=hops),
            Contender("windows", lambda: _windows_hop(sig, laps, HOP_ROUNDS), per_call=hops),
        ], warmup, iters)
    with barrier_instance(comm, options) as inst:
        bar_row = _three_way(comm, inst.backend, ("barrier round", "bench.barrier", n), lambda raw, sig: [
            Contender("raw", lambda: raw.barrier_rounds(BARRIER_ROUNDS), per_call=BARRIER_ROUNDS),
            Contender("pldemu", repeated(inst.run, BARRIER_ROUNDS), per_call=BARRIER_ROUNDS),
            Contender("windows", lambda: windows_barrier(sig, BARRIER_ROUNDS), per_call=BARRIER_ROUNDS),
        ], warmup, iters)
    return [hop_row, bar_row]


def _three_way(comm: MPI.Intracomm, backend: str, what: tuple[str, str, int],
               contenders: Callable[[RawSignals, Window], list[Contender]], warmup: int, iters: int) -> SignalRow:
    """Time raw MPI, pldemu and the bare windows layer against each other: ``what`` is the row's
    name, the name and the cells of the windows layer's signal window; ``contenders(raw, sig)`` the
    three contenders."""
    name, window, cells = what
    raw = RawSignals(comm, backend)
    try:
        sig = allocate_window(comm, window, cells, np.int32, backend=backend, signal=True)
        try:
            t_raw, t_pl, t_win = time_alternating(comm, contenders(raw, sig), warmup, iters)
        finally:
            sig.free()
    finally:
        raw.free()
    return SignalRow(name, t_raw, t_pl, t_win)


__all__ = ["BARRIER_ROUNDS", "FLOOR_HOPS", "HOP_ROUNDS", "FutexPingPong", "RawSignals", "SignalRow", "bench_signals",
           "hop_program", "windows_barrier"]
