"""Hand-written primitive programs exchanging data and signals across ranks, on both window back ends:
a credit barrier reused in a loop, put/get/remote_load onto myself and round trips, atomic puts,
symmetric errors, the multi-rank deadlock report, and lowered collectives end to end. The tests marked
``self_and_world`` also run in the plain pytest process, on COMM_SELF (see tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import agree, instance
from mpi4py import MPI
from rt_mpi_helpers import emit_barrier, emit_epilogue

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import NR, AllreduceMode, Program, ProgramBuilder
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import DeadlockError, ProgramInstance, RuntimeOptions, WindowAccessError

EPOCHS = 4


def _barrier_loop() -> Program:
    """EPOCHS barriers on one signal; before each, a rank publishes its epoch; after each, it records
    every peer's published epoch (one-sided) into seen[peer, epoch]."""
    pb = ProgramBuilder("barrier_loop")
    sig = pb.signal("sig", [NR, 1])
    progress = pb.window("progress", "int32", [1, 1])
    seen = pb.local("seen", "int32", [NR, EPOCHS])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    with fb.for_range(0, EPOCHS, hint="epoch") as epoch:
        pld.tensor.write(progress, [0, 0], epoch + 1)
        emit_barrier(fb, sig, me, nr, epoch + 1)
        with fb.for_range(0, nr, hint="p") as p:
            pld.tile.store(pld.tile.remote_load(progress, p, [0, 0], [1, 1]), [p, epoch], seen)
    emit_epilogue(fb, sig, me, nr, EPOCHS)
    return pb.build()


@pytest.mark.self_and_world
def test_credit_barrier_reused_in_a_loop_and_across_runs(comm: MPI.Intracomm, backend: str) -> None:
    n = comm.Get_size()
    with ProgramInstance(_barrier_loop(), comm, RuntimeOptions(windows=backend, timeout=60)) as inst:
        for _ in range(3):
            inst.run()
            seen = inst.local("seen")
            # Past barrier e every peer has published e+1, and none is more than one barrier ahead.
            ok = all(e + 1 <= seen[p, e] <= e + 2 for p in range(n) for e in range(EPOCHS))
            agree(comm, ok, f"seen={seen.tolist()}")
        comm.Barrier()  # everyone retired every call: every cell is back at zero
        sig = inst.window("sig")
        agree(comm, all(sig.read_cell(c) == 0 for c in range(n)), "signal not back at zero")


def _self_transfer_program() -> Program:
    pb = ProgramBuilder("self_put")
    src = pb.local("src", "fp32", [2, 8])
    w = pb.window("w", "fp32", [2, 8])
    acc = pb.window("acc", "fp32", [2, 8])
    got = pb.local("got", "fp32", [2, 8])
    part = pb.window("part", "fp32", [2, 8])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(w))
    stage = pld.tile.create([1, 3], "fp32")  # smaller than the transfers: they slide through it
    pld.tile.put(w, me, src, stage)  # whole source to whole window
    pld.tile.put(acc, me, src, stage)
    pld.tile.put(acc, me, src, stage, atomic="Add")  # element-wise atomic add: 2 * src
    pld.tile.put(part, me, src, stage, [1, 2], [0, 1], [1, 5])
    pld.tile.put(part, me, src, stage, [0, 100], [0, 100], [1, 0])  # empty: no-op, nothing checked
    pld.tile.get(got, me, w, stage)
    pld.tile.get(w, me, w, stage, [0, 0], [0, 0], [2, 8])  # identity mapping: no-op
    tile = pld.tile.remote_load(w, me, [1, 0], [1, 8], [1, 5])
    pld.tile.put(part, me, tile, stage, [0, 0], [0, 0], [1, 8])  # a tile source, poison tail included
    return pb.build()


@pytest.mark.self_and_world
@pytest.mark.parametrize("pieces", [False, True])
def test_put_get_remote_load_on_myself(comm: MPI.Intracomm, pieces: bool) -> None:
    # Moved from tests/runtime: on several ranks every transfer is still a self-copy, into a window
    # the other ranks share.
    with instance(_self_transfer_program(), comm, stage_pieces=pieces) as inst:
        values = np.arange(16, dtype=np.float32).reshape(2, 8) + 1
        inst.local("src")[...] = values
        stats = inst.run()
        np.testing.assert_array_equal(inst.local("w"), values)
        np.testing.assert_array_equal(inst.local("acc"), 2 * values)
        np.testing.assert_array_equal(inst.local("got"), values)
        part = inst.local("part")
        np.testing.assert_array_equal(part[1, 2:7], values[0, 1:6])
        np.testing.assert_array_equal(part[0, :5], values[1, :5])
        assert np.isnan(part[0, 5:]).all() and np.isnan(part[1, :2]).all()
        # One window op per transfer, or one per stage piece ([1, 3] stage: ceil(8 / 3) pieces per row).
        assert stats.window_ops["puts"] == (6 + 6 + 2 + 3 if pieces else 4)
        assert stats.window_ops["atomic_puts"] == (6 if pieces else 1)


