"""Monitors and listeners, instrumentation off, and a closed instance: one body each, run on COMM_SELF
in the plain pytest process and on COMM_WORLD under MPI (``self_and_world``, see tests/conftest.py).
Every rank runs the same self-contained program, so what one rank sees does not depend on the others."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import instance
from mpi4py import MPI
from shared_programs import self_sync_program

from pldemu.ir import Op, ProgramBuilder
from pldemu.runtime import ProgramError
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import OpEvent


@pytest.mark.self_and_world
def test_instrumentation_off_adds_nothing(comm: MPI.Intracomm) -> None:
    with instance(self_sync_program(), comm) as inst:
        assert inst.races is None and inst.tracer is None
        inst.run()
        # Without listeners or monitors only the plain compilation exists.
        assert all(not traced for _, traced in inst._prepared.functions)


class Recorder(MonitorBase):
    def __init__(self, ops: set[Op]) -> None:
        self.ops = ops
        self.seen: list[tuple[str, str, Any]] = []

    def wants(self, op: Op) -> bool:
        return op in self.ops

    def before(self, event: OpEvent) -> None:
        self.seen.append(("before", event.op.text, None))

    def after(self, event: OpEvent, result: Any) -> None:
        self.seen.append(("after", event.op.text, type(result).__name__))

    def failed(self, event: OpEvent, error: BaseException) -> None:
        self.seen.append(("failed", event.op.text, type(error).__name__))

    def run_started(self, run: int) -> None:
        self.seen.append(("start", "", run))

    def run_ended(self, run: int, error: BaseException | None) -> None:
        self.seen.append(("end", "", type(error).__name__ if error else None))


@pytest.mark.self_and_world
def test_monitor_brackets_only_the_ops_it_wants_and_sees_results(comm: MPI.Intracomm) -> None:
    rec = Recorder({Op.NOTIFY, Op.TILE_LOAD})
    listened: list[str] = []
    with instance(self_sync_program(), comm) as inst:
        inst.add_listener(lambda e: listened.append(e.op.text))
        inst.add_monitor(rec)
        inst.run()
    assert rec.seen == [
        ("start", "", 1),
        ("before", "pld.system.notify", None), ("after", "pld.system.notify", "NoneType"),
        ("before", "tile.load", None), ("after", "tile.load", "Tile"),
        ("before", "pld.system.notify", None), ("after", "pld.system.notify", "NoneType"),
        ("end", "", None),
    ]
    assert listened.count("pld.system.notify") == 2 and "tile.store" in listened  # listeners see every op


@pytest.mark.self_and_world
def test_monitor_sees_the_failing_op_and_the_failed_run(comm: MPI.Intracomm) -> None:
    pb = ProgramBuilder("fails")
    data = pb.window("data", "fp32", [1, 4])
    fb = pb.function()
    fb.pld.tile.load(data, [0, 2], [1, 4])  # out of bounds
    rec = Recorder({Op.TILE_LOAD})
    with instance(pb.build(), comm) as inst:
        inst.add_monitor(rec)
        with pytest.raises(Exception, match=r"tile\.load"):
            inst.run()
    assert rec.seen[1:] == [("before", "tile.load", None), ("failed", "tile.load", "WindowAccessError"),
                            ("end", "", "WindowAccessError")]


@pytest.mark.self_and_world
def test_closed_instance_has_no_detector_and_refuses_runs(comm: MPI.Intracomm) -> None:
    with instance(self_sync_program(), comm, race_detect=True) as inst:
        inst.run()
    assert inst.races is None
    with pytest.raises(ProgramError, match="closed"):
        inst.run()
