"""``pldemu bench`` binds the ranks of a job that oversubscribes this machine to its cores in turn
(``PIN_VAR``, ``pin_env``, ``pin_to_core``); other jobs, and jobs told not to, leave their ranks to
the scheduler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pldemu.job.launch import (
    PID_DIR_VAR,
    PIN_VAR,
    job_env,
    mpiexec_command,
    pin_env,
    pin_to_core,
    usable_cores,
)

pytestmark = pytest.mark.launcher

REPORT = ("from pldemu.job.launch import job_rank, prepare_rank; prepare_rank(); import os, pathlib, sys; "
          "pathlib.Path(sys.argv[1], f'rank{job_rank()}').write_text(str(sorted(os.sched_getaffinity(0))))")
"""A rank's first steps in ``python -m pldemu`` and ``pldemu.pool.server`` (``prepare_rank``), then
the cores it may run on, written to ``rankR`` in the folder it is given (ranks printing at once
interleave their lines)."""


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def test_pin_env_asks_for_pinning_only_when_the_ranks_outnumber_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PIN_VAR, raising=False)
    cores = usable_cores()
    assert pin_env(cores + 1) == {PIN_VAR: ",".join(map(str, _cores()))}
    assert pin_env(cores) == {} and pin_env(None) == {}  # None: real hosts take the ranks
    assert PIN_VAR not in job_env(local_ranks=cores + 1)  # only a command that measures asks
    monkeypatch.setenv(PIN_VAR, "")  # the user's "leave the ranks alone" wins, and reaches the job
    assert pin_env(cores + 1) == {} and job_env(local_ranks=cores + 1)[PIN_VAR] == ""


@pytest.mark.parametrize(("env", "expected"), [
    ({PIN_VAR: "{c}", "PMI_RANK": "3"}, "{c}"),
    ({PIN_VAR: "", "PMI_RANK": "3"}, "None"),
    ({PIN_VAR: "{c}"}, "None"),
    ({PIN_VAR: "x,y", "PMI_RANK": "0"}, "None"),
], ids=["pinned", "empty", "no-rank", "garbage"])
def test_pin_to_core_binds_only_when_asked_and_able(env: dict[str, str], expected: str) -> None:
    core = _cores()[-1]
    filled = {k: v.format(c=core) for k, v in env.items()}
    code = f"from pldemu.job.launch import pin_to_core; import os; print(pin_to_core({filled!r}), len(os.sched_getaffinity(0)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == expected.format(c=core)
    assert (out[1] == "1") == (expected != "None") or len(_cores()) == 1


def test_pin_to_core_picks_cores_in_turn_by_the_jobs_rank() -> None:
    assert pin_to_core({PIN_VAR: "", "PMI_RANK": "0"}) is None  # nothing asked: this process stays as it is
    cores = _cores()
    code = "from pldemu.job.launch import pin_to_core; import sys; print(pin_to_core({{{!r}: {!r}, 'PMI_RANK': sys.argv[1]}}))"
    spec = ",".join(map(str, cores))
    got = [subprocess.run([sys.executable, "-c", code.format(PIN_VAR, spec), str(r)], capture_output=True, text=True,
                          check=True).stdout.strip() for r in range(2 * len(cores))]
    assert got == [str(cores[r % len(cores)]) for r in range(2 * len(cores))]


@pytest.mark.skipif(usable_cores() > 4, reason="a job of more ranks than cores would be too large here")
@pytest.mark.parametrize("pin", [True, False], ids=["pinned", "told-not-to"])
def test_an_oversubscribed_job_binds_each_rank_to_one_core_in_turn(pin: bool, tmp_path: Path) -> None:
    cores = _cores()
    n = 2 * len(cores)
    asked = pin_env(n) if pin else {PIN_VAR: ""}
    env = job_env({PID_DIR_VAR: str(tmp_path), **asked}, local_ranks=n)
    proc = subprocess.run(mpiexec_command(n, [sys.executable, "-c", REPORT, str(tmp_path)]), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = [(tmp_path / f"rank{r}").read_text() for r in range(n)]
    assert seen == [str([cores[r % len(cores)]] if pin else cores) for r in range(n)]


@pytest.mark.skipif(usable_cores() > 4, reason="a job of more ranks than cores would be too large here")
def test_bench_says_where_its_ranks_run(tmp_path: Path) -> None:
    cores = _cores()
    n = 2 * len(cores)
    bench = [sys.executable, "-m", "pldemu", "bench", "barrier", "-n", str(n), "--iters", "1", "--warmup", "0"]
    pinned = subprocess.run(bench, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    order = ",".join(str(cores[r % len(cores)]) for r in range(n))
    assert f"ranks pinned to cores {order} ({PIN_VAR})" in pinned.stdout
    free = subprocess.run(bench, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, PIN_VAR: ""})
    assert free.returncode == 0, free.stderr
    assert "ranks placed by the scheduler" in free.stdout