def _round_trip() -> Program:
    pb = ProgramBuilder("round_trip")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [NR, 8])
    mine = pb.local("mine", "fp32", [1, 8])
    back = pb.local("back", "fp32", [1, 8])
    vals = pb.window("vals", "fp32", [1, 8])
    total = pb.local("total", "fp32", [1, 8])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    right = fb.let("right", (me + 1) % nr)
    stage = pld.tile.create([1, 3], "fp32")
    pld.tile.put(data, right, mine, stage, [me, 0], [0, 0], [1, 8])  # my row of my right neighbour
    emit_barrier(fb, sig, me, nr, 1)
    pld.tile.get(back, right, data, stage, [0, 0], [me, 0], [1, 8])  # ... and read it back from there
    acc = pld.tile.load(vals, [0, 0], [1, 8], [1, 5])
    with fb.for_range(1, nr, hint="k") as k:
        fb.assign(acc, pld.tile.add(acc, pld.tile.remote_load(vals, (me + k) % nr, [0, 0], [1, 8], [1, 5])))
    pld.tile.store(acc, [0, 0], total)
    emit_barrier(fb, sig, me, nr, 2)  # nobody rewrites data/vals before every peer has read them
    emit_epilogue(fb, sig, me, nr, 2)
    return pb.build()


@pytest.mark.self_and_world
@pytest.mark.parametrize("pieces", [False, True])
def test_put_get_remote_load_round_trips(comm: MPI.Intracomm, backend: str, pieces: bool) -> None:
    n, me = comm.Get_size(), comm.Get_rank()
    options = RuntimeOptions(windows=backend, timeout=60, stage_pieces=pieces)
    with ProgramInstance(_round_trip(), comm, options) as inst:
        for it in range(2):
            row = np.arange(8, dtype=np.float32) + 100 * me + 1000 * it
            inst.local("mine")[0] = row
            inst.local("vals")[...] = me + 1 + it
            comm.Barrier()  # every rank's inputs are in place before anyone reads them
            inst.run()
            left = (me - 1) % n
            left_row = np.arange(8, dtype=np.float32) + 100 * left + 1000 * it
            total = inst.local("total")[0]
            ok = (np.array_equal(inst.local("back")[0], row) and np.array_equal(inst.local("data")[left], left_row)
                  and (total[:5] == n * (n + 1) / 2 + n * it).all() and np.isnan(total[5:]).all())
            agree(comm, ok, f"back={inst.local('back')[0]} data={inst.local('data')} total={total}")


@pytest.mark.self_and_world
def test_atomic_put_adds_every_rank_contribution(comm: MPI.Intracomm, backend: str) -> None:
    pb = ProgramBuilder("atomic")
    sig = pb.signal("sig", [NR, 1])
    counts = pb.window("counts", "fp32", [2, 4])
    icounts = pb.window("icounts", "int32", [4])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    emit_barrier(fb, sig, me, nr, 1)  # everyone has zeroed its counters
    stage = pld.tile.create([1, 4], "fp32")
    ones = pld.tile.full([1, 4], 1.0, "fp32")
    with fb.for_range(0, nr, hint="dst") as dst:
        pld.tile.put(counts, dst, ones, stage, [1, 0], [0, 0], [1, 4], atomic="Add")
        pld.tile.put(icounts, dst, pld.tile.full([4], 2, "int32"), pld.tile.create([4], "int32"), atomic="Add")
    emit_barrier(fb, sig, me, nr, 2)
    emit_epilogue(fb, sig, me, nr, 2)
    n = comm.Get_size()
    with ProgramInstance(pb.build(), comm, RuntimeOptions(windows=backend, timeout=60)) as inst:
        inst.local("counts")[...] = 0
        inst.local("icounts")[...] = 0
        comm.Barrier()
        inst.run()
        c, ic = inst.local("counts"), inst.local("icounts")
        agree(comm, bool((c[1] == n).all() and (c[0] == 0).all() and (ic == 2 * n).all()), f"{c} {ic}")


