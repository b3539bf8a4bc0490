"""The race detector on minimal hand-written programs: two unsynchronised writers, a reader that
reads before the writer's notify, their race-free versions, atomics, host accesses and joins."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI
from races_mpi_helpers import describe

from pldemu.ir import NR, Program, ProgramBuilder
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.instrument.races import ATOMIC, READ, WRITE, RaceReport

pytestmark = pytest.mark.mpi

OPTS = RuntimeOptions(race_detect=True, timeout=60)


def _run(comm: MPI.Intracomm, program: Program, runs: int = 1) -> list[RaceReport]:
    with ProgramInstance(program, comm, OPTS) as inst:
        inst.local("data")[...] = 0
        comm.Barrier()
        for _ in range(runs):
            inst.run()
        comm.Barrier()
        assert inst.races is not None
        return inst.races.check()


def _two_writers(ordered: bool) -> Program:
    """Ranks 0 and 1 put into element [0, 0] of rank 2's window; ``ordered``: rank 1 first waits for
    rank 0's notify, which rank 0 posts after its put."""
    pb = ProgramBuilder("two_writers")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    one = pld.tile.full([1, 1], 1.0, "fp32")
    stage = pld.tile.create([1, 1], "fp32")
    with fb.if_(me.eq(0)):
        pld.tile.put(data, 2, one, stage, [0, 0], [0, 0], [1, 1])
        if ordered:
            pld.system.notify(sig, 1, [0, 0], 1)
    with fb.if_(me.eq(1)):
        if ordered:
            pld.system.wait(sig, [0, 0], 1)
            pld.system.notify(sig, 1, [0, 0], -1)
        pld.tile.put(data, 2, one, stage, [0, 1], [0, 0], [1, 1])  # [0, 1]: no overlap with rank 0's
        pld.tile.put(data, 2, one, stage, [0, 0], [0, 0], [1, 1])
    return pb.build()


@pytest.mark.mpi(min_size=3)
def test_two_unsynchronised_writers_race(comm: MPI.Intracomm) -> None:
    reports = _run(comm, _two_writers(ordered=False))
    agree(comm, len(reports) == 1, describe(reports))
    r = reports[0]
    ok = (r.buffer == "data" and r.target == 2 and (r.start, r.stop, r.overlap) == (0, 1, 1)
          and {r.first.rank, r.second.rank} == {0, 1} and r.first.kind == r.second.kind == WRITE
          and "pld.tile.put(data, 2, fill" in r.first.location and r.region_text() == "data[0, 0:1]"
          and r.first.call == r.second.call == 1)
    agree(comm, ok, r.describe())


@pytest.mark.mpi(min_size=3)
def test_two_writers_ordered_by_notify_wait_do_not_race(comm: MPI.Intracomm) -> None:
    reports = _run(comm, _two_writers(ordered=True))
    agree(comm, not reports, describe(reports))


def _early_reader(early: bool) -> Program:
    """Rank 0 puts into rank 1's window, then notifies rank 1; rank 1 loads the element, ``early``:
    before waiting for the notify (a race), else after it."""
    pb = ProgramBuilder("early_reader")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    out = pb.local("out", "fp32", [1, 4])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.if_(me.eq(0)):
        pld.tile.put(data, 1, pld.tile.full([1, 4], 7.0, "fp32"), pld.tile.create([1, 4], "fp32"))
        pld.system.notify(sig, 1, [0, 0], 1)
    with fb.if_(me.eq(1)):
        if early:
            pld.tile.store(pld.tile.load(data, [0, 2], [1, 2]), [0, 0], out)
        pld.system.wait(sig, [0, 0], 1)
        pld.system.notify(sig, 1, [0, 0], -1)
        if not early:
            pld.tile.store(pld.tile.load(data, [0, 2], [1, 2]), [0, 0], out)
    return pb.build()


@pytest.mark.mpi(min_size=2)
def test_reading_before_the_writers_notify_races(comm: MPI.Intracomm) -> None:
    reports = _run(comm, _early_reader(early=True))
    agree(comm, len(reports) == 1, describe(reports))
    r = reports[0]
    kinds = {r.first.rank: r.first.kind, r.second.rank: r.second.kind}
    ok = (r.target == 1 and kinds == {0: WRITE, 1: READ} and (r.start, r.stop) == (2, 4)
          and any("tile.load(data" in a.location for a in (r.first, r.second)))
    agree(comm, ok, r.describe())


