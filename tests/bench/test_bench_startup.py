"""``pldemu bench startup``: the phase breakdown adds up, and the command runs end to end.

Benchmarks are not tests: nothing here compares a time with a bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_launch import REPO_ROOT, job_env

from pldemu.bench.startup import PHASES, phase_times

LOG = """\
parsed -1 10.10
checked -1 10.20
start 1 10.40
start 0 10.45
parsed 0 10.60
parsed 1 10.70
checked 0 10.75
checked 1 10.72
windows 0 10.90
windows 1 10.91
ran 0 11.00
ran 1 11.01
reported 1 11.05
reported 0 11.04
closed 0 11.06
closed 1 11.06
exit 0 11.07
exit 1 11.07
job-done -1 11.20
"""


def test_phases_end_at_the_last_process_and_add_up() -> None:
    times = phase_times(LOG, start=10.0, end=11.30)
    assert list(times) == [name for name, _, _ in PHASES]
    assert times["launcher imports"] == pytest.approx(0.10)
    assert times["launcher prechecks"] == pytest.approx(0.10)
    assert times["spawn (mpiexec, python start)"] == pytest.approx(0.25)  # to the later rank's start
    assert times["rank imports"] == pytest.approx(0.25)
    assert times["parse / lower / verify"] == pytest.approx(0.05)
    assert times["teardown (close, finalize, exit)"] == pytest.approx(0.25)
    assert sum(times.values()) == pytest.approx(1.30)


@pytest.mark.launcher
def test_bench_startup_runs(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    env = job_env()
    env.pop("PLDEMU_IN_MPI_JOB", None)
    res = subprocess.run([sys.executable, "-m", "pldemu", "bench", "startup", "-n", "2", "--iters", "1",
                          "--warmup", "0", "--json", str(out)], capture_output=True, text=True, timeout=300,
                         env=env, cwd=REPO_ROOT, check=False, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    for line in ("pldemu run trivial -n 2", "pldemu --help", "pldemu.launch(trivial, 2) per call",
                 *(name for name, _, _ in PHASES)):
        assert line in res.stdout
    figures = json.loads(out.read_text())
    assert set(figures["phases"]) == {name for name, _, _ in PHASES}
    assert set(figures["cpu"]) == set(figures["times"])
    assert all(len(v) == 1 and v[0] > 0 for v in [*figures["times"].values(), *figures["cpu"].values()])
