"""The launcher itself: output capture, exit codes, killing hung jobs."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from helpers import processes_with
from mpi_launch import mpiexec_command, run_mpi

pytestmark = pytest.mark.launcher


def test_output_and_exit_code(tmp_path: Path) -> None:
    # Rank 0 fails, but only once rank 1 has printed: a failing rank makes mpiexec kill the others, so
    # two ranks exiting at once would race their output against the kill.
    done = tmp_path / "rank1-printed"
    code = (
        "import os, sys, time\n"
        "rank = int(os.environ.get('PMI_RANK') or os.environ.get('OMPI_COMM_WORLD_RANK') or 0)\n"
        # One write per line: with unbuffered output, print(a, b) writes its pieces separately and two
        # ranks' pieces can interleave ("hello fromhello from 1").
        "sys.stdout.write('hello from ' + os.environ['PYTHONUNBUFFERED'] + '\\n')\n"
        f"marker = {str(done)!r}\n"
        "if rank != 0:\n"
        "    open(marker, 'w').close()\n"
        "    sys.exit(0)\n"
        "deadline = time.monotonic() + 60\n"
        "while not os.path.exists(marker) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "sys.exit(3)\n"
    )
    result = run_mpi(2, [sys.executable, "-c", code], timeout=120, env={"PLDEMU_TEST_VAR": "x"})
    assert not result.timed_out
    assert result.returncode != 0
    assert result.stdout.count("hello from 1") == 2, result.report()
    assert result.args[: len(mpiexec_command(2))] == mpiexec_command(2)


def test_timeout_kills_the_whole_job() -> None:
    token = f"pldemu-hang-{uuid.uuid4().hex}"
    code = f"print('started', flush=True); import time; time.sleep(600)  # {token}"
    result = run_mpi(2, [sys.executable, "-c", code], timeout=5)
    assert result.timed_out
    assert "TIMED OUT" in result.report()
    assert "started" in result.stdout, result.report()
    assert result.duration < 60
    assert processes_with(token) == [], "ranks survived the timeout kill"


def test_environment_marks_the_job() -> None:
    code = "import os; print('IN_JOB=' + os.environ.get('PLDEMU_IN_MPI_JOB', ''))"
    result = run_mpi(1, [sys.executable, "-c", code], timeout=120)
    assert result.returncode == 0, result.report()
    assert "IN_JOB=1" in result.stdout
    assert os.environ.get("PLDEMU_IN_MPI_JOB") != "1"