@pytest.mark.mpi(min_size=2)
def test_reading_after_the_wait_does_not_race(comm: MPI.Intracomm) -> None:
    # Two runs: the second run's put is ordered after the first run's load only by... nothing but the
    # wait/notify of the first run, so the join at the run boundary is what the barrier models.
    with ProgramInstance(_early_reader(early=False), comm, OPTS) as inst:
        assert inst.races is not None
        for _ in range(2):
            comm.Barrier()
            inst.races.join()  # the barrier orders the calls
            inst.run()
        comm.Barrier()
        reports = inst.races.check()
    agree(comm, not reports, describe(reports))


@pytest.mark.mpi(min_size=2)
def test_back_to_back_calls_without_a_barrier_race_across_calls(comm: MPI.Intracomm) -> None:
    # The race-free reader's program called twice with nothing the detector knows of between the calls:
    # rank 0's second put is unordered with rank 1's first load (a reuse race, although each call alone
    # is fine). The MPI barrier (which the detector is not told about) makes the worst schedule
    # certain: rank 0's second notify is in the counter before rank 1's first wait polls, and the wait
    # must still acquire only the first one.
    with ProgramInstance(_early_reader(early=False), comm, OPTS) as inst:
        assert inst.races is not None
        inst.local("data")[...] = 0
        comm.Barrier()
        inst.races.join()
        inst.run()
        comm.Barrier()  # deliberately not a join: the program has no synchronisation here
        inst.run()
        comm.Barrier()
        reports = inst.races.check()
    agree(comm, bool(reports) and all(r.target == 1 for r in reports), describe(reports))
    agree(comm, any(r.first.call != r.second.call for r in reports), describe(reports))


def _atomics(plain_reader: bool) -> Program:
    pb = ProgramBuilder("atomics")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    out = pb.local("out", "fp32", [1, 4])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.tile.put(data, 0, pld.tile.full([1, 4], 1.0, "fp32"), pld.tile.create([1, 4], "fp32"), atomic="Add")
    if plain_reader:
        with fb.if_(me.eq(0)):
            pld.tile.store(pld.tile.load(data, [0, 0], [1, 4]), [0, 0], out)
    return pb.build()


@pytest.mark.mpi(min_size=2)
def test_atomic_puts_do_not_conflict_with_each_other(comm: MPI.Intracomm) -> None:
    reports = _run(comm, _atomics(plain_reader=False))
    agree(comm, not reports, describe(reports))


@pytest.mark.mpi(min_size=2)
def test_a_plain_read_conflicts_with_an_atomic_put(comm: MPI.Intracomm) -> None:
    reports = _run(comm, _atomics(plain_reader=True))
    agree(comm, bool(reports), describe(reports))
    agree(comm, all({r.first.kind, r.second.kind} == {ATOMIC, READ} for r in reports), describe(reports))


def _peer_reads() -> Program:
    """Every rank remote_loads its right neighbour's window; nothing else."""
    pb = ProgramBuilder("peer_reads")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    out = pb.local("out", "fp32", [1, 4])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    pld.tile.store(pld.tile.remote_load(data, (me + 1) % nr, [0, 0], [1, 4]), [0, 0], out)
    return pb.build()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("joined", [False, True])
def test_host_writes_race_unless_a_join_orders_them(comm: MPI.Intracomm, joined: bool) -> None:
    with ProgramInstance(_peer_reads(), comm, OPTS) as inst:
        det = inst.races
        assert det is not None
        inst.local("data")[...] = comm.Get_rank()
        det.host_access("data", write=True, where="inputs")
        comm.Barrier()
        if joined:
            det.join()
        inst.run()
        comm.Barrier()
        reports = det.check()
    if joined:
        agree(comm, not reports, describe(reports))
    else:
        n = comm.Get_size()
        ok = len(reports) == n and all(r.first.location.startswith("host: inputs")
                                       or r.second.location.startswith("host: inputs") for r in reports)
        agree(comm, ok, describe(reports, n))


@pytest.mark.mpi(min_size=2)
def test_check_clears_the_log_and_later_blocks_start_clean(comm: MPI.Intracomm) -> None:
    with ProgramInstance(_two_writers(ordered=False) if comm.Get_size() >= 3 else _early_reader(True),
                         comm, OPTS) as inst:
        det = inst.races
        assert det is not None
        inst.local("data")[...] = 0
        comm.Barrier()
        inst.run()
        comm.Barrier()
        first = det.check()
        second = det.check()  # nothing recorded in between
        agree(comm, bool(first) and not second and det.pending == 0, describe(first + second))
        agree(comm, det.total_reports == len(first), f"{det.total_reports} != {len(first)}")
        agree(comm, bool(np.all(np.isfinite(inst.local("data")))), "poisoned data")


