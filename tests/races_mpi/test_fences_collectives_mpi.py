"""Every lowered collective in fenced visibility: InsertCommFence is necessary and sufficient in the model.

The check harness (``run_check``: inputs restaged, results consumed, back to back) runs each
collective under ``--visibility fenced`` with and without the pass, once as ``pldemu check`` runs it
and once as ``pldemu stress`` does (jitter, invariants, race detector). A recipe that publishes data
by put (allreduce ring, allgather, all_to_all, all_to_all_v) must give wrong data without the pass;
every recipe must pass with it; the barrier and the read-only recipes (allreduce mesh,
reduce_scatter, broadcast: peers only read what the host wrote) pass either way.

Then every marker the pass places in each collective is dropped in turn (``DropMarker``, the
program run as written): the run must fail exactly when the marker is a put's fence. The other
markers order nothing in these recipes in the model (no recipe reads a data window with
``tensor.read``; a recipe's window stores are read only by its own later put, which reads its own
writes, or by the host).

The module runs at 2 and 4 ranks only (each size about 15 s on 2 cores; 8 ranks cost a minute)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.blocks import QUIET
from pldemu.harness.check import run_check
from pldemu.ir import AllreduceMode, Program, format_program
from pldemu.lowering import DropMarker, InsertCommFence, Marker, lower_composite_ops
from pldemu.runtime import RuntimeOptions

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(MPI.COMM_WORLD.Get_size() not in (2, 4), reason="the fenced matrix runs at 2 and 4 ranks"),
]

ITERS = 3
"""Calls per run, all in one block: a writer's unfenced puts land only at the block end (the host's
barrier), after its peers' reads of the first two calls, so a failure does not depend on timing."""
PUBLISHES: dict[str, bool] = {"allreduce-mesh": False, "allreduce-ring": True, "allgather": True,
                              "reduce_scatter": False, "broadcast": False, "barrier": False, "all_to_all": True,
                              "all_to_all_v": True}
"""Whether the recipe hands data to a peer by put within a call (what needs the put's fence)."""

SPECS: dict[str, CollectiveSpec] = {
    "allreduce-mesh": CollectiveSpec("allreduce", size=64),
    "allreduce-ring": CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=64),
    "allgather": CollectiveSpec("allgather", size=64),
    "reduce_scatter": CollectiveSpec("reduce_scatter", size=64),
    "broadcast": CollectiveSpec("broadcast", size=64, root=1),
    "barrier": CollectiveSpec("barrier"),
    "all_to_all": CollectiveSpec("all_to_all", size=64),
    "all_to_all_v": CollectiveSpec("all_to_all_v", size=16, max_recv=2),
}
HARNESS: dict[str, dict[str, object]] = {
    "check": {},
    "stress": {"jitter_us": 50.0, "invariants": True, "race_detect": True},
}


def _options(harness: str, insert: bool) -> RuntimeOptions:
    return RuntimeOptions(visibility="fenced", insert_fences=insert, timeout=30, **HARNESS[harness])  # type: ignore[arg-type]


def _passes(comm: MPI.Intracomm, name: str, options: RuntimeOptions,
            lower: Callable[[Program], Program] | None = None) -> tuple[bool, str]:
    result = run_check(comm, collective_program(SPECS[name]), ITERS, options, ITERS, hooks=QUIET, lower=lower)
    return result.ok, result.summary()


@pytest.mark.parametrize("harness", sorted(HARNESS))
@pytest.mark.parametrize("insert", [True, False], ids=["with-pass", "without-pass"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_pass_is_needed_exactly_where_data_is_published(comm: MPI.Intracomm, name: str, insert: bool,
                                                            harness: str) -> None:
    ok, summary = _passes(comm, name, _options(harness, insert))
    want = insert or not PUBLISHES[name]
    agree(comm, ok == want, f"{name} {harness} {'with' if insert else 'without'} InsertCommFence: "
          f"expected {'PASS' if want else 'FAIL'}, got {summary}")


def _drops(name: str) -> list[DropMarker]:
    """Every marker InsertCommFence places in the collective's lowered program."""
    lowered = lower_composite_ops(collective_program(SPECS[name]).program)
    full = format_program(InsertCommFence().apply(lowered))
    out = []
    for kind in Marker:
        k = 0
        while format_program(InsertCommFence(drop=DropMarker(kind, k)).apply(lowered)) != full:
            out.append(DropMarker(kind, k))
            k += 1
    return out


def _lower_dropping(drop: DropMarker, program: Program) -> Program:
    return InsertCommFence(drop=drop).apply(lower_composite_ops(program))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_only_a_puts_fence_is_necessary(comm: MPI.Intracomm, name: str) -> None:
    drops = _drops(name)
    agree(comm, bool(drops) and (PUBLISHES[name] == any(d.kind is Marker.PUT_FENCE for d in drops)), str(drops))
    for drop in drops:
        ok, summary = _passes(comm, name, _options("check", False), partial(_lower_dropping, drop))
        want = drop.kind is not Marker.PUT_FENCE
        agree(comm, ok == want, f"{name} without {drop}: expected {'PASS' if want else 'FAIL'}, got {summary}")
