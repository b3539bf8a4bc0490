"""Several pytest units in one ``mpiexec`` job (``mpi_launch.run_units``), each judged alone: a unit's own
failure fails it only, the unit a job dies in fails with the job's report, and the units the job never
reached run again in a new job."""

from __future__ import annotations

import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
from helpers import CAN_PRIVATE_SHM, left_in, own_processes_with, private_shm
from job_outcomes import RankLog, judge, read_rank_log
from mpi_background import SuiteRunner
from mpi_launch import REPO_ROOT, Cancelled, run_units

UNITS = Path(__file__).resolve().parent.relative_to(REPO_ROOT) / "units"
PASSES, FAILS, KILLS, HANGS = (str(UNITS / f"unit_{name}.py")
                               for name in ("passes", "fails_on_rank1", "kills_the_job", "hangs"))


@pytest.mark.launcher
def test_each_unit_of_a_shared_job_gets_its_own_verdict(tmp_path: Path) -> None:
    verdicts = run_units(2, [FAILS, KILLS, PASSES], timeout_per_unit=120, wrap=private_shm(tmp_path) if CAN_PRIVATE_SHM else ())
    assert left_in(tmp_path) == [], "the planned crash left a segment in /dev/shm"
    assert list(verdicts) == [FAILS, KILLS, PASSES]
    failed = verdicts[FAILS]
    assert not failed.passed and "rank 1:" in failed.detail and "rank 1 fails this test on purpose" in failed.detail
    assert "rank 0:" not in failed.detail.split("$ ")[0], failed.detail  # rank 0 passed it
    killed = verdicts[KILLS]
    assert not killed.passed and f"the job ended during {KILLS}" in killed.detail, killed.detail
    assert verdicts[PASSES].passed, verdicts[PASSES].detail  # rerun in a job of its own


@pytest.mark.launcher
def test_the_background_runner_gives_each_size_its_verdicts_and_closing_it_kills_its_job(tmp_path: Path) -> None:
    runner = SuiteRunner({2: [FAILS, PASSES], 3: [HANGS], 4: [PASSES]}, timeout_per_unit=600,
                         wrap=private_shm(tmp_path) if CAN_PRIVATE_SHM else ())
    try:
        assert runner.verdict(2, PASSES).passed and not runner.verdict(2, FAILS).passed
        deadline = time.monotonic() + 120
        while len(own_processes_with(HANGS)) < 3 and time.monotonic() < deadline:  # its job started
            time.sleep(0.2)
        assert len(own_processes_with(HANGS)) >= 3, "the 3-rank job never started"
    finally:
        start = time.monotonic()
        runner.close()
    assert time.monotonic() - start < 30, "closing waited for the job instead of killing it"
    assert not own_processes_with(HANGS), "a rank of the killed job outlived close()"
    assert left_in(tmp_path) == [], "the killed job left a segment in /dev/shm"
    with pytest.raises(Cancelled):
        runner.verdict(3, HANGS)
    with pytest.raises(CancelledError):  # the size after it never started
        runner.verdict(4, PASSES)


def _log(*finished: str, failures: tuple[tuple[str, str], ...] = ()) -> RankLog:
    return RankLog(("a/test_x.py::t", "b/test_y.py::t", "c/test_z.py::t"), frozenset(finished), failures)


ALL = ("a/test_x.py::t", "b/test_y.py::t", "c/test_z.py::t")


def test_a_failure_fails_its_unit_only() -> None:
    logs = [_log(*ALL), _log(*ALL, failures=(("b/test_y.py::t", "boom"),))]
    settled = judge(["a", "b", "c"], logs, job_ok=False, job_report="job output")
    assert [v.passed for v in settled.verdicts.values()] == [True, False, True] and settled.rerun == ()
    assert "rank 1: b/test_y.py::t\nboom" in settled.verdicts["b"].detail


def test_the_unit_a_job_died_in_fails_and_the_rest_run_again() -> None:
    logs = [_log(*ALL[:2]), _log(ALL[0])]  # rank 1 never finished b's test
    settled = judge(["a", "b", "c"], logs, job_ok=False, job_report="killed by SIGKILL")
    assert settled.verdicts["a"].passed and not settled.verdicts["b"].passed
    assert "the job ended during b:\nkilled by SIGKILL" in settled.verdicts["b"].detail
    assert "c" not in settled.verdicts and settled.rerun == ("c",)


def test_a_rank_that_never_collected_blames_the_first_unit() -> None:
    settled = judge(["a", "b"], [_log(*ALL), RankLog()], job_ok=False, job_report="no pytest")
    assert not settled.verdicts["a"].passed and settled.rerun == ("b",)


def test_a_failed_job_with_every_unit_clean_names_no_unit() -> None:
    logs = [_log(*ALL), _log(*ALL)]
    assert judge(["a", "b", "c"], logs, job_ok=False, job_report="x").verdicts == {}
    assert judge(["a", "b", "c"], logs, job_ok=False, job_report="x").rerun == ("a", "b", "c")
    alone = judge(["a"], logs, job_ok=False, job_report="exit 1 at MPI_Finalize")
    assert not alone.verdicts["a"].passed and "exit 1 at MPI_Finalize" in alone.verdicts["a"].detail
    assert all(v.passed for v in judge(["a", "b", "c"], logs, job_ok=True, job_report="").verdicts.values())


def test_a_log_cut_mid_line_keeps_what_came_before(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    path.write_text('{"kind": "collected", "nodeids": ["a/t.py::t"]}\n{"kind": "finished", "nodeid": "a/t.py::t"}\n'
                    '{"kind": "fai')
    assert read_rank_log(path) == RankLog(("a/t.py::t",), frozenset({"a/t.py::t"}))
    assert read_rank_log(tmp_path / "rank1.jsonl") == RankLog()
