"""A job with more ranks on this machine than cores gets MPICH's gentle waits (issue 23): MPICH's own
blocking calls back off instead of polling the cores away from the ranks they wait for. A job that
fits its cores, a job on real hosts, and a user's own setting are left alone."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pldemu.job.launch import (
    BLAS_ONE_THREAD,
    LOCAL,
    MPICH_OVERSUBSCRIBED,
    Placement,
    job_env,
    run_job,
    usable_cores,
)

REPO = Path(__file__).resolve().parents[2]
PRINT_ENV = ("import os, json; from mpi4py import MPI; "
             "print(json.dumps({k: os.environ.get(k) for k in %r}) if MPI.COMM_WORLD.rank == 0 else '', end='')")


def _gentle(env: dict[str, str]) -> dict[str, str | None]:
    return {name: env.get(name) for name in MPICH_OVERSUBSCRIBED}


def test_more_ranks_than_cores_get_the_gentle_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MPICH_OVERSUBSCRIBED:
        monkeypatch.delenv(name, raising=False)
    assert _gentle(job_env(local_ranks=usable_cores() + 1)) == dict(MPICH_OVERSUBSCRIBED)


def test_a_job_that_fits_its_cores_and_a_job_on_real_hosts_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MPICH_OVERSUBSCRIBED:
        monkeypatch.delenv(name, raising=False)
    none = dict.fromkeys(MPICH_OVERSUBSCRIBED)
    assert _gentle(job_env(local_ranks=usable_cores())) == none
    assert _gentle(job_env()) == none
    assert Placement(hosts=(("a", 8), ("b", 8))).local_ranks(16) is None
    assert Placement(hostfile="hosts.txt").local_ranks(16) is None
    assert Placement(sim_hosts=(2, 4)).local_ranks(8) == 8  # the namespaces share this machine's cores
    assert LOCAL.local_ranks(3) == 3


def test_the_users_own_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "0")
    env = job_env(local_ranks=usable_cores() * 4)
    assert env["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] == "0"
    assert env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] == "1"


@pytest.mark.launcher
def test_the_ranks_of_an_oversubscribed_job_see_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in MPICH_OVERSUBSCRIBED:
        monkeypatch.delenv(name, raising=False)
    err = io.StringIO()
    code = PRINT_ENV % (tuple(MPICH_OVERSUBSCRIBED),)
    with open(tmp_path / "out", "w") as sink:
        rc = run_job(usable_cores() + 1, [sys.executable, "-c", code], 120.0, stdout=sink, stderr=err, cwd=REPO)
    assert rc == 0, err.getvalue()
    assert json.loads((tmp_path / "out").read_text()) == dict(MPICH_OVERSUBSCRIBED)


def test_every_job_runs_blas_in_the_calling_thread_unless_the_user_says(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_ONE_THREAD:
        monkeypatch.delenv(name, raising=False)
    assert {name: job_env().get(name) for name in BLAS_ONE_THREAD} == dict(BLAS_ONE_THREAD)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert job_env(local_ranks=1)["OPENBLAS_NUM_THREADS"] == "4"
