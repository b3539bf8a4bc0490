"""Every lowered collective in fenced visibility: InsertCommFence is necessary and sufficient in the model.

The check harness (``run_check``: inputs restaged, results consumed, back to back) runs each
collective under ``--visibility fenced`` with and without the pass, once as ``pldemu check`` runs it
and once as ``pldemu stress`` does (jitter, invariants, race detector). A recipe that hands data to a
peer within a call (allreduce ring, allgather, all_to_all, all_to_all_v by put; the pull allgather,
``RecipeVariant.allgather_pull``, by a store into its own window) must give wrong data without the
pass; every recipe must pass with it; the barrier and the read-only recipes (allreduce mesh,
reduce_scatter, broadcast: peers only read what the host wrote) pass either way. "Without the pass"
keeps the toolchain's drain before each notify (PTOAS#718, ``InsertToolchainDrains``); without it
too (the program exactly as written) the race detector also reports the mesh allreduce's and
reduce_scatter's remote_loads still in flight at their post-reduce barrier.

Then every marker the pass places in each collective is dropped in turn (``DropMarker``, the
program run as written): the run must fail exactly for the markers in :data:`NEEDED`, the fences
after a put and after the pull allgather's own-row store. The other markers order nothing in these
recipes in the model (no recipe reads a data window with ``tensor.read``; the other window stores
are read only by the rank's own later put, which reads its own writes, or by the host).

The module runs at 2 and 4 ranks only (each size about 15 s on 2 cores; 8 ranks cost a minute)."""

from __future__ import annotations

from functools import partial

import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.blocks import QUIET
from pldemu.harness.check import run_check
from pldemu.ir import AllreduceMode, Program, format_program
from pldemu.lowering import (
    CORRECT,
    DropMarker,
    InsertCommFence,
    InsertToolchainDrains,
    Marker,
    RecipeVariant,
    lower_composite_ops,
)
from pldemu.runtime import RuntimeOptions

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(MPI.COMM_WORLD.Get_size() not in (2, 4), reason="the fenced matrix runs at 2 and 4 ranks"),
]

ITERS = 3
"""Calls per run, all in one block: a writer's unfenced puts land only at the block end (the host's
barrier), after its peers' reads of the first two calls, so a failure does not depend on timing."""
PUT, WRITE = Marker.PUT_FENCE, Marker.WRITE_FENCE
NEEDED: dict[str, frozenset[DropMarker]] = {
    "allreduce-mesh": frozenset(), "reduce_scatter": frozenset(), "broadcast": frozenset(), "barrier": frozenset(),
    "allreduce-ring": frozenset({DropMarker(PUT, 0), DropMarker(PUT, 1)}),
    "allgather": frozenset({DropMarker(PUT, 0)}), "all_to_all": frozenset({DropMarker(PUT, 0)}),
    "all_to_all_v": frozenset({DropMarker(PUT, 0)}),
    "allgather-pull": frozenset({DropMarker(WRITE, 0)}),  # the own-row store; not the fences after the gets
}
"""The markers without which the recipe fails: where it hands data to a peer within a call."""

SPECS: dict[str, CollectiveSpec] = {
    "allreduce-mesh": CollectiveSpec("allreduce", size=64),
    "allreduce-ring": CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=64),
    "allgather": CollectiveSpec("allgather", size=64),
    "reduce_scatter": CollectiveSpec("reduce_scatter", size=64),
    "broadcast": CollectiveSpec("broadcast", size=64, root=1),
    "barrier": CollectiveSpec("barrier"),
    "all_to_all": CollectiveSpec("all_to_all", size=64),
    "all_to_all_v": CollectiveSpec("all_to_all_v", size=16, max_recv=2),
    "allgather-pull": CollectiveSpec("allgather", size=64),
}
VARIANTS: dict[str, RecipeVariant] = {"allgather-pull": RecipeVariant(allgather_pull=True)}
HARNESS: dict[str, dict[str, object]] = {
    "check": {},
    "stress": {"jitter_us": 50.0, "invariants": True, "race_detect": True},
}


def _options(harness: str, insert: bool) -> RuntimeOptions:
    return RuntimeOptions(visibility="fenced", insert_fences=insert, timeout=30, **HARNESS[harness])  # type: ignore[arg-type]


