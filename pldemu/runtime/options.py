"""Every runtime knob in one frozen dataclass.

The runtime never reads the environment: commands build a ``RuntimeOptions`` from their arguments and
pass it down, so a run is fully described by its program, its communicator and this object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

WINDOW_BACKENDS = ("auto", "shared", "rma", "hybrid")
"""Accepted values of ``RuntimeOptions.windows`` (see ``pldemu.windows.choose_backend``)."""

VISIBILITY_MODES = ("eager", "deferred", "fenced")
"""Accepted values of ``RuntimeOptions.visibility`` (see ``pldemu.runtime.instrument.schedule``, ``pldemu.runtime.instrument.fenced``)."""

FENCE_POLICIES = ("latest", "random")
"""Accepted values of ``RuntimeOptions.fence_policy`` (see ``pldemu.runtime.instrument.fenced``)."""

PLATFORM_CLUSTERS: Mapping[str, int] = MappingProxyType({"a2a3": 24, "a5": 36, "a2a3sim": 8, "a5sim": 8})
"""Clusters (1 AIC + 2 AIV each) per platform (simpler ``platform_config.h``; the simulators take
``SIM_AUTO_BLOCKDIM = 8``): ``../shared/reference/pypto-task-graph.md`` §1."""

DEFAULT_CLUSTERS = 8
"""``RuntimeOptions.cores`` when nothing names a platform: pypto's simulators' count."""

TASK_ORDERS = ("random", "fifo", "program")
"""Accepted values of ``RuntimeOptions.task_order`` (see ``pldemu.runtime.tasksched``)."""


@dataclass(frozen=True)
class RuntimeOptions:
    """How a program instance runs.

    ``timeout``: seconds one ``pld.system.wait`` may block before the deadlock report is printed and
    ``DeadlockError`` raised. ``windows``: RMA window back end (``auto`` picks ``shared`` when every
    rank is on one node). ``seed``: seed for the randomised knobs to come (jitter, stragglers); it is
    recorded in reports so a run can be repeated. ``poison``: fill data windows, local tensors and fresh
    tiles with poison (NaN for floats, the dtype minimum for signed integers) rather than zero, so reads
    of never-written data stand out. ``stage_pieces``: move every put/get through its stage tile one
    stage-sized piece at a time (one window operation per piece, so a concurrent reader can see a
    partly landed transfer, as on the hardware); off, each transfer is a single window operation.
    ``race_detect``: vector-clock happens-before race detection on data windows
    (``pldemu.runtime.instrument.races``; ``inst.races.check(comm)`` reports). ``trace``: write a Chrome/Perfetto
    trace of every rank's ops to this JSON file when the instance closes (``pldemu.runtime.instrument.trace``).
    Both off cost nothing: the instance compiles no instrumentation at all.

    Adversarial schedules (``pldemu.runtime.instrument.schedule``; every draw comes from a generator seeded by
    ``(seed, rank)``, so a seed replays the same delays): ``jitter_us``: before every primitive (put,
    get, remote_load, notify, wait) sleep a uniform random 0..jitter_us microseconds.
    ``straggler``: ``(rank, us)``: that rank sleeps ``us`` more before every primitive. ``skew_us``:
    every call starts after a uniform random 0..skew_us microseconds. ``visibility``: ``eager``
    (a put or window store is visible when it returns) or ``deferred`` (it is buffered per rank and
    becomes visible only at the rank's next notify, or at a seeded random later point; see the
    module docstring), or ``fenced`` (the device's weak order: only ``system.fence`` lands buffered
    writes, scalar reads and writes of windows go through a per-rank line cache that only
    ``system.cacheinvalid`` cleans; ``pldemu.runtime.instrument.fenced``). ``fence_policy``: in fenced mode,
    ``latest`` (a write stays pending until a fence or a host synchronisation, so a missing fence gives
    wrong data on every call) or ``random`` (it may also land at a seeded random later point, as in
    deferred mode). ``insert_fences``: in fenced mode, run InsertCommFence and the toolchain's
    drains (``pldemu.lowering.insert_fences``) on the program before it runs (False: run it as
    written). ``invariants``: check the credit protocol's invariants as the program runs
    (``pldemu.runtime.instrument.invariants``: no cell ever negative, never Set and AtomicAdd on one cell).
    All off (the defaults) cost nothing: no handler is wrapped.

    ``cell_check``: every SIGNAL cell on every rank must be 0 at rest (at each block end of repeated
    calls, and after a single run checked with ``invariants``); False for a program that leaves cells
    non-zero on purpose.

    ``truncation_warn``: a ``tdiv`` / ``trem`` (C's truncating division and remainder: what pypto's code
    generators emit for ``//`` and ``%``) whose value differs from floor semantics is a warning, printed,
    rather than a finding that fails the run (exit 1; ``pldemu.runtime.truncation``).

    ``task_order``: how one rank's tasks (pypto's ``pl.at`` / ``pl.spmd`` / kernel calls) run
    (``pldemu.runtime.tasksched``): ``random`` (concurrently, a seeded scheduler choosing among the ready
    ones, by ``(seed, rank, call)``), ``fifo`` (concurrently, the Orchestration first, then submission order)
    or ``program`` (each task at its submission, in program order). ``cores``: the clusters (1 AIC + 2 AIV
    each) the tasks share; None: the platform's (8, pypto's simulators'; the pypto front end takes its
    ``--platform``'s).

    ``blocking_waits``: a ``pld.system.wait`` still unsatisfied after its spins sleeps in the kernel
    on the cell until the notify that changes it (shared windows on Linux; ``pldemu.windows.shared``);
    False forces the timed back-off between polls (``pldemu.mpi.TIMED_POLICY``), which is also what
    runs wherever kernel sleeps are unavailable.
    """

    timeout: float = 30.0
    windows: str = "auto"
    seed: int = 0
    poison: bool = True
    stage_pieces: bool = False
    race_detect: bool = False
    trace: str | None = None
    jitter_us: float = 0.0
    straggler: tuple[int, float] | None = None
    skew_us: float = 0.0
    visibility: str = "eager"
    fence_policy: str = "latest"
    insert_fences: bool = True
    invariants: bool = False
    blocking_waits: bool = True
    cell_check: bool = True
    truncation_warn: bool = False
    task_order: str = "random"
    cores: int | None = None

    def __post_init__(self) -> None:
        t = self.timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"RuntimeOptions.timeout must be a positive number of seconds, got {t!r}")
        if self.windows not in WINDOW_BACKENDS:
            raise ValueError(
                f"RuntimeOptions.windows must be one of {', '.join(WINDOW_BACKENDS)}, got {self.windows!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"RuntimeOptions.seed must be an integer, got {self.seed!r}")
        if self.trace is not None and (not isinstance(self.trace, str) or not self.trace):
            raise ValueError(f"RuntimeOptions.trace must be a file path or None, got {self.trace!r}")
        for name in ("jitter_us", "skew_us"):
            us = getattr(self, name)
            if isinstance(us, bool) or not isinstance(us, (int, float)) or not math.isfinite(us) or us < 0:
                raise ValueError(f"RuntimeOptions.{name} must be a number of microseconds >= 0, got {us!r}")
        st = self.straggler
        if st is not None and not (
            isinstance(st, tuple) and len(st) == 2
            and isinstance(st[0], int) and not isinstance(st[0], bool) and st[0] >= 0
            and isinstance(st[1], (int, float)) and not isinstance(st[1], bool) and math.isfinite(st[1])
            and st[1] > 0
        ):
            raise ValueError(f"RuntimeOptions.straggler must be None or (rank >= 0, microseconds > 0), got {st!r}")
        if self.visibility not in VISIBILITY_MODES:
            raise ValueError(
                f"RuntimeOptions.visibility must be one of {', '.join(VISIBILITY_MODES)}, got {self.visibility!r}"
            )
        if self.fence_policy not in FENCE_POLICIES:
            raise ValueError(
                f"RuntimeOptions.fence_policy must be one of {', '.join(FENCE_POLICIES)}, got {self.fence_policy!r}"
            )
        if self.task_order not in TASK_ORDERS:
            raise ValueError(
                f"RuntimeOptions.task_order must be one of {', '.join(TASK_ORDERS)}, got {self.task_order!r}")
        c = self.cores
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise ValueError(f"RuntimeOptions.cores must be None or a number of clusters >= 1, got {c!r}")
        for name in ("poison", "stage_pieces", "race_detect", "invariants", "blocking_waits", "cell_check",
                     "insert_fences", "truncation_warn"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"RuntimeOptions.{name} must be True or False, got {value!r}")


DEFAULT_OPTIONS = RuntimeOptions()
"""The defaults (immutable, so one shared instance is safe as a default argument)."""

__all__ = ["DEFAULT_CLUSTERS", "DEFAULT_OPTIONS", "FENCE_POLICIES", "PLATFORM_CLUSTERS", "TASK_ORDERS", "VISIBILITY_MODES", "WINDOW_BACKENDS", "RuntimeOptions"]
