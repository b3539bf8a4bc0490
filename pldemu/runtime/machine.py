"""The per-rank state that op handlers work on."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from pldemu.ir import DType, Op, WaitCmp
from pldemu.mpi import DEFAULT_POLICY, TIMED_POLICY
from pldemu.runtime.errors import Cause, DeadlockError
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.sites import CallSite, Location
from pldemu.runtime.status import RankState, RankStatus, StatusBoard, WaitTarget, format_report
from pldemu.runtime.truncation import TruncationLog
from pldemu.runtime.values import Buffer, BufferTable, CommCtx, Poison, unravel
from pldemu.windows import WaitTimeout, WindowError

REPORT_SETTLE = 0.25
"""Seconds a timed-out rank waits before reading the board (see ``Machine.deadlock``)."""


class Machine:
    """One rank of a program instance: who it is, its buffers, options, status board, call sites.

    Built before any MPI traffic (so the program can be prepared and validated first); the buffers'
    storage and the status board are bound once the windows are allocated.
    """

    def __init__(self, rank: int, nranks: int, options: RuntimeOptions, buffers: Sequence[Buffer]) -> None:
        self.rank = rank
        self.nranks = nranks
        self.ctx = CommCtx(rank, nranks)
        self.options = options
        self.timeout = options.timeout
        self.wait_policy = DEFAULT_POLICY if options.blocking_waits else TIMED_POLICY
        """The back-off of every ``pld.system.wait`` of this instance."""
        self.stage_pieces = options.stage_pieces
        self.poison = Poison(options.poison)
        self.buffers = BufferTable(buffers)
        """The declared buffers, then the ones this run's ``tensor.create`` statements allocated
        (``local_buffer``; ``Buffer.index`` is the position here, the key of every per-buffer record); a created
        one's storage is released once no value reaches it (its index then reads as a tombstone)."""
        self.declared = len(self.buffers)
        self.sites: list[CallSite] = []
        self.site_pool: dict[tuple[Op, Location, int], list[CallSite]] = {}
        """The sites made so far by op, location and how many calls of both a compile had met before (each
        distinct call there once): a program loaded in place of this one (a prepared worker's next dispatch
        with other host scalars) takes the site it had for an equal call at the same place instead of a new
        one, so alternating programs do not grow ``sites`` (each site holds its call's IR) dispatch after
        dispatch."""
        self.status: StatusBoard | None = None
        self.writers: Callable[[int, int, int], tuple[tuple[int, ...] | None, int]] | None = None
        """``writers(buffer index, owner, flat cell)``: the ranks that have ever notified that cell (None:
        not known) and how many wrote it with Set, for the deadlock report's wait-for edges and its note
        on Set where AtomicAdd was needed (the invariant checker's, when it runs)."""
        self.known_causes: Callable[[list[RankStatus], Callable[[int], str]], tuple[Cause, ...]] | None = None
        """``known_causes(statuses, where)``: the invariant violations every rank has published on the
        status board, named by the deadlock report as its likely root cause (the invariant checker's)."""
        self.pending_races: Callable[[list[RankStatus], float], tuple[Cause, ...]] | None = None
        """``pending_races(statuses, wait timeout)``: the races of what the ranks did since the last
        checkpoint (the hanging call), found collectively when every rank is blocked (the race
        detector's ``deadlock_causes``); None without the detector."""
        self.hosts: tuple[str, ...] = ()
        """Every rank's host when the job spans several (named in the wait-for report), else empty."""
        self.truncations = TruncationLog(rank, self._call)
        """Where the compiled truncating operators (``tdiv`` / ``trem``) record what differs from floor
        semantics (``pldemu.runtime.truncation``)."""
        self.host_task: Callable[[int], None] | None = None
        """Runs host task N (``system.host_task``, a SubWorker) where the embedding can: a resident job's
        rank hands it to the process that called the program; None elsewhere (the op is refused)."""
        self.task_ids: Callable[[], int] = itertools.count().__next__
        """The next task id of this rank (a program-order task takes one when submitted)."""
        self.tasks: Any = None
        """This rank's ``pldemu.runtime.tasksched.TaskScheduler``, made when a function that submits tasks is
        compiled for a concurrent task order, or for program order with a task-aware check (``taskplan.graph_needed``);
        None otherwise."""
        self.park: Callable[[CallSite, Buffer, Any, int, int], None] | None = None
        """Called by a wait that did not hold at its first poll, before it blocks (the task scheduler's: a
        block of a task parks on its core there until the condition holds); None: nothing to do."""
        self.overrides: dict[Op, Callable[..., Any]] = {}
        """Handlers that replace ``HANDLERS`` entries for this instance (adversarial schedules,
        deferred visibility, invariant checks: ``pldemu.runtime.instrument.schedule``); consulted when a call
        site is compiled, never per executed op, so an empty table costs nothing."""

    def local_buffer(self, name: str, dtype: DType, shape: tuple[int, ...]) -> Buffer:
        """A rank-local buffer allocated while the program runs (``tensor.create``): a buffer of its own,
        like a declared one to the race checks and the task graph, poisoned (or zero) until written; its
        storage is released once no value reaches it (``BufferTable``)."""
        return self.buffers.create(name, dtype, shape, self.poison.array(shape, dtype.np))

    def drop_created(self) -> None:
        """Forget the previous run's ``tensor.create`` buffers (each run allocates its own)."""
        self.buffers.drop_created()

    def _call(self) -> int:
        return self.status.run if self.status is not None else 0

    def site_text(self, site_id: int) -> str:
        if 0 <= site_id < len(self.sites):
            return self.sites[site_id].where
        return f"<site {site_id}>"

    def deadlock(self, site: CallSite, buffer: Buffer, err: WaitTimeout) -> DeadlockError:
        """Publish that this rank timed out, read every rank's record and blocked cell one-sidedly,
        and build the DeadlockError carrying the wait-for report."""
        board = self.status
        assert board is not None
        board.observe(err.observed)
        board.set_state(RankState.TIMED_OUT)
        # Ranks stuck together time out together: give the others a moment to say so, so that only
        # the lowest of them prints the full report.
        board.idle(REPORT_SETTLE)
        statuses = board.snapshot()
        targets: dict[int, WaitTarget] = {}
        for st in statuses:
            if not st.blocked or not 0 <= st.buffer < len(self.buffers):
                continue
            buf = self.buffers[st.buffer]
            live: int | None = None
            if buf.window is not None and 0 <= st.cell < buf.numel:
                try:
                    live = int(buf.window.get(st.rank, buf.numel, st.cell, 1)[0])
                except WindowError:  # best effort: the record's observed value stands in
                    live = None
            posters, setters = self.writers(st.buffer, st.rank, st.cell) if self.writers is not None else (None, 0)
            targets[st.rank] = WaitTarget(buf.name, unravel(st.cell, buf.shape), buf.shape, live, posters, setters,
                                          buf.group)
        report, primary = format_report(self.rank, statuses, self.site_text, targets, self.timeout, self.hosts)
        t = targets.get(self.rank)
        cell = t.cell_text() if t is not None else f"cell {err.cell}"
        rel = "==" if err.cmp is WaitCmp.Eq else ">="
        head = (f"deadlock: rank {self.rank} waited {err.waited:.1f}s for {cell} {rel} {err.expected} "
                f"(observed {err.observed}) at {site.where}")
        causes = self.known_causes(statuses, self.site_text) if self.known_causes is not None else ()
        if self.pending_races is not None:  # after the board is read: the check may take a timeout
            causes += self.pending_races(statuses, self.timeout)
        return DeadlockError(head, rank=self.rank, location=site.where, report=report, primary=primary,
                             causes=causes)


Handler = Callable[[Machine, CallSite, tuple[Any, ...]], Any]
"""An op handler: ``handler(machine, site, args)`` with the call's evaluated arguments in signature
order; returns the op's value (None for effect-only ops). The table is ``pldemu.runtime.ops.HANDLERS``."""


__all__ = ["Handler", "Machine"]