def _lower(name: str, drop: DropMarker | None, program: Program, drains: bool = True) -> Program:
    """The collective's recipe, for ``drop`` InsertCommFence without that marker, and (``drains``) the
    toolchain's drains, which a program run without InsertCommFence still gets from PTOAS."""
    lowered = lower_composite_ops(program, variant=VARIANTS.get(name, CORRECT))
    if drop is not None:
        lowered = InsertCommFence(drop=drop).apply(lowered)
    return InsertToolchainDrains().apply(lowered) if drains else lowered


def _passes(comm: MPI.Intracomm, name: str, options: RuntimeOptions, drop: DropMarker | None = None,
            drains: bool = True) -> tuple[bool, str]:
    result = run_check(comm, collective_program(SPECS[name]), ITERS, options, ITERS, hooks=QUIET,
                       lower=partial(_lower, name, drop, drains=drains))
    return result.ok, result.summary()


@pytest.mark.parametrize("harness", sorted(HARNESS))
@pytest.mark.parametrize("insert", [True, False], ids=["with-pass", "without-pass"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_pass_is_needed_exactly_where_data_is_published(comm: MPI.Intracomm, name: str, insert: bool,
                                                            harness: str) -> None:
    ok, summary = _passes(comm, name, _options(harness, insert))
    want = insert or not NEEDED[name]
    agree(comm, ok == want, f"{name} {harness} {'with' if insert else 'without'} InsertCommFence: "
          f"expected {'PASS' if want else 'FAIL'}, got {summary}")


IN_FLIGHT = frozenset({"allreduce-mesh", "reduce_scatter"})
"""The recipes whose remote_loads are still in flight at the barrier notify after which their peers
overwrite the windows read, when run exactly as written (no InsertCommFence, no toolchain drain):
the race detector reports ``missing fence (read in flight)`` (PTOAS#711's tload variant). Decided
right (docs/races.md, "Fence and cache reports"): the tile.add that uses the read waits for it, the
scalar notify does not; pypto's or PTOAS's drain before the notify is what makes the recipes safe."""


@pytest.mark.parametrize("name", sorted(SPECS))
def test_as_written_the_reads_in_flight_are_reported(comm: MPI.Intracomm, name: str) -> None:
    """Without InsertCommFence and without the toolchain's drains (``--no-insert-fences``), under the
    stress harness (race detector on): the publishing recipes fail as without the pass, and the
    recipes of :data:`IN_FLIGHT` too (their reads in flight); the toolchain's drain fixes the latter."""
    ok, summary = _passes(comm, name, _options("stress", False), drains=False)
    want = not NEEDED[name] and name not in IN_FLIGHT
    agree(comm, ok == want, f"{name} as written: expected {'PASS' if want else 'FAIL'}, got {summary}")


def _drops(name: str) -> list[DropMarker]:
    """Every marker InsertCommFence places in the collective's lowered program."""
    lowered = _lower(name, None, collective_program(SPECS[name]).program)
    full = format_program(InsertCommFence().apply(lowered))
    out = []
    for kind in Marker:
        k = 0
        while format_program(InsertCommFence(drop=DropMarker(kind, k)).apply(lowered)) != full:
            out.append(DropMarker(kind, k))
            k += 1
    return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_exactly_the_needed_markers_are_necessary(comm: MPI.Intracomm, name: str) -> None:
    drops = _drops(name)
    agree(comm, NEEDED[name] <= set(drops), f"{sorted(map(str, NEEDED[name]))} not all among {drops}")
    for drop in drops:
        ok, summary = _passes(comm, name, _options("check", False), drop)
        want = drop not in NEEDED[name]
        agree(comm, ok == want, f"{name} without {drop}: expected {'PASS' if want else 'FAIL'}, got {summary}")


@pytest.mark.parametrize("visibility", ["eager", "deferred"])
def test_the_pull_allgather_is_a_correct_recipe(comm: MPI.Intracomm, visibility: str) -> None:
    """The pull form is another recipe, not a bug: race-free and right in the other modes too."""
    options = RuntimeOptions(visibility=visibility, timeout=30, **HARNESS["stress"])  # type: ignore[arg-type]
    ok, summary = _passes(comm, "allgather-pull", options)
    agree(comm, ok, summary)
