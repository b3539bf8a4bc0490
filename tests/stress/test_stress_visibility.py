"""Deferred visibility on one rank (``MPI.COMM_SELF``): writes wait in the rank's write buffer until a
release, a read of the rank's own window, or the host asks for them; eager mode writes at once."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from pldemu.ir import NR, Program, ProgramBuilder
from pldemu.runtime import ProgramInstance, RuntimeOptions


def _program(release: bool) -> Program:
    """main: put 7 into my own `data` (a put to self), then optionally notify (release).
    look: load my own `data` into the local `got` (read-your-writes)."""
    pb = ProgramBuilder("self_put")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [1, 4])
    got = pb.local("got", "fp32", [1, 4])
    fb = pb.function("main")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    fill = pld.tile.full([1, 4], 7.0, "fp32")
    pld.tile.put(data, me, fill, pld.tile.create([1, 4], "fp32"))
    if release:
        pld.system.notify(sig, me, [me, 0], 1)
        pld.system.notify(sig, me, [me, 0], -1)
    look = pb.function("look")
    look.pld.tile.store(look.pld.tile.load(data, [0, 0], [1, 4]), [0, 0], got)
    return pb.build()


def _instance(release: bool, visibility: str) -> ProgramInstance:
    return ProgramInstance(_program(release), MPI.COMM_SELF, RuntimeOptions(visibility=visibility, timeout=10))


def test_eager_put_is_visible_when_it_returns() -> None:
    with _instance(False, "eager") as inst:
        assert inst.schedule is None  # nothing to install
        inst.run()
        assert (inst.local("data") == 7).all()


def test_deferred_put_waits_for_a_release_or_the_host() -> None:
    with _instance(False, "deferred") as inst:
        inst.run()
        sched = inst.schedule
        assert sched is not None and sched.writes is not None
        assert np.isnan(inst.local("data")).all()  # memory still holds the poison: the put is buffered
        assert sched.writes.pending == 1 and sched.writes.deferred == 1
        sched.host_access()  # the host reads its own window: its own writes land first
        assert (inst.local("data") == 7).all() and sched.writes.pending == 0


def test_deferred_put_lands_at_the_next_notify() -> None:
    with _instance(True, "deferred") as inst:
        inst.run()
        assert (inst.local("data") == 7).all()
        assert inst.schedule is not None and inst.schedule.writes is not None
        assert inst.schedule.writes.pending == 0


def test_a_rank_reads_its_own_writes() -> None:
    with _instance(False, "deferred") as inst:
        inst.run()
        inst.run("look")  # tile.load of the rank's own window drains its writes to itself first
        assert (inst.local("got") == 7).all()


def _atomic_from_own_window() -> Program:
    """Store 5 into my own window `src`, then atomically add `src` into my own window `acc` (a put to
    self whose source is a window: pypto's put of a staged DistributedTensor)."""
    pb = ProgramBuilder("atomic_src")
    sig = pb.signal("sig", [NR, 1])
    src = pb.window("src", "int32", [1, 4])
    acc = pb.window("acc", "int32", [1, 4])
    fb = pb.function("main")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.tile.store(pld.tile.full([1, 4], 5, "int32"), [0, 0], src)
    pld.tile.put(acc, me, src, pld.tile.create([1, 4], "int32"), atomic="Add")
    return pb.build()


@pytest.mark.parametrize("visibility", ["deferred", "fenced"])
def test_an_atomic_put_reads_the_ranks_own_stores_from_its_source_window(visibility: str) -> None:
    results = []
    for mode in ("eager", visibility):
        with ProgramInstance(_atomic_from_own_window(), MPI.COMM_SELF,
                             RuntimeOptions(visibility=mode, timeout=10, insert_fences=False)) as inst:
            inst.run()
            if inst.schedule is not None:
                inst.schedule.host_sync()
            results.append(inst.local("acc").tolist())
    assert results[1] == results[0], "the put carried the source window's memory, not the rank's own store"


def _stores() -> Program:
    """tile.store and tensor.write into my own window, read back by tile.load / tensor.read."""
    pb = ProgramBuilder("stores")
    data = pb.window("data", "fp32", [1, 4])
    got = pb.local("got", "fp32", [1, 4])
    fb = pb.function("main")
    pld = fb.pld
    pld.tile.store(pld.tile.full([1, 4], 3.0, "fp32"), [0, 0], data)
    pld.tensor.write(data, [0, 1], 5.0)
    x = pld.tensor.read(data, [0, 1])
    pld.tile.store(pld.tile.load(data, [0, 0], [1, 4]), [0, 0], got)
    pld.tensor.write(got, [0, 3], x)
    pld.tensor.write(data, [0, 2], 9.0)  # buffered: nothing reads it in the program
    return pb.build()


@pytest.mark.parametrize("visibility", ["eager", "deferred"])
def test_stores_into_a_window_keep_program_order_for_their_rank(visibility: str) -> None:
    with ProgramInstance(_stores(), MPI.COMM_SELF, RuntimeOptions(visibility=visibility)) as inst:
        inst.run()
        assert inst.local("got").tolist() == [[3.0, 5.0, 3.0, 5.0]]
        data = inst.local("data")
        assert data[0, 2] == (9.0 if visibility == "eager" else 3.0)  # the last write is still buffered
        if inst.schedule is not None:
            inst.schedule.host_sync()
        assert inst.local("data").tolist() == [[3.0, 5.0, 9.0, 3.0]]


def test_jitter_and_invariants_leave_results_unchanged() -> None:
    opts = RuntimeOptions(jitter_us=20, skew_us=50, straggler=(0, 10.0), invariants=True, seed=5)
    with ProgramInstance(_program(True), MPI.COMM_SELF, opts) as inst:
        for _ in range(3):
            inst.run()
        assert (inst.local("data") == 7).all()
        assert inst.invariants is not None and inst.invariants.checkpoint(MPI.COMM_SELF) == []
