"""Building the optional instrumentation of a program instance: tracer and race detector.

Imported by ``ProgramInstance`` only when ``RuntimeOptions.trace`` or ``race_detect`` is set, so a
plain run neither imports nor pays for any of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpi4py import MPI

from pldemu.runtime.machine import Machine
from pldemu.runtime.monitor import Monitor
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.races import RaceDetector
from pldemu.runtime.trace import Tracer


@dataclass
class Instruments:
    """What ``instrument`` built; ``monitors`` in the order to attach them."""

    tracer: Tracer | None
    races: RaceDetector | None

    @property
    def monitors(self) -> list[Monitor]:
        # The detector first: its work brackets the tracer's slices, so slices time the ops themselves.
        out: list[Monitor] = []
        if self.races is not None:
            out.append(self.races)
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


def instrument(machine: Machine, comm: MPI.Intracomm, options: RuntimeOptions, program: str) -> Instruments:
    """Collectively build what ``options`` asks for, on ``machine``'s buffers and call sites."""
    tracer = None
    if options.trace is not None:
        tracer = Tracer(comm, options.trace, machine.buffers, machine.sites, program)
    races = None
    if options.race_detect:
        clock = tracer.clock.now if tracer is not None else None
        races = RaceDetector(comm, machine.buffers, machine.sites, clock=clock)
        machine.pending_races = races.deadlock_causes  # a deadlock report names the hanging call's races
        if tracer is not None:
            races.on_reports = tracer.add_races
    return Instruments(tracer, races)


__all__ = ["Instruments", "instrument"]