def _credit_across_checkpoint() -> Program:
    """``credit``: rank 0 posts a credit to rank 1, left in rank 1's counter at the checkpoint after it.
    ``publish``: rank 0 writes rank 1's window and posts a second credit; rank 1 waits for its cell to
    reach 1 (the leftover credit already does), loads, retires both."""
    pb = ProgramBuilder("credit_across_checkpoint")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    out = pb.local("out", "fp32", [1, 4])
    fb = pb.function("credit")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.if_(me.eq(0)):
        pld.system.notify(sig, 1, [0, 0], 1)
    fb = pb.function("publish")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.if_(me.eq(0)):
        pld.tile.put(data, 1, pld.tile.full([1, 4], 3.0, "fp32"), pld.tile.create([1, 4], "fp32"))
        pld.system.notify(sig, 1, [0, 0], 1)
    with fb.if_(me.eq(1)):
        pld.system.wait(sig, [0, 0], 1)
        pld.tile.store(pld.tile.load(data, [0, 0], [1, 4]), [0, 0], out)
        pld.system.notify(sig, 1, [0, 0], -2)
    return pb.build(entry="credit")


@pytest.mark.mpi(min_size=2)
def test_a_credit_left_at_a_checkpoint_is_the_next_epochs_starting_value(comm: MPI.Intracomm) -> None:
    # Rank 0 snapshots every rank's signal cells at the checkpoint. Rank 1's cell starts the next epoch
    # at 1, so its wait for 1 needs no credit of that epoch and the put races the load; a snapshot
    # that missed the leftover credit would have the wait acquire the credit after the put instead.
    with ProgramInstance(_credit_across_checkpoint(), comm, OPTS) as inst:
        det = inst.races
        assert det is not None
        comm.Barrier()
        inst.run("credit")
        comm.Barrier()
        first = det.check()
        inst.run("publish")
        comm.Barrier()
        reports = det.check()
    agree(comm, not first, describe(first))
    agree(comm, len(reports) == 1 and reports[0].target == 1 and {reports[0].first.rank, reports[0].second.rank}
          == {0, 1}, describe(reports))


def _two_credits() -> Program:
    """``phase1``: rank 0 posts credit 1 to rank 1, writes rank 1's window, posts credit 2.
    ``phase2``: rank 1 waits for its cell to reach ``G`` (a 1-element local tensor), loads, retires."""
    pb = ProgramBuilder("two_credits")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    out = pb.local("out", "fp32", [1, 4])
    g = pb.local("g", "int32", [1])
    fb = pb.function("phase1")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.if_(me.eq(0)):
        pld.system.notify(sig, 1, [0, 0], 1)
        pld.tile.put(data, 1, pld.tile.full([1, 4], 3.0, "fp32"), pld.tile.create([1, 4], "fp32"))
        pld.system.notify(sig, 1, [0, 0], 1)
    fb = pb.function("phase2")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.if_(me.eq(1)):
        pld.system.wait(sig, [0, 0], pld.tensor.read(g, [0]))
        pld.tile.store(pld.tile.load(data, [0, 0], [1, 4]), [0, 0], out)
        pld.system.notify(sig, 1, [0, 0], -2)
    return pb.build(entry="phase1")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("awaited", [1, 2])
def test_a_wait_acquires_the_credit_it_needed_not_a_later_one(comm: MPI.Intracomm, awaited: int) -> None:
    # Both credits are in rank 1's counter before it waits. Waiting for 1 needs only the credit posted
    # before the put, so the put and the load race; waiting for 2 needs the credit after the put.
    with ProgramInstance(_two_credits(), comm, OPTS) as inst:
        det = inst.races
        assert det is not None
        inst.local("g")[0] = awaited
        comm.Barrier()
        det.join()
        inst.run("phase1")
        comm.Barrier()  # not a join: the detector must not learn of it
        inst.run("phase2")
        comm.Barrier()
        reports = det.check()
        exact = comm.allgather(det.exact_acquires)
    if awaited == 1:
        agree(comm, len(reports) == 1 and {reports[0].first.rank, reports[0].second.rank} == {0, 1},
              describe(reports))
    else:
        agree(comm, not reports, describe(reports))
    agree(comm, exact[1] == 1, f"exact acquires per rank: {exact}")
