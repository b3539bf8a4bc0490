"""A user's program end to end (the commands launch their own mpiexec job): ``pldemu run PROGRAM
--iters K`` checks the signal cells at rest at every block end, and ``pldemu stress PROGRAM.pld``
catches a broken or deadlocking program, with a replay command that fails the same way. Small programs
and few iterations: each job takes a few seconds on 2 cores with 4 ranks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import pldemu
from helpers import report as _report
from mpi_launch import REPO_ROOT
from stress_launch_helpers import STUCK, broken_text, correct_text

pytestmark = pytest.mark.launcher

EXAMPLES = REPO_ROOT / "pldemu" / "examples"
ROW = re.compile(r"^\s+(\d+)\s+[\d.]+\s+(\d+)\s+(\d+)\s+(\d+)$", re.MULTILINE)
"""A progress row of ``run --iters``: iters, time/iter, cells!=0, invariants, races."""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_run_iters_on_a_correct_program_prints_clean_rows(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.pld", correct_text())
    res = pldemu("run", good, "--no-lower", "-n", "4", "--iters", "50", "--block", "10", "--invariants",
                 "--jitter", "20")
    assert res.returncode == 0, _report(res)
    rows = ROW.findall(res.stdout)
    assert [int(r[0]) for r in rows] == [10, 20, 30, 40, 50], _report(res)
    assert all(r[1:] == ("0", "0", "0") for r in rows), _report(res)
    assert "50 iters, 0 signal cells != 0, 0 invariant violations, 0 races" in res.stdout and ": PASS" in res.stdout
    assert "over 50 calls" in res.stdout and "pld.system.notify 1800" in res.stdout, _report(res)
    assert "signal cells at rest: all 0 at every one of 5 block ends" in res.stdout, _report(res)


def test_run_iters_on_a_hand_written_barrier_loop_with_races_on() -> None:
    res = pldemu("run", str(EXAMPLES / "custom_barrier.pld"), "-n", "3", "--iters", "20", "--races",
                 "--stage-pieces")
    assert res.returncode == 0, _report(res)
    assert len(ROW.findall(res.stdout)) == 7 and "races: none" in res.stdout, _report(res)


def test_run_iters_on_a_program_without_epilogue_exits_1_naming_the_cells(tmp_path: Path) -> None:
    broken = _write(tmp_path, "broken.pld", broken_text())
    res = pldemu("run", broken, "--no-lower", "-n", "4", "--iters", "5")
    assert res.returncode == 1, _report(res)
    # Every rank names its first non-zero cell: buffer, cell, value, iteration; and the way out.
    for r in range(4):
        line = re.search(rf"^# rank {r} after iteration 0: invariant nonzero-at-rest: 3 cell\(s\) != 0 in signal "
                         rf"buffer signal of rank {r}, first signal\[\d, 0\] = 2 .*--no-cell-check", res.stdout,
                         re.MULTILINE)
        assert line, _report(res)
    assert "60 signal cells != 0" in res.stdout and ": FAIL" in res.stdout, _report(res)
    # A program that leaves its cells non-zero on purpose opts out.
    res = pldemu("run", broken, "--no-lower", "-n", "4", "--iters", "5", "--no-cell-check")
    assert res.returncode == 0 and "cells not checked" in res.stdout, _report(res)


def test_run_iters_reports_races_with_exit_4() -> None:
    res = pldemu("run", str(EXAMPLES / "early_reader.pld"), "-n", "2", "--iters", "4", "--block", "2", "--races")
    assert res.returncode == 4, _report(res)
    rows = ROW.findall(res.stdout)
    assert len(rows) == 2 and all(int(r[3]) > 0 for r in rows), _report(res)
    assert "race on data[0, 2:4] of rank 1" in res.stdout, _report(res)


def test_stress_catches_a_program_without_epilogue_and_the_replay_fails_the_same_way(tmp_path: Path) -> None:
    broken = _write(tmp_path, "broken.pld", broken_text())
    res = pldemu("stress", broken, "--no-lower", "--iters", "40", "--seed", "3", "-n", "4")
    assert res.returncode == 1, _report(res)
    assert re.search(r"^# FAILED: invariant at iteration 9 \(rank \d\)", res.stdout, re.MULTILINE), _report(res)
    assert "nonzero-at-rest" in res.stdout, _report(res)
    replay = re.search(r"^# replay: (.*)$", res.stdout, re.MULTILINE)
    assert replay, _report(res)
    words = shlex.split(replay.group(1))
    assert words[:3] == ["pldemu", "stress", str(Path(broken).resolve())] and "--no-lower" in words
    again = pldemu(*words[1:])
    assert again.returncode == 1 and "# FAILED: invariant at iteration 9" in again.stdout, _report(again)


def test_stress_passes_a_correct_program(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.pld", correct_text())
    res = pldemu("stress", good, "--iters", "30", "--visibility", "deferred", "-n", "3")
    assert res.returncode == 0 and "no failure in 30 iterations" in res.stdout, _report(res)
    assert "# pldemu stress: program allreduce" in res.stdout, _report(res)


def test_stress_reports_a_deadlocking_program_with_the_wait_for_graph(tmp_path: Path) -> None:
    stuck = _write(tmp_path, "stuck.pld", STUCK)
    res = pldemu("stress", stuck, "--timeout", "2", "-n", "3")
    assert res.returncode == 3, _report(res)
    assert "# FAILED: deadlock at iteration 0 (rank 0)" in res.stdout, _report(res)
    assert "waits for rank 1" in res.stdout and "# replay: pldemu stress " in res.stdout, _report(res)


def test_stress_refuses_a_program_pinned_to_another_rank_count(tmp_path: Path) -> None:
    pinned = _write(tmp_path, "pinned.pld", correct_text().replace("program allreduce {",
                                                                    "program allreduce nranks=4 {", 1))
    res = pldemu("stress", pinned, "--iters", "5", "-n", "2")
    assert res.returncode == 2, _report(res)


MIXED = """\
program mixed {
  signal sig: int32[NR, 1]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    # Every rank sets its own cell, then adds to it: Set and AtomicAdd on one cell, then a negative value.
    pld.system.notify(sig, me, [me, 0], 1:int32, op=Set)
    pld.system.notify(sig, me, [me, 0], -3:int32, op=AtomicAdd)
  }
}
"""


def test_run_once_with_invariants_reports_them_and_exits_1(tmp_path: Path) -> None:
    """Without --iters the program runs once; --invariants must still check (and fail) it."""
    path = _write(tmp_path, "mixed.pld", MIXED)
    res = pldemu("run", path, "-n", "2", "--invariants")
    assert res.returncode == 1, _report(res)
    assert re.search(r"invariants: \d+ violation\(s\)", res.stdout), _report(res)
    assert "negative" in res.stdout and "Set" in res.stdout, _report(res)
    clean = pldemu("run", str(EXAMPLES / "custom_barrier.pld"), "-n", "3", "--invariants")
    assert clean.returncode == 0 and "invariants: none broken" in clean.stdout, _report(clean)


def test_a_python_builder_program_runs_and_stresses_like_a_pld_file() -> None:
    example = str(EXAMPLES / "ring_demo.py")
    res = pldemu("run", example, "-n", "3", "--iters", "2", "--jitter", "20")
    assert res.returncode == 0, _report(res)
    assert "program ring_demo" in res.stdout and "min=11 max=11 nan=0" in res.stdout, _report(res)
    res = pldemu("stress", example, "--iters", "4", "--block", "2", "-n", "3")
    assert res.returncode == 0 and "no failure in 4 iterations" in res.stdout, _report(res)


def test_stress_and_check_print_the_fence_notes_their_runs_found() -> None:
    """Under --visibility fenced, ``stress`` prints the notes of the run (a user's useless fence, at its
    line) and ``check`` the one-line summary of the markers InsertCommFence placed that did nothing."""
    litmus = str(REPO_ROOT / "tests" / "races" / "fences" / "mp_double_fence.pld")
    res = pldemu("stress", litmus, "-n", "2", "--iters", "4", "--visibility", "fenced", "--no-insert-fences")
    assert "note: system.fence at main:15 system.fence() [mp_double_fence.pld:16] ordered nothing" in res.stdout, \
        _report(res)
    res = pldemu("check", "allgather", "-n", "2", "--iters", "3", "--block", "3", "--size", "64",
                 "--visibility", "fenced", "--races")
    assert res.returncode == 0, _report(res)
    notes = [line for line in res.stdout.splitlines() if "note:" in line]
    assert len(notes) == 1 and "note: InsertCommFence placed 1 marker that did nothing" in notes[0], _report(res)
