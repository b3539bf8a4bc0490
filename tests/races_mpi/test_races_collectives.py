"""The race detector on every lowered collective (must stay silent) and on the catalogue's race
mutants (must speak), driven like the check harness: inputs restaged, results consumed, back to back.
The correct recipes also run on COMM_SELF in the plain pytest process (``self_and_world``)."""

from __future__ import annotations

import pytest
from helpers import agree
from mpi4py import MPI
from races_mpi_helpers import describe, race_harness

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode
from pldemu.lowering import lower_composite_ops
from pldemu.mutants import MUTANTS
from pldemu.runtime import RuntimeOptions

ITERS = 6
BLOCK = 3

CASES = [
    *(CollectiveSpec(name, size=64, max_recv=2) for name in COLLECTIVE_NAMES),
    CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=64),
    CollectiveSpec("allreduce", size=4100),  # two chunks, a ragged tail
    CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=17),
    CollectiveSpec("broadcast", size=64, root=1),
]


def _label(spec: CollectiveSpec) -> str:
    mode = f"-{spec.mode.name}" if spec.name == "allreduce" else ""
    root = f"-root{spec.root}" if spec.name == "broadcast" else ""
    return f"{spec.name}{mode}-{spec.size}{root}"


@pytest.mark.self_and_world
@pytest.mark.parametrize("spec", CASES, ids=_label)
def test_correct_recipe_has_no_race(comm: MPI.Intracomm, spec: CollectiveSpec) -> None:
    if spec.name == "broadcast" and spec.root >= comm.Get_size():
        pytest.skip("root outside the communicator")
    res = race_harness(comm, collective_program(spec), ITERS, lower_composite_ops, block=BLOCK)
    agree(comm, not res.reports, describe(res.reports))


@pytest.mark.self_and_world
@pytest.mark.parametrize("mode", [AllreduceMode.mesh, AllreduceMode.ring])
def test_correct_allreduce_has_no_race_on_the_rma_back_end(comm: MPI.Intracomm, mode: AllreduceMode) -> None:
    # The rma back end acquires shadow clocks with MPI_Get_accumulate instead of a shared-memory load.
    cp = collective_program(CollectiveSpec("allreduce", mode=mode, size=64))
    opts = RuntimeOptions(race_detect=True, timeout=120, windows="rma")
    res = race_harness(comm, cp, 4, lower_composite_ops, block=2, options=opts)
    agree(comm, not res.reports, describe(res.reports))


RACY = ("allreduce-no-post-reduce-barrier", "ring-no-push-done", "a2av-no-readiness", "broadcast-rewrite-race",
        "reduce-scatter-no-post-reduce-barrier")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("name", RACY)
def test_race_mutant_is_flagged(comm: MPI.Intracomm, name: str) -> None:
    m = MUTANTS[name]
    if m.spec.name == "broadcast" and m.spec.root >= comm.Get_size():
        pytest.skip("root outside the communicator")
    # More calls than the correct recipes get, so that every block has a few of them.
    res = race_harness(comm, collective_program(m.spec), 2 * ITERS, m.lowering(), fence=m.consume_fence,
                       block=BLOCK)
    agree(comm, bool(res.reports), f"{name}: no race reported")
    # Every rank got the same list, and every report names two different ranks and a data window.
    same = comm.allgather([r.describe() for r in res.reports])
    agree(comm, all(s == same[0] for s in same), "ranks disagree on the reports")
    agree(comm, all(r.first.rank != r.second.rank and r.buffer == "target" for r in res.reports),
          describe(res.reports))


@pytest.mark.mpi(min_size=2)
def test_fixed_broadcast_without_fence_is_race_free(comm: MPI.Intracomm) -> None:
    m = MUTANTS["broadcast-read-complete"]
    if m.spec.root >= comm.Get_size():
        pytest.skip("root outside the communicator")
    res = race_harness(comm, collective_program(m.spec), ITERS, m.lowering(), fence=m.consume_fence, block=BLOCK)
    agree(comm, not res.reports, describe(res.reports))


@pytest.mark.mpi(min_size=2)
def test_missing_consume_fence_is_a_race_for_allgather(comm: MPI.Intracomm) -> None:
    # The consume fence is part of allgather's contract: without it the next call's puts race with
    # the consumer's copy of the result.
    cp = collective_program(CollectiveSpec("allgather", size=16))
    res = race_harness(comm, cp, 4, lower_composite_ops, fence=False, block=4)
    agree(comm, any("consume result" in (r.first.location + r.second.location) for r in res.reports),
          describe(res.reports))
