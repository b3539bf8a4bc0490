"""Monitors, the race detector and options on one rank (COMM_SELF): what gets compiled in, what gets
recorded, how the clock moves, and that nothing at all is added when instrumentation is off."""

from __future__ import annotations

from typing import Any

import pytest
from race_helpers import instance

from pldemu.ir import NR, Op, Program, ProgramBuilder
from pldemu.runtime import ProgramError, RuntimeOptions
from pldemu.runtime.monitor import MonitorBase
from pldemu.runtime.sites import OpEvent


def _program() -> Program:
    pb = ProgramBuilder("single")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [2, 8])
    out = pb.local("out", "fp32", [1, 8])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    stage = pld.tile.create([1, 8], "fp32")
    pld.tile.put(data, me, pld.tile.full([1, 8], 2.0, "fp32"), stage, [0, 0], [0, 0], [1, 8])
    pld.system.notify(sig, me, [0, 0], 1)
    pld.system.wait(sig, [0, 0], 1)
    pld.tile.store(pld.tile.load(data, [0, 0], [1, 8]), [1, 0], data)
    pld.tile.get(out, me, data, stage, [0, 0], [1, 0], [1, 8])
    pld.system.notify(sig, me, [0, 0], -1)
    return pb.build()


def test_instrumentation_off_adds_nothing() -> None:
    with instance(_program()) as inst:
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


def test_monitor_brackets_only_the_ops_it_wants_and_sees_results() -> None:
    rec = Recorder({Op.NOTIFY, Op.TILE_LOAD})
    listened: list[str] = []
    with instance(_program()) as inst:
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


def test_monitor_sees_the_failing_op_and_the_failed_run() -> None:
    pb = ProgramBuilder("fails")
    data = pb.window("data", "fp32", [1, 4])
    fb = pb.function()
    fb.pld.tile.load(data, [0, 2], [1, 4])  # out of bounds
    rec = Recorder({Op.TILE_LOAD})
    with instance(pb.build()) as inst:
        inst.add_monitor(rec)
        with pytest.raises(Exception, match=r"tile\.load"):
            inst.run()
    assert rec.seen[1:] == [("before", "tile.load", None), ("failed", "tile.load", "WindowAccessError"),
                            ("end", "", "WindowAccessError")]


def test_detector_records_window_accesses_and_moves_its_clock() -> None:
    with instance(_program(), race_detect=True) as inst:
        det = inst.races
        assert det is not None
        assert det.vc == (1,)
        inst.run()
        # Two releases (notify +1, notify -1), each ticks my own entry after merging.
        assert det.vc == (3,)
        kinds = sorted({(key[4], key[5]) for key in det._log})
        assert len(kinds) == 4  # put (write), load (read), store (write), get source (read)
        inst.local("data")[...] = 0
        det.host_access("data", write=True, where="inputs")
        det.host_access("out", write=True)  # a rank-local buffer: ignored
        det.host_access("sig", write=False)  # a signal: ignored
        assert det.pending == 5
        assert det.check() == []  # one rank cannot race with itself
        assert det.pending == 0 and det.vc == (4,)  # the checkpoint joins (and ticks)
        with pytest.raises(KeyError):
            det.host_access("nope", write=True)


def test_releases_into_my_own_cells_leave_no_shadow() -> None:
    with instance(_program(), race_detect=True) as inst:
        det = inst.races
        assert det is not None
        inst.run()
        sig = inst.buffer_names().index("sig")
        # Only the self-notifies touched the cell: my clock covers them, nothing remote to acquire.
        assert det._shadow.acquire(sig, 0) == [0]
        assert det._shadow.acquire_exact(sig, 0, 1) is None  # no remote writer: cannot tell
        assert det._shadow.acquire_exact(sig, 0, 0) == []  # nothing needed
        assert det.exact_acquires == 1 and det.coarse_acquires == 0  # the wait needed only my own credit


def test_options_are_validated() -> None:
    assert RuntimeOptions().race_detect is False and RuntimeOptions().trace is None
    with pytest.raises(ValueError, match="race_detect"):
        RuntimeOptions(race_detect=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trace"):
        RuntimeOptions(trace="")
    with pytest.raises(ValueError, match="trace"):
        RuntimeOptions(trace=3)  # type: ignore[arg-type]


def test_closed_instance_has_no_detector_and_refuses_runs() -> None:
    with instance(_program(), race_detect=True) as inst:
        inst.run()
    assert inst.races is None
    with pytest.raises(ProgramError, match="closed"):
        inst.run()
