"""Each protocol invariant is reported by a small hand-written (or deliberately broken) program, with
rank, buffer, cell, value and location, and none is reported for the correct collectives."""

from __future__ import annotations

import time

import pytest
from helpers import agree
from mpi4py import MPI
from stress_mpi_helpers import lowering_without

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.blocks import QUIET as QUIET_HOOKS
from pldemu.harness.blocks import Hooks, silent
from pldemu.harness.check import run_check
from pldemu.ir import NR, AllreduceMode, Op, Program, ProgramBuilder
from pldemu.lowering import RecipeVariant, lower_composite_ops
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.instrument.invariants import MIXED, NEGATIVE

pytestmark = pytest.mark.mpi(min_size=1)

N = MPI.COMM_WORLD.Get_size()
needs_peers = pytest.mark.skipif(N < 2, reason="one rank has no peer to be out of step with")
OPTS = RuntimeOptions(invariants=True, timeout=30)
QUIET = {"hooks": QUIET_HOOKS}


def _negative() -> Program:
    """Every rank drives its own cell [me, 0] to -1, then back to 0."""
    pb = ProgramBuilder("negative")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.system.notify(sig, me, [me, 0], -1)
    pld.system.notify(sig, me, [me, 0], 1)
    return pb.build()


def _mixed() -> Program:
    """A Set credit to the right neighbour, retired by the receiver with an AtomicAdd: the mix."""
    pb = ProgramBuilder("mixed")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    left = fb.let("left", (me + nr - 1) % nr)
    pld.system.notify(sig, (me + 1) % nr, [me, 0], 1, op="Set")
    pld.system.wait(sig, [left, 0], 1)
    pld.system.notify(sig, me, [left, 0], -1)
    return pb.build()


def test_a_negative_cell_is_reported_with_its_location(comm: MPI.Intracomm) -> None:
    me = comm.Get_rank()
    with ProgramInstance(_negative(), comm, OPTS) as inst:
        inst.run()
        assert inst.invariants is not None
        found = inst.invariants.checkpoint(comm)
    mine = [v for v in found if v.rank == me]
    ok = (len(found) == N and len(mine) == 1 and mine[0].invariant == NEGATIVE and mine[0].value == -1
          and mine[0].cell == (me, 0) and mine[0].target == me and mine[0].buffer == "sig"
          and "pld.system.notify(sig, me, [me, 0], -1" in mine[0].location and mine[0].call == 1)
    agree(comm, ok, str(found))


def test_set_and_add_on_one_cell_are_reported_across_ranks(comm: MPI.Intracomm) -> None:
    with ProgramInstance(_mixed(), comm, OPTS) as inst:
        inst.run()
        assert inst.invariants is not None
        found = inst.invariants.checkpoint(comm)
        inst.run()  # a second call: each rank reports each cell once per run
        again = inst.invariants.checkpoint(comm)
        scanned = inst.invariants.scan()  # the same, read one-sidedly from every rank's shadow
        comm.Barrier()
    mixed = [v for v in found if v.invariant == MIXED]
    agree(comm, sorted((v.target, v.cell) for v in scanned) == sorted((r, ((r - 1) % N, 0)) for r in range(N)),
          str(scanned))
    cells = sorted((v.target, v.cell) for v in mixed)
    want = sorted((r, ((r - 1) % N, 0)) for r in range(N))  # Set by the left neighbour, add by the owner
    # The owner's AtomicAdd comes second (it waits for the Set), so the owner reports it, at its notify.
    ok = cells == want and again == [] and all(
        v.rank == v.target and "AtomicAdd here, after 1 rank(s) wrote it by Set" in v.detail
        and "pld.system.notify(sig, me, [left, 0], -1" in v.location for v in mixed)
    agree(comm, ok, str(found))


def test_correct_collectives_break_no_invariant(comm: MPI.Intracomm) -> None:
    specs = [CollectiveSpec("allreduce", size=40), CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=40),
             CollectiveSpec("allgather", size=16), CollectiveSpec("reduce_scatter", size=16),
             CollectiveSpec("broadcast", size=16, root=N - 1), CollectiveSpec("barrier"),
             CollectiveSpec("all_to_all", size=16), CollectiveSpec("all_to_all_v", size=16, max_recv=2)]
    opts = RuntimeOptions(invariants=True, timeout=30, jitter_us=20, seed=comm.Get_size())
    for spec in specs:
        res = run_check(comm, collective_program(spec), 12, opts, 4, **QUIET)  # type: ignore[arg-type]
        agree(comm, res.ok and all(r.invariants == 0 for r in res.rows), f"{spec.name}: {res.first_error}")


@needs_peers
def test_cells_not_zero_at_rest_are_an_invariant_failure(comm: MPI.Intracomm) -> None:
    """A barrier without its epilogue: credits pile up; the block-end check names the cell."""
    def lower(program: Program) -> Program:
        return lower_composite_ops(program, variant=RecipeVariant(epilogue=False))

    res = run_check(comm, collective_program(CollectiveSpec("barrier")), 6, OPTS, 3, lower=lower,
                    **QUIET)  # type: ignore[arg-type]
    f = res.failure
    ok = (res.cells_nonzero > 0 and f is not None and f.kind == "invariant"
          and ("nonzero-at-rest" in f.text or "out-of-step" in f.text))
    agree(comm, ok, str(f))


@needs_peers
def test_a_rank_more_than_one_call_ahead_is_an_invariant_failure(comm: MPI.Intracomm) -> None:
    """A barrier whose waits are gone lets fast ranks run calls ahead of a slow rank 0."""
    me = comm.Get_rank()

    def slow(it: int) -> None:
        if me == 0:
            time.sleep(0.03)

    res = run_check(comm, collective_program(CollectiveSpec("barrier")), 8, OPTS, 8,
                    lower=lowering_without(Op.WAIT), hooks=Hooks(emit=silent, report=None, before_run=slow))  # type: ignore[arg-type]
    seen = comm.allgather(res.failure)
    ok = not res.ok and any(f is not None and f.kind == "invariant" and "out-of-step" in f.text for f in seen)
    agree(comm, ok, str(seen))
