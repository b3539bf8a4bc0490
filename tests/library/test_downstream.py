"""A downstream project (``project/``) uses only ``pldemu``'s public API and its pytest plugin.

Its suite runs here in a separate pytest process, as it would in the user's repository: the correct
program passes at 2, 3 and 5 ranks; a wrong result fails with the ``#wrong`` diff, a racy program
with the race report, a deadlock within its timeout with the wait-for graph, a crashing rank fails its
test and not the session; nothing is left in ``/dev/shm`` or the process table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import CAN_PRIVATE_SHM, left_in, marked_processes, private_shm

from pldemu.job.launch import PID_DIR_VAR

pytestmark = pytest.mark.launcher

PROJECT = Path(__file__).resolve().parent / "project"


def run_project(tmp_path: Path, *args: str) -> dict[str, tuple[str, str, float]]:
    """Run the project's suite; ``{test id: (outcome, failure text, seconds)}`` from its JUnit XML.

    Its marks, so that a test looks at this run only: every folder it makes, its jobs' folders
    (:data:`PID_DIR_VAR`, which every process of a job carries) included, is under ``tmp_path/tmp``
    (its TMPDIR), and with root its /dev/shm is ``tmp_path/shm`` (:func:`private_shm`)."""
    xml, tmp, shm = tmp_path / "junit.xml", tmp_path / "tmp", tmp_path / "shm"
    tmp.mkdir()
    shm.mkdir()
    wrap = private_shm(shm) if CAN_PRIVATE_SHM else ()
    out = subprocess.run([*wrap, sys.executable, "-m", "pytest", "-q", f"--junitxml={xml}", *args], cwd=PROJECT,
                         capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "TMPDIR": str(tmp)})
    assert xml.is_file(), out.stdout + out.stderr
    cases: dict[str, tuple[str, str, float]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        failure = case.find("failure")
        skipped = case.find("skipped")
        outcome = "failed" if failure is not None else "skipped" if skipped is not None else "passed"
        text = (failure.get("message", "") + "\n" + (failure.text or "")) if failure is not None else ""
        cases[case.get("name", "")] = (outcome, text, float(case.get("time", "0")))
    return cases


def own_job_processes(tmp_path: Path) -> list[int]:
    """The processes of the jobs :func:`run_project` started in ``tmp_path`` that are still alive."""
    return marked_processes(PID_DIR_VAR, str(tmp_path / "tmp"))


def test_downstream_project(tmp_path: Path):
    cases = run_project(tmp_path)
    for n in (2, 3, 5):
        assert cases[f"test_allreduce_matches_numpy[{n}ranks]"][0] == "passed", cases
    outcome, text, _ = cases["test_wrong_result[3ranks]"]
    assert outcome == "failed" and "#wrong 1/128, first at [1, 3]: got 1.0, expected 7.5" in text, text
    outcome, text, _ = cases["test_racy[2ranks]"]
    assert outcome == "failed" and "exited 4: races found" in text and "races:\n" in text, text
    outcome, text, seconds = cases["test_deadlock[2ranks]"]
    assert outcome == "failed" and "wait-for graph" in text and "exited 3" in text, text
    assert seconds < 20, f"the deadlock took {seconds:.1f}s, its timeout is 20 s"
    outcome, text, _ = cases["test_crashing_rank[2ranks]"]
    assert outcome == "failed" and "rank 1 failed:\nWindowAccessError" in text, text
    assert cases["test_session_survives"][0] == "passed"
    assert left_in(tmp_path / "shm") == [], "left in /dev/shm"
    assert own_job_processes(tmp_path) == []


def test_command_line_options_apply_to_marked_tests(tmp_path: Path):
    cases = run_project(tmp_path, "-k", "matches_numpy", "--pldemu-ranks", "4", "--pldemu-jitter", "30",
                        "--pldemu-visibility", "deferred", "--pldemu-seed", "3", "--pldemu-timeout", "120")
    assert {k: v[0] for k, v in cases.items()} == {"test_allreduce_matches_numpy[4ranks]": "passed"}


def test_marked_tests_are_skipped_inside_an_mpi_job(tmp_path: Path):
    env = {**os.environ, "PMI_RANK": "0", "PMI_SIZE": "1"}
    xml = tmp_path / "junit.xml"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={xml}", "-k", "wrong_result"],
                         cwd=PROJECT, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert out.returncode == 0 and "1 skipped" in out.stdout, out.stdout + out.stderr


def test_own_job_processes_are_those_of_this_run_only(tmp_path: Path):
    """The mark :func:`own_job_processes` looks for: a process of a job folder under this run's TMPDIR is
    found, one of another run's folder (another session on the same machine) is not."""
    (tmp_path / "tmp").mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(sleep, env={**os.environ, PID_DIR_VAR: str(tmp_path / "tmp" / "pldemu-pids-x")})
    theirs = subprocess.Popen(sleep, env={**os.environ, PID_DIR_VAR: str(tmp_path / "tmp-other" / "pldemu-pids-x")})
    try:
        deadline = time.monotonic() + 10  # a loaded machine may not show the new process's environment at once
        while own_job_processes(tmp_path) != [ours.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert own_job_processes(tmp_path) == [ours.pid]
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()
    assert own_job_processes(tmp_path) == []