@pytest.mark.self_and_world
def test_symmetric_out_of_bounds_put_is_refused_everywhere(comm: MPI.Intracomm, backend: str) -> None:
    pb = ProgramBuilder("oob")
    data = pb.window("data", "fp32", [NR, 8])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(data)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    pld.tile.put(data, (me + 1) % nr, pld.tile.full([1, 8], 1.0, "fp32"), pld.tile.create([1, 8], "fp32"),
                 [nr, 0], [0, 0], [1, 8])
    inst = ProgramInstance(pb.build(), comm, RuntimeOptions(windows=backend))
    try:
        with pytest.raises(WindowAccessError) as info:
            inst.run()
        text = str(info.value)
        agree(comm, text.startswith("main:") and f"put: rank {comm.Get_rank()} -> peer" in text
              and "outside [0, " in text, text)
        agree(comm, bool(np.isnan(inst.local("data")).all()), "a refused put wrote something")
    finally:
        inst.close()  # the failure happened on every rank: the collective free is safe


@pytest.mark.mpi(min_size=2)
def test_deadlock_report_shows_every_rank_and_the_cycle(comm: MPI.Intracomm) -> None:
    pb = ProgramBuilder("ring_wait")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    pld.system.wait(sig, [(me + 1) % nr, 0], 1)  # a credit from my right neighbour that nobody posts
    n, me_ = comm.Get_size(), comm.Get_rank()
    inst = ProgramInstance(pb.build(), comm, RuntimeOptions(timeout=1.5))
    try:
        with pytest.raises(DeadlockError) as info:
            inst.run()
        err = info.value
        text = str(err)
        expected_cycle = " -> ".join(f"rank {r}" for r in [*range(n), 0])
        ok = (f"waits for sig[{(me_ + 1) % n}, 0] >= 1, observed 0" in text
              and all(f"rank {r}: " in text for r in range(n)) and f"cycle: {expected_cycle}" in text)
        agree(comm, ok, text)
        agree(comm, any(comm.allgather(err.primary)), "nobody is the primary reporter")
    finally:
        inst.close()


@pytest.mark.self_and_world
@pytest.mark.parametrize("mode", [AllreduceMode.mesh, AllreduceMode.ring])
def test_lowered_allreduce_sums_across_ranks(comm: MPI.Intracomm, backend: str, mode: AllreduceMode) -> None:
    built = collective_program(CollectiveSpec("allreduce", mode=mode, size=4099))
    target = built.target
    assert target is not None
    n, me = comm.Get_size(), comm.Get_rank()
    options = RuntimeOptions(windows=backend, timeout=120)
    with ProgramInstance(lower_composite_ops(built.program), comm, options) as inst:
        for it in range(2):
            inst.local(target)[...] = me + 1 + it
            comm.Barrier()
            inst.run()
            got = inst.local(target)
            agree(comm, bool((got == n * (n + 1) / 2 + n * it).all()), f"got {np.unique(got)}")
        comm.Barrier()
        sig = inst.window(built.signal)
        agree(comm, all(sig.read_cell(c) == 0 for c in range(sig.numel)), "signal not back at zero")


@pytest.mark.mpi
@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "timed"])
def test_barrier_loop_under_every_schedule_with_and_without_kernel_sleeps(comm: MPI.Intracomm,
                                                                          blocking: bool) -> None:
    """The barrier loop, jittered, with a straggler, deferred visibility, invariants and the race
    detector on, waits sleeping in the kernel or backing off with timed sleeps: the same results."""
    n = comm.Get_size()
    opts = RuntimeOptions(windows="shared", timeout=60, jitter_us=30, straggler=(n - 1, 50), seed=3,
                          visibility="deferred", invariants=True, race_detect=True, blocking_waits=blocking)
    with ProgramInstance(_barrier_loop(), comm, opts) as inst:
        for _ in range(10):
            inst.run()
            seen = inst.local("seen")
            ok = all(e + 1 <= seen[p, e] <= e + 2 for p in range(n) for e in range(EPOCHS))
            agree(comm, ok, f"seen={seen.tolist()}")
        assert inst.races is not None
        # The loop reads a peer's progress word while that peer may write the next epoch: a race
        # the detector reports whatever the waits do; what matters is that it still gets there.
        reports = inst.races.check(comm)
        agree(comm, all(r.buffer == "progress" for r in reports), f"races: {reports}")
