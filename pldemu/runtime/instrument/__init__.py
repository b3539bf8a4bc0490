"""Watching or disturbing a run: the adversarial schedule, the protocol invariants, the race detector
and the trace, set up by one :func:`build`.

``build(machine, options)`` returns None when ``options`` ask for none of it (a plain run then pays for
no instrument and imports neither the race detector nor the tracer), else the :class:`Instruments` of this rank: the schedule and
the invariant checker are made at once (before the program is compiled: they fill
``machine.overrides``, which the compiler reads); the tracer and the race detector are made by
:meth:`Instruments.start` once the windows exist (collective). The modules: ``schedule``,
``invariants``, ``races`` (with ``race_clocks`` and ``race_fenced``), ``trace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pldemu.ir import Op
from pldemu.runtime.instrument.schedule import (
    PRIMITIVES,
    Schedule,
    deferred_handlers,
    delayed,
    schedule_active,
)
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.monitor import Monitor
from pldemu.runtime.ops import HANDLERS
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.runtime.instrument.invariants import InvariantChecker
    from pldemu.runtime.instrument.races import RaceDetector
    from pldemu.runtime.instrument.trace import Tracer


@dataclass
class Instruments:
    """This rank's instruments; None where ``options`` did not ask for one."""

    machine: Machine
    options: RuntimeOptions
    schedule: Schedule | None = None
    invariants: InvariantChecker | None = None
    tracer: Tracer | None = None
    races: RaceDetector | None = None

    @property
    def call_monitors(self) -> list[Monitor]:
        """The monitors made by :func:`build`, in the order to attach them: the schedule (skew before
        each call; it wants no op), then the invariant checker (call numbers for its reports)."""
        return [m for m in (self.schedule, self.invariants) if m is not None]

    def start(self, comm: MPI.Intracomm, program: str) -> list[Monitor]:
        """Collectively build the tracer and the race detector ``options`` ask for, on the machine's
        buffers and call sites; return their monitors in the order to attach them (the detector
        first: its work brackets the tracer's slices, so slices time the ops themselves)."""
        out: list[Monitor] = []
        if self.options.trace is None and not self.options.race_detect:
            return out
        from pldemu.runtime.instrument.races import RaceDetector
        from pldemu.runtime.instrument.trace import Tracer

        machine = self.machine
        if self.options.trace is not None:
            self.tracer = Tracer(comm, self.options.trace, machine.buffers, machine.sites, program)
        if self.options.race_detect:
            clock = self.tracer.clock.now if self.tracer is not None else None
            from pldemu.runtime.instrument.fenced import LineCache

            cache = self.schedule.cache if self.schedule is not None else None
            self.races = RaceDetector(comm, machine.buffers, machine.sites, clock=clock,
                                      cache=cache if isinstance(cache, LineCache) else None)
            machine.pending_races = self.races.deadlock_causes  # a deadlock report names the hanging call's races
            if self.tracer is not None:
                self.races.on_reports = self.tracer.add_races
            out.append(self.races)
            if machine.tasks is not None:  # the program submits tasks: races between them (race_tasks)
                from pldemu.runtime.instrument.race_tasks import TaskRaces

                tasks = TaskRaces(machine.tasks, machine.rank, machine.buffers, machine.sites)
                self.races.extra_reports = tasks.take
                self.races.attach_tasks(machine.tasks)  # cross-rank happens-before per task (race_threads)
                out.append(tasks)
        if self.tracer is not None:
            out.append(self.tracer)
        return out

    def close(self) -> None:
        """Collective: rank 0 writes the trace."""
        if self.tracer is not None:
            self.tracer.close()

    def free(self) -> None:
        """Collective: free the detector's communicator."""
        if self.races is not None:
            self.races.free()


def build(machine: Machine, options: RuntimeOptions) -> Instruments | None:
    """This rank's instruments for ``options`` on ``machine`` (None: nothing asked). No MPI traffic:
    the schedule and the invariant checker fill ``machine.overrides`` now, before compiling; the
    tracer and the race detector come with :meth:`Instruments.start`."""
    if not (schedule_active(options) or options.trace is not None or options.race_detect):
        return None
    made = Instruments(machine, options)
    if schedule_active(options):
        made.schedule, made.invariants = prepare(machine)
    return made


def prepare(m: Machine) -> tuple[Schedule, InvariantChecker | None]:
    """Build this rank's schedule (and invariant checker) and fill ``m.overrides`` accordingly."""
    from pldemu.runtime.instrument.invariants import InvariantChecker

    options = m.options
    sched = Schedule(options, m.rank, m.nranks)
    checker = InvariantChecker(m.rank, m.buffers) if options.invariants else None
    table: dict[Op, Handler] = dict(HANDLERS)
    if checker is not None:
        table.update(checker.handlers(table))
        m.writers = checker.writers  # the deadlock report's wait-for edges, for any signal layout
        m.known_causes = checker.known_causes  # and its root cause
    if sched.writes is not None and options.visibility == "fenced":
        from pldemu.runtime.instrument.fenced import fenced_handlers

        base = dict(table)
        flight = None
        if options.fence_policy == "random":  # reads in flight may take their completion's bytes
            from pldemu.runtime.instrument.flight import STREAM_FLIGHT, Flight
            from pldemu.runtime.instrument.schedule import Stream

            flight = Flight(Stream(options.seed, m.rank, STREAM_FLIGHT))
        sched.cache, fenced = fenced_handlers(m.rank, sched.writes, table, flight)
        table.update(fenced)
        if flight is not None:
            table.update(flight.handlers(table, base))
            sched.flight = flight  # the call's end and the host's joins complete the reads too
    elif sched.writes is not None:
        table.update(deferred_handlers(sched.writes, table))
    if sched.delays:
        for op in PRIMITIVES:
            table[op] = delayed(sched, table[op])
    m.overrides.update({op: h for op, h in table.items() if h is not HANDLERS[op]})
    return sched, checker


__all__ = ["Instruments", "build", "prepare"]
