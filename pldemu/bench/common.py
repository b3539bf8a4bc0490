"""What every measurement family shares: sizes, bandwidth factors, bounded syncs, alternating timing.

Methodology (nccl-tests style, with the native reference in the same run):

* every contender is timed per iteration on every rank, from the moment the rank leaves a common
  barrier to the moment its own call returns;
* contenders alternate inside each iteration (A B, then B A, ...) so that a drift of the machine
  (another job, the page cache, the oversubscribed scheduler) hits both alike;
* warm-up iterations are run the same way and thrown away;
* the per-iteration time is the **maximum over ranks** (a collective is as slow as its slowest rank),
  and the figure reported is the **median over iterations** (robust against the occasional
  descheduled rank of an oversubscribed machine).

Everything untimed (writing inputs, poisoning outputs, checking results) happens between two bounded
barriers, so it never overlaps a peer's timed region. The bounded synchronisation is
``pldemu.mpi.BoundedComm`` (:func:`bounded`), polling with the back-off of pldemu's own waits.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from mpi4py import MPI

from pldemu.harness.common import bounded as harness_bounded
from pldemu.mpi import DEFAULT_POLICY, BoundedComm

SIZE_UNITS = MappingProxyType({"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30})
"""Binary units of ``--sizes`` (``4K`` is 4096 bytes)."""

DEFAULT_SIZES: tuple[int, ...] = (4 << 10, 1 << 20)
"""Default ``--sizes``: small enough that ``pldemu bench all`` takes well under two minutes."""

SYNC_TIMEOUT = 300.0
"""Seconds a bench barrier may take before the run is declared stuck."""


class BenchError(RuntimeError):
    """The benchmark could not run (bad size for a collective, a stuck rank, ...)."""


def parse_size(text: str) -> int:
    """``4096``, ``4K``, ``1M``, ``16MiB``, ``2G`` -> bytes (binary units); ValueError otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", text)
    if m is None:
        raise ValueError(f"bad size {text!r}: expected a number of bytes with an optional K, M or G suffix")
    value = int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]
    if value < 1:
        raise ValueError(f"bad size {text!r}: must be at least 1 byte")
    return value


def parse_sizes(text: str) -> tuple[int, ...]:
    """A comma-separated ``--sizes`` list, in the order given, duplicates dropped."""
    out: list[int] = []
    for part in text.split(","):
        if part.strip():
            size = parse_size(part)
            if size not in out:
                out.append(size)
    if not out:
        raise ValueError(f"bad size list {text!r}: no sizes")
    return tuple(out)


def format_size(nbytes: int) -> str:
    """The shortest exact binary spelling: ``4K``, ``16M``, ``1536`` (``parse_size`` inverts it)."""
    for unit in ("G", "M", "K"):
        scale = SIZE_UNITS[unit]
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def bus_factor(name: str, nranks: int) -> float:
    """nccl-tests' busbw/algbw factor: what a rank's link must carry relative to the buffer size.

    allreduce 2(n-1)/n; reduce_scatter, allgather, all_to_all(_v) (n-1)/n; broadcast 1; barrier 0.
    """
    n = nranks
    if name == "allreduce":
        return 2 * (n - 1) / n
    if name in ("reduce_scatter", "allgather", "all_to_all", "all_to_all_v"):
        return (n - 1) / n
    if name == "broadcast":
        return 1.0
    return 0.0


