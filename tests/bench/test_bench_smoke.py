"""``pldemu bench`` smoke test: tiny sizes, 2 ranks, through the launcher.

Benchmarks are not tests: nothing here looks at a time. It checks that the command runs every
measurement family end to end, exits 0 (every result right), prints the columns and writes the JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_launch import REPO_ROOT, job_env

pytestmark = pytest.mark.launcher

TIMEOUT = 300.0


def test_bench_all_runs(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = job_env()
    env.pop("PLDEMU_IN_MPI_JOB", None)  # the command must launch its own job
    res = subprocess.run(
        [sys.executable, "-m", "pldemu", "bench", "all", "-n", "2", "--sizes", "256,4K",
         "--iters", "2", "--warmup", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=REPO_ROOT, check=False,
        stdin=subprocess.DEVNULL,
    )
    report = f"exit {res.returncode}\n--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"
    assert res.returncode == 0, report
    text = res.stdout
    for columns in (
        ["#", "signal", "raw", "MPI(us)", "pldemu(us)", "ratio", "windows(us)"],
        ["#", "op", "size(B)", "pldemu(us)", "GB/s", "memcpy(us)", "GB/s", "%memcpy", "#wrong"],
        ["#", "collective", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong",
         "time(us)", "algbw", "busbw", "#wrong", "ratio"],
    ):
        assert any(line.split() == columns for line in text.splitlines()), f"no {columns} header\n{report}"
    rows = {line.split()[0] for line in text.splitlines() if line.startswith("  ")}
    for name in ("allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "all_to_all",
                 "all_to_all_v", "put", "get", "remote_load", "notify->wait", "barrier"):
        assert name in rows, f"no {name} row\n{report}"
    data = json.loads(out.read_text())
    assert data["nranks"] == 2
    assert {c["collective"] for c in data["collectives"]} >= {"allreduce", "all_to_all_v", "barrier"}
    assert all(c["pldemu"]["wrong"] in (0, -1) and c["native"]["wrong"] in (0, -1) for c in data["collectives"])
