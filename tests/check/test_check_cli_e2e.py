"""``pldemu check`` and ``pldemu demo`` end to end: the command launches its own mpiexec job."""

from __future__ import annotations

import sys
from functools import partial

import pytest
from helpers import pldemu as run_pldemu
from helpers import report as _report
from mpi_launch import run_mpi

pytestmark = pytest.mark.launcher

TIMEOUT = 300.0
pldemu = partial(run_pldemu, timeout=TIMEOUT)


def test_check_allreduce_ring_fp16() -> None:
    res = pldemu(
        "check",
        "allreduce",
        "--mode",
        "ring",
        "--dtype",
        "fp16",
        "-n",
        "3",
        "--iters",
        "20",
        "--size",
        "100",
        "--reduce",
        "max",
    )
    assert res.returncode == 0, _report(res)
    lines = res.stdout.splitlines()
    assert lines[0].startswith("# pldemu check: allreduce ring fp16 max, 3 ranks, SIZE=100, 20 iters")
    assert lines[1].split() == [
        "#",
        "iters",
        "size(B)",
        "dtype",
        "time/iter(us)",
        "#wrong",
        "cells!=0",
        "native",
    ]
    rows = [ln.split() for ln in lines[2:] if ln and not ln.startswith("#")]
    assert [r[0] for r in rows] == ["3", "6", "9", "12", "15", "18", "20"], _report(res)
    assert all(r[1:3] == ["200", "fp16"] and r[4:] == ["0", "0", "ok"] for r in rows), _report(res)
    assert lines[-1].endswith(": PASS") and "20 iters, 0 wrong" in lines[-1]


def test_check_runs_under_an_adversarial_schedule() -> None:
    """The schedule flags of run and stress work on check too, and the header names the schedule."""
    res = pldemu("check", "reduce_scatter", "--size", "64", "--iters", "6", "-n", "3", "--jitter", "50",
                 "--straggler", "1:300", "--skew", "100", "--visibility", "deferred", "--races")
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("; schedule: jitter 50 us, straggler 1:300 us, skew 100 us, visibility deferred" in res.stdout
            and ": PASS" in res.stdout), res.stdout


def test_check_all_prints_a_summary_table() -> None:
    res = pldemu(
        "check", "all", "-n", "2", "--iters", "20", "--size", "64", "--windows", "rma", "--dtype", "fp16"
    )
    assert res.returncode == 0, _report(res)
    assert "# summary" in res.stdout
    assert "# 8 of 8 cases passed" in res.stdout, _report(res)
    for label in (
        "allreduce mesh fp16 sum",
        "allreduce ring fp16 sum",
        "all_to_all_v fp16 max_recv=4",
        "broadcast fp16 root=0",
        "barrier ",
    ):
        assert label in res.stdout, label


PUBLISHING_BY_PUT = ("allreduce ring", "allgather", "all_to_all ", "all_to_all_v")
"""The summary rows of the recipes that hand data to a peer by put (all_to_all without its _v)."""


@pytest.mark.parametrize("insert", [True, False], ids=["with-pass", "no-insert-fences"])
def test_check_all_in_fenced_visibility(insert: bool) -> None:
    """``pldemu check all --visibility fenced``, bounded: every case passes with InsertCommFence;
    as written (``--no-insert-fences``) exactly the recipes that publish by put fail (exit 1). One block
    of 3 calls: a writer's unfenced puts land only at its block end (the host's barrier), after its
    peers' first two reads, so the failures do not depend on timing."""
    res = pldemu("check", "all", "-n", "2", "--iters", "3", "--block", "3", "--size", "64", "--visibility", "fenced",
                 *(() if insert else ("--no-insert-fences",)))
    assert res.returncode == (0 if insert else 1), _report(res)
    summary = res.stdout.split("# summary", 1)[1].split("# ", 2)[1]
    rows = [line for line in summary.splitlines()[1:] if line.strip()]
    assert len(rows) == 8, _report(res)
    for row in rows:
        publishes = any(row.strip().startswith(label) for label in PUBLISHING_BY_PUT)
        assert row.rstrip().endswith("FAIL" if publishes and not insert else "PASS"), row


def test_check_broadcast_from_every_root() -> None:
    res = pldemu(
        "check", "broadcast", "--root", "all", "-n", "3", "--iters", "20", "--size", "32", "--block", "10"
    )
    assert res.returncode == 0, _report(res)
    assert "# 3 of 3 cases passed" in res.stdout
    assert all(f"root={r}" in res.stdout for r in range(3))


def test_argument_error_exits_2_without_a_job() -> None:
    res = pldemu("check", "allgather", "--size", "1", "-n", "3")
    assert res.returncode == 2, _report(res)
    assert res.stderr.startswith("pldemu check: error: allgather: ")
    assert "alignment unit" in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""
    usage = pldemu("check", "allreduce", "--iters", "-3")
    assert usage.returncode == 2 and "positive integer" in usage.stderr


def test_rank_count_mismatch_inside_a_job_exits_2() -> None:
    res = run_mpi(2, [sys.executable, "-m", "mpi4py", "-m", "pldemu", "check", "barrier", "-n", "3"], TIMEOUT)
    assert res.returncode == 2, res.report()
    assert "-n 3 but this MPI job has 2 ranks" in res.stderr


def test_demo() -> None:
    res = pldemu("demo")
    assert res.returncode == 0, _report(res)
    out = res.stdout
    assert "pld.tensor.allreduce(data, sig" in out and "pld.tensor.all_to_all_v(a2a_in" in out
    assert "for it in range(" in out, "the program text is printed"
    assert out.count("  ok  ") == 4, _report(res)
    assert out.rstrip().splitlines()[-1].startswith("PASS")
