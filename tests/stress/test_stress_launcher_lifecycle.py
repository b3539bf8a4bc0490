"""The stress launcher stays MPI-free and calls a slow run a timeout, not a deadlock (issue 9, 3 and 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pldemu, report

pytestmark = pytest.mark.launcher

EXAMPLE = Path(__file__).resolve().parents[2] / "pldemu" / "examples" / "custom_barrier.pld"


def test_a_progressing_run_that_outlives_its_job_timeout_is_a_timeout():
    res = pldemu("stress", str(EXAMPLE), "--iters", "10000000", "--job-timeout", "8", "-n", "2", timeout=120)
    assert res.returncode == 124, report(res)
    assert "# TIMEOUT after" in res.stdout and "completed iterations" in res.stdout, report(res)
    assert "deadlock" not in res.stdout


@pytest.mark.parametrize("argv", [["stress", "allreduce", "--iters", "4", "-n", "2"],
                                  ["check", "barrier", "--iters", "2", "-n", "2"],
                                  ["run", str(EXAMPLE), "-n", "2"]], ids=["stress", "check", "run"])
def test_launchers_never_initialise_mpi(argv: list[str]):
    code = ("import sys\nfrom pldemu.cli import main\nrc = main(sys.argv[1:])\n"
            "print('MPI-IMPORTED' if 'mpi4py.MPI' in sys.modules else 'MPI-FREE', rc)\n")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.stdout.strip().splitlines()[-1] == "MPI-FREE 0", out.stdout[-2000:] + out.stderr[-2000:]
