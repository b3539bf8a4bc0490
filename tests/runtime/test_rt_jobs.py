"""Failure paths as whole MPI jobs (launched with pldemu.job.launch): a rank that raises ends the job
with its message, a deadlock prints the wait-for report, an out-of-bounds put is refused; no /dev/shm
segment outlives any of these jobs. Plus ``pldemu run`` end to end on .pld files."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pldemu.job.launch import run_job

pytestmark = pytest.mark.launcher

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXAMPLES = REPO / "pldemu" / "examples"
JOB_TIMEOUT = 180.0
WAIT_TIMEOUT = 60.0
"""A failing rank must end its job long before peers blocked in a wait would give up on their own."""


@dataclass
class Job:
    rc: int
    out: str
    err: str
    seconds: float

    def __str__(self) -> str:
        return f"exit {self.rc} after {self.seconds:.1f}s\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def _job(tmp_path: Path, n: int, argv: list[str]) -> Job:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    start = time.monotonic()
    with out.open("w") as o, err.open("w") as e:
        rc = run_job(n, argv, JOB_TIMEOUT, stdout=o, stderr=e, cwd=REPO)
    return Job(rc, out.read_text(), err.read_text(), time.monotonic() - start)


def _rt_job(tmp_path: Path, case: str, wait_timeout: float = WAIT_TIMEOUT, n: int = 3) -> Job:
    job = _job(tmp_path, n, [sys.executable, "-m", "mpi4py", str(HERE / "rt_job.py"), case, str(wait_timeout)])
    segments = {line.split(" ", 1)[1] for line in job.out.splitlines() if line.startswith("SHM ")}
    left = sorted(p for p in segments if os.path.exists(p))
    assert not left, f"/dev/shm segments left behind: {left}\n{job}"
    return job


def test_clean_job_reports_and_leaves_nothing(tmp_path: Path) -> None:
    job = _rt_job(tmp_path, "ok")
    assert job.rc == 0, job
    assert "ops executed (all ranks):" in job.out and "pld.system.wait 18" in job.out, job
    assert job.out.count("sum=0 min=0 max=0") == 3, job  # every signal cell back at zero


def test_out_of_bounds_put_on_one_rank_ends_the_job_with_its_message(tmp_path: Path) -> None:
    job = _rt_job(tmp_path, "oob")
    assert job.rc == 3, job
    assert "pldemu run: rank 1: WindowAccessError: main:" in job.err, job
    assert "put: rank 1 -> peer 2 on window 'data'" in job.err and "dim 1 covers [3, 7) outside [0, 4)" in job.err
    assert job.seconds < WAIT_TIMEOUT / 2, job


def test_any_exception_on_one_rank_ends_the_job(tmp_path: Path) -> None:
    job = _rt_job(tmp_path, "raise")
    assert job.rc == 3, job
    assert "pldemu run: rank 1: internal error: RuntimeError: boom on rank 1 at main:" in job.err, job
    assert "Traceback (most recent call last)" in job.err, job
    assert job.seconds < WAIT_TIMEOUT / 2, job


def test_deadlock_prints_one_wait_for_report_and_fails_within_the_timeout(tmp_path: Path) -> None:
    job = _rt_job(tmp_path, "deadlock", wait_timeout=3.0)
    assert job.rc == 3, job
    assert job.err.count("wait-for graph (3 ranks") == 1, job
    assert "cycle: rank 0 -> rank 1 -> rank 2 -> rank 0" in job.err, job
    assert "waits for sig[1, 0] >= 1, observed 0" in job.err and "-> waits for rank 1" in job.err, job
    assert job.seconds < 3.0 + 30, job


def _pldemu(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pldemu", "run", *args], capture_output=True, text=True,
                          timeout=JOB_TIMEOUT, cwd=tmp_path, check=False)


def test_pldemu_run_executes_a_pld_file_and_dumps_buffers(tmp_path: Path) -> None:
    res = _pldemu(tmp_path, str(EXAMPLES / "custom_barrier.pld"), "-n", "3", "--windows", "rma", "--dump", "out")
    assert res.returncode == 0, res.stderr
    assert "ranks 3, windows rma" in res.stdout and "pld.system.notify 36" in res.stdout, res.stdout
    assert (tmp_path / "out" / "program.pld").read_text().startswith("program custom_barrier")
    for r in range(3):
        assert (np.load(tmp_path / "out" / f"rank{r}" / "credits.npy") == 0).all()


def test_pldemu_run_lowers_collectives(tmp_path: Path) -> None:
    res = _pldemu(tmp_path, str(EXAMPLES / "allreduce_loop.pld"), "-n", "2", "--timeout", "60")
    assert res.returncode == 0, res.stderr
    assert ", lowered)" in res.stdout and "pld.tile.remote_load" in res.stdout, res.stdout


def test_pldemu_run_deadlock_exits_3_with_the_report(tmp_path: Path) -> None:
    program = tmp_path / "stuck.pld"
    program.write_text(
        "program stuck {\n  signal sig: int32[NR, 1]\n  func main() {\n"
        "    ctx = pld.system.get_comm_ctx(sig)\n    me = pld.system.rank(ctx)\n"
        "    if me == 0:int32 {\n      pld.system.wait(sig, [1, 0], 1:int32, cmp=Ge)\n    }\n  }\n}\n"
    )
    res = _pldemu(tmp_path, str(program), "-n", "2", "--timeout", "2")
    assert res.returncode == 3, res.stderr
    # Line 8 of the program as printed (the printer puts a blank line before each function).
    assert "deadlock: rank 0 waited 2.0s for sig[1, 0] >= 1 (observed 0) at main:8" in res.stderr, res.stderr
    assert "locations are FUNC:LINE in the executed program as printed" in res.stderr
    assert "missing credit: rank 0 waits for rank 1 on sig[1, 0] >= 1, but rank 1 is" in res.stderr, res.stderr


@pytest.mark.parametrize("visibility", ["eager", "deferred"])
def test_pldemu_run_takes_every_schedule_flag_on_a_user_program(tmp_path: Path, visibility: str) -> None:
    # The schedules a built-in collective gets in check/stress work on a user's .pld file too.
    res = _pldemu(tmp_path, str(EXAMPLES / "ring_demo.pld"), "-n", "3", "--jitter", "50", "--straggler", "1:200",
                  "--skew", "100", "--visibility", visibility, "--invariants", "--races", "--seed", "7")
    assert res.returncode == 0, res.stderr
    # max over 3 ranks of (rank + 9) = 11 in every element of every rank
    assert res.stdout.count("sum=45067 min=11 max=11 nan=0") == 3, res.stdout


def test_pldemu_run_rejects_a_bad_schedule_flag(tmp_path: Path) -> None:
    res = _pldemu(tmp_path, str(EXAMPLES / "ring_demo.pld"), "-n", "2", "--straggler", "x")
    assert res.returncode == 2 and "R:US" in res.stderr, res.stderr


def test_ranks_run_the_program_the_launcher_handed_over(tmp_path: Path) -> None:
    """``--lowered FILE`` (what the launcher passes its ranks): the ranks run the pickled program, not
    the file named on the command line, and a file that is not a pickled program is exit 2."""
    from pldemu.job.launch import pldemu_argv
    from pldemu.job.load import hand_over, load_program

    handed = hand_over(load_program(str(EXAMPLES / "sum_inputs.pld")), tmp_path)
    job = _job(tmp_path, 2, pldemu_argv(["run", str(EXAMPLES / "custom_barrier.pld"), "--lowered", str(handed)]))
    assert job.rc == 0, job
    assert "pldemu run: program sum_inputs" in job.out, job
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps({"not": "a program"}))
    job = _job(tmp_path, 2, pldemu_argv(["run", str(EXAMPLES / "custom_barrier.pld"), "--lowered", str(bad)]))
    assert job.rc == 2 and job.err.count("not a pickled pldemu program") == 1, job