def gbps(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s (10^9 bytes per second, as nccl-tests); 0 for a zero or NaN time."""
    if not seconds > 0:
        return 0.0
    return nbytes / seconds / 1e9


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is not positive."""
    return a / b if b > 0 else math.nan


# ----------------------------------------------------------------------------------------------
# Bounded synchronisation (never hang: a stuck peer becomes a BenchError on every rank)
# ----------------------------------------------------------------------------------------------


def _stuck(what: str) -> BenchError:
    return BenchError(f"{what} did not complete in {SYNC_TIMEOUT:g}s (a rank is stuck or gone)")


def bounded(comm: MPI.Comm) -> BoundedComm:
    """``comm`` with the benchmark's bounded collectives: they poll with the back-off of pldemu's own
    waits (spin, a few yields, then sleeps of 10-100 us: an oversubscribed peer gets the core, and the
    exit skew of a barrier stays small) and raise BenchError after :data:`SYNC_TIMEOUT` seconds."""
    return harness_bounded(comm, SYNC_TIMEOUT, _stuck, DEFAULT_POLICY)


def barrier_instance(comm: MPI.Intracomm, options: Any) -> Any:
    """A ``ProgramInstance`` of the lowered ``pld.tensor.barrier`` on ``comm`` (collective; use as a
    context manager): the barrier round several families time."""
    from pldemu.collectives import CollectiveSpec, collective_program
    from pldemu.lowering import lower_composite_ops
    from pldemu.runtime.interpreter import ProgramInstance

    bar = collective_program(CollectiveSpec("barrier", nranks=comm.Get_size()))
    return ProgramInstance(lower_composite_ops(bar.program), comm, options)


def repeated(fn: Callable[[], object], times: int) -> Callable[[], None]:
    """One timed call that runs ``fn`` ``times`` times in a row (a contender with ``per_call=times``)."""

    def run() -> None:
        for _ in range(times):
            fn()

    return run


# ----------------------------------------------------------------------------------------------
# Alternating timing
# ----------------------------------------------------------------------------------------------


@dataclass
class Contender:
    """One thing being timed: ``run()`` is the timed call; ``prepare()`` (before) and ``check()``
    (after, returns #wrong on this rank) are untimed. ``per_call`` divides the measured time (a
    contender that does R rounds per call reports per-round figures)."""

    name: str
    run: Callable[[], object]
    prepare: Callable[[], None] | None = None
    check: Callable[[], int] | None = None
    per_call: int = 1


@dataclass(frozen=True)
class Timing:
    """Figures of one contender: per-iteration times (max over ranks) and #wrong summed over ranks
    and iterations (-1: not checked)."""

    name: str
    times: tuple[float, ...]
    wrong: int

    @property
    def median(self) -> float:
        """Median over iterations of the slowest rank's time (seconds)."""
        return float(np.median(self.times)) if self.times else math.nan

    @property
    def best(self) -> float:
        """Fastest iteration (seconds)."""
        return min(self.times) if self.times else math.nan


def time_alternating(
    comm: MPI.Comm, contenders: Sequence[Contender], warmup: int, iters: int
) -> list[Timing]:
    """Time ``contenders`` against each other (see the module docstring); collective.

    Iteration ``i`` runs them in order when ``i`` is even and reversed when odd. Each timed call is
    bracketed: prepare, barrier, [run], barrier, check. The second barrier means every rank's call
    is over before anyone checks (a put lands in a peer's window) or prepares the next call (a
    broadcast root must not overwrite data a slow peer is still reading). Checks are skipped during
    warm-up.
    """
    bc = bounded(comm)
    samples: list[list[float]] = [[] for _ in contenders]
    wrong = [0 for _ in contenders]
    checked = [c.check is not None for c in contenders]
    perf = time.perf_counter
    for it in range(warmup + iters):
        order = list(range(len(contenders)))
        if it % 2:
            order.reverse()
        for k in order:
            c = contenders[k]
            if c.prepare is not None:
                c.prepare()
            bc.barrier(f"the barrier before {c.name}")
            t0 = perf()
            c.run()
            dt = perf() - t0
            bc.barrier(f"the barrier after {c.name}")
            if it >= warmup:
                samples[k].append(dt / c.per_call)
                if c.check is not None:
                    wrong[k] += c.check()
    out = []
    for k, c in enumerate(contenders):
        times = bc.allreduce(np.asarray(samples[k], dtype=np.float64), MPI.MAX, "max over ranks") if iters else ()
        total = int(bc.allreduce([wrong[k]], MPI.SUM, "sum over ranks")[0]) if checked[k] else -1
        out.append(Timing(c.name, tuple(float(t) for t in times), total))
    return out


__all__ = [
    "DEFAULT_SIZES",
    "SIZE_UNITS",
    "SYNC_TIMEOUT",
    "BenchError",
    "Contender",
    "Timing",
    "barrier_instance",
    "bounded",
    "bus_factor",
    "format_size",
    "gbps",
    "parse_size",
    "parse_sizes",
    "ratio",
    "repeated",
    "time_alternating",
]
