"""Traces written by several ranks: one file, one track per rank, notify -> wait flows that point at
the rank whose credit the cell counts, race reports and failures as instant events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import agree
from mpi4py import MPI
from races_mpi_helpers import race_harness

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.lowering import lower_composite_ops
from pldemu.mutants import MUTANTS
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.instrument.trace import partial_path


def _shared_dir(comm: MPI.Intracomm, tmp_path: Path) -> Path:
    """Rank 0's tmp_path, known to every rank (the trace is written by rank 0 only)."""
    path: str = comm.bcast(str(tmp_path), root=0)
    return Path(path)


def _load(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text())["traceEvents"]
    return events


@pytest.mark.self_and_world
def test_mesh_allreduce_trace_has_every_rank_and_flows_from_the_credit_owner(comm: MPI.Intracomm,
                                                                              tmp_path: Path) -> None:
    n = comm.Get_size()
    out = _shared_dir(comm, tmp_path) / "allreduce.json"
    cp = collective_program(CollectiveSpec("allreduce", size=64))
    with ProgramInstance(lower_composite_ops(cp.program), comm, RuntimeOptions(trace=str(out))) as inst:
        for _ in range(3):
            inst.local("target")[...] = 1
            comm.Barrier()
            inst.run()
    if comm.Get_rank() == 0:
        events = _load(out)
        # A flow may start after its wait ended by no more than the clock alignment error.
        slack = 2 * max(json.loads(out.read_text())["otherData"]["clock_uncertainty_us"]) + 1.0
        calls = [e for e in events if e.get("cat") == "call"]
        waits = [e for e in events if e.get("cat") == "wait"]
        starts = {e["id"]: e for e in events if e["ph"] == "s"}
        finishes = [e for e in events if e["ph"] == "f"]
        problems = []
        if sorted({e["pid"] for e in calls}) != list(range(n)) or len(calls) != 3 * n:
            problems.append(f"calls {[(e['pid'], e['name']) for e in calls]}")
        # Every wait of the mesh barrier waits on cell [src, 0], which only rank src notifies (+1) and
        # the waiter retires (-N): each satisfied wait's flow starts on rank src.
        if len(finishes) != len(waits):
            problems.append(f"{len(finishes)} flows for {len(waits)} waits")
        for f in finishes:
            s = starts[f["id"]]
            wait = next(w for w in waits if w["pid"] == f["pid"] and w["ts"] <= f["ts"] <= w["ts"] + w["dur"])
            src = int(wait["args"]["cell"].split("[")[1].split(",")[0])
            if s["pid"] != src or s["ts"] > wait["ts"] + wait["dur"] + slack:
                problems.append(f"flow {s} -> {f} for {wait}")
        if any(e["ph"] == "X" and e["dur"] < 0 for e in events):
            problems.append("negative duration")
        ok, detail = not problems, "\n".join(problems[:5])
    else:
        ok, detail = True, ""
    agree(comm, ok, detail)


@pytest.mark.mpi(min_size=2)
def test_race_reports_appear_in_the_trace_as_instant_pairs(comm: MPI.Intracomm, tmp_path: Path) -> None:
    out = _shared_dir(comm, tmp_path) / "racy.json"
    m = MUTANTS["allreduce-no-post-reduce-barrier"]
    opts = RuntimeOptions(race_detect=True, trace=str(out), timeout=60)
    res = race_harness(comm, collective_program(m.spec), 3, m.lowering(), options=opts, block=3)
    if comm.Get_rank() == 0:
        races = [e for e in _load(out) if e.get("cat") == "race"]
        pairs: dict[int, list[dict[str, Any]]] = {}
        for e in races:
            pairs.setdefault(e["args"]["pair"], []).append(e)
        ok = (len(pairs) == len(res.reports) > 0 and all(len(p) == 2 for p in pairs.values())
              and all(p[0]["pid"] != p[1]["pid"] for p in pairs.values()))
        detail = f"{len(pairs)} pairs for {len(res.reports)} reports"
    else:
        ok, detail = True, ""
    agree(comm, ok, detail)


@pytest.mark.mpi(min_size=2)
def test_a_failing_rank_writes_its_partial_trace(comm: MPI.Intracomm, tmp_path: Path) -> None:
    from pldemu.ir import NR, ProgramBuilder
    from pldemu.runtime import DeadlockError

    out = _shared_dir(comm, tmp_path) / "stuck.json"
    pb = ProgramBuilder("stuck")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    me = fb.pld.system.rank(fb.pld.system.get_comm_ctx(sig))
    fb.pld.system.wait(sig, [me, 0], 1)  # nobody notifies
    inst = ProgramInstance(pb.build(), comm, RuntimeOptions(trace=str(out), timeout=0.5))
    try:
        with pytest.raises(DeadlockError):
            inst.run()
        mine = Path(partial_path(str(out), comm.Get_rank()))
        errors = [e for e in _load(mine) if e.get("cat") == "error"] if mine.is_file() else []
        agree(comm, len(errors) == 1 and "DeadlockError" in errors[0]["name"], f"{mine}: {errors}")
    finally:
        inst.close()  # every rank failed alike: the collective close is safe (and writes the full trace)
