"""Warm jobs (``pldemu.pool``): runs share one ``mpiexec`` per rank count, and every run's result is
what a job of its own gives: exit code, buffers, races, mismatches, the ranks' output and a failure's
report; a failure ends the warm job and the next run gets a new one; a timeout kills it; closing the
pool leaves no process."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pldemu import launch
from pldemu.api import RunResult
from pldemu.pool import JobPool, use_pool
from pldemu.runtime.options import RuntimeOptions

pytestmark = pytest.mark.launcher

EXAMPLES = Path(__file__).resolve().parents[2] / "pldemu" / "examples"

FILL = """\
program fill {
  window out: fp32[1, 4]
  window ref: fp32[1, 4]

  func main() {
    t = tile.full([1, 4], 1.0, dtype=fp32)
    tile.store(t, [0, 0], out)
  }
}
"""

DEADLOCK = """\
program stuck {
  signal sig: int32[1]

  func main() {
    pld.system.wait(sig, [0], 1, cmp=Ge)
  }
}
"""


@pytest.fixture
def fill(tmp_path: Path) -> Path:
    path = tmp_path / "fill.pld"
    path.write_text(FILL)
    return path


@pytest.fixture
def stuck(tmp_path: Path) -> Path:
    path = tmp_path / "stuck.pld"
    path.write_text(DEADLOCK)
    return path


@pytest.fixture
def pool() -> Iterator[JobPool]:
    with JobPool() as p:
        yield p


def _same_text(a: str) -> str:
    """The output without what differs between any two runs (times, addresses of temporary files)."""
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"/tmp/\S+", "PATH", a))


def _race_pairs(result: RunResult) -> set[tuple[str, ...]]:
    """The races, each as its two accesses in either order (which one a run saw first is its schedule's)."""
    out = set()
    for line in result.races:
        head, _, rest = line.partition(": ")
        out.add((head, *sorted(rest.split(": neither")[0].split(" || "))))
    return out


def _both(pool: JobPool, *args: object, **kwargs: object) -> tuple[RunResult, RunResult]:
    alone = launch(*args, check=False, **kwargs)  # type: ignore[arg-type]
    with use_pool(pool):
        warm = launch(*args, check=False, **kwargs)  # type: ignore[arg-type]
    return alone, warm


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_runs_share_one_job_per_rank_count_and_give_what_a_job_of_their_own_gives(pool: JobPool, fill: Path) -> None:
    alone, warm = _both(pool, fill, 2)
    with use_pool(pool):
        again = launch(fill, 2)
        three = launch(fill, 3)
    assert (pool.stats.started, pool.stats.served, pool.stats.alone) == (2, 3, 0)
    for result in (warm, again, three):
        assert result.exit_code == 0
        np.testing.assert_array_equal(result.buffers[-1]["out"], np.ones((1, 4), np.float32))
    assert _same_text(warm.output) == _same_text(alone.output)
    assert warm.output.count("pldemu run: program fill") == 1


def test_a_failed_check_and_races_keep_the_job_and_report_like_a_job_of_their_own(pool: JobPool, fill: Path) -> None:
    alone, warm = _both(pool, fill, 2, inputs={"ref": np.zeros((1, 4), np.float32)}, expect_buffers={"out": "ref"})
    assert alone.exit_code == warm.exit_code == 1
    assert warm.mismatches == alone.mismatches and warm.mismatches
    alone, warm = _both(pool, EXAMPLES / "early_reader.pld", 2, options=RuntimeOptions(race_detect=True))
    assert alone.exit_code == warm.exit_code == 4
    assert _race_pairs(warm) == _race_pairs(alone) and warm.races
    # What a racy program leaves in its buffers is its schedule's: the report's head is the same.
    assert _same_text(warm.output).splitlines()[:3] == _same_text(alone.output).splitlines()[:3]
    assert (pool.stats.started, pool.stats.served) == (1, 2)


def test_a_deadlock_ends_the_job_with_the_report_of_a_job_of_its_own_and_the_next_run_gets_a_new_one(
        pool: JobPool, stuck: Path, fill: Path) -> None:
    opts = RuntimeOptions(timeout=1.0)
    alone, warm = _both(pool, stuck, 2, options=opts, timeout=30)
    assert alone.exit_code == warm.exit_code == 3
    assert _same_text(warm.output) == _same_text(alone.output)
    assert warm.output.count("wait-for graph") == 1 and "MPI_Abort" not in warm.output
    with use_pool(pool):
        after = launch(fill, 2)
    assert after.exit_code == 0
    assert (pool.stats.started, pool.stats.served, pool.stats.alone) == (2, 2, 0)


def _pool_run(pool: JobPool, n: int, args: list[str], timeout: float, log: Path) -> tuple[int, str]:
    with log.open("w") as out:  # a file, as for a job of its own (mpiexec writes to it)
        code = pool.run(n, args, timeout, stdout=out, stderr=out)
    return code, log.read_text()


def test_a_run_the_ranks_refuse_runs_again_in_a_job_of_its_own(pool: JobPool, tmp_path: Path) -> None:
    code, text = _pool_run(pool, 2, ["run", str(tmp_path / "missing.pld"), "-n", "2"], 60.0, tmp_path / "log")
    assert code == 2
    assert text.count("pldemu run: error:") == 1, text
    assert (pool.stats.started, pool.stats.alone) == (1, 1)


def test_a_run_that_outlives_its_timeout_is_killed_with_its_job(pool: JobPool, stuck: Path, fill: Path) -> None:
    code, text = _pool_run(pool, 2, ["run", str(stuck), "-n", "2", "--timeout", "60"], 3.0, stuck.with_suffix(".log"))
    assert code == 124
    assert "ran longer than 3s and was killed" in text
    with use_pool(pool):
        assert launch(fill, 2).exit_code == 0
    assert pool.stats.started == 2


def test_closing_the_pool_ends_every_job_and_the_rank_budget_retires_the_least_recent(fill: Path) -> None:
    pool = JobPool(max_ranks=3)
    with use_pool(pool):
        for n in (2, 1, 2, 3):
            assert launch(fill, n).exit_code == 0
    assert (pool.stats.started, pool.stats.served) == (3, 4)  # 2, 1, (2 again), then 3 retires both
    folders = list(pool._folder.glob("n*/pids"))
    pids = [int(p.read_text()) for folder in folders for p in folder.glob("rank*.pid")]
    assert len(pids) == 3
    pool.close()
    assert not [pid for pid in pids if _alive(pid)]
    assert not pool._folder.exists()
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(1, ["run", str(fill)], 10.0, stdout=io.StringIO(), stderr=io.StringIO())


def test_the_pytest_plugin_gives_marked_tests_warm_jobs_unless_told_not_to(tmp_path: Path) -> None:
    (tmp_path / "test_it.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.pldemu(ranks=[2])\n"
        "def test_pool(pldemu_run, pldemu_job_pool, pldemu_ranks):\n"
        f"    pldemu_run({str(EXAMPLES / 'early_reader.pld')!r}, check=False)\n"
        "    print('POOL', None if pldemu_job_pool is None else pldemu_job_pool.stats.served)\n")
    for flags, want in (((), "POOL 1"), (("--no-pldemu-warm-jobs",), "POOL None")):
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *flags,
                              str(tmp_path / "test_it.py")], capture_output=True, text=True, timeout=300,
                             cwd=tmp_path, check=False)
        assert res.returncode == 0, res.stdout + res.stderr
        assert want in res.stdout


def test_an_idle_pool_job_holds_no_named_segment(pool: JobPool, tmp_path: Path) -> None:
    """The ranks of a warm job drop the name of MPI_Init's /dev/shm segment as soon as every one has
    mapped it, not at their first program: a pool idle for long shows nothing in /dev/shm, and a killed
    one leaves nothing. A request that builds no program (``--help``) leaves the job started and idle."""
    from pldemu.runtime.shm import held_segments

    code, _ = _pool_run(pool, 2, ["--help"], 60, tmp_path / "help.log")
    assert code == 0
    ranks = pool.rank_pids()
    assert len(ranks) == 2 and all(_alive(pid) for pid in ranks), ranks
    assert [path for pid in ranks for path in held_segments(pid)] == []
