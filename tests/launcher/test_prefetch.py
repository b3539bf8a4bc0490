"""The background runner of prefetched commands (``tests/prefetch.py``): a command's outcome is what
running it then would give, ``{tmp}`` is a folder of its own, and closing the runner kills the command
in flight, process tree and all, and drops the rest."""

from __future__ import annotations

import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
from helpers import SPIN, processes_with
from mpi_launch import Cancelled
from prefetch import Prefetcher

pytestmark = pytest.mark.launcher


def test_outcomes_are_the_commands_own_and_tmp_is_a_folder_of_its_own(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.pld", tmp_path / "bad.pld"
    good.write_text("program good {\n  signal sig: int32[NR, 1]\n  func main() {\n  }\n}\n")
    bad.write_text("program bad {\n")
    runner = Prefetcher({"good": ("run", str(good), "-n", "1", "--report", "{tmp}/report.json"),
                         "bad": ("run", str(bad), "-n", "1")})
    try:
        ran = runner.get("good")
        assert ran.result.returncode == 0, ran.result.stderr
        assert (ran.tmp / "report.json").read_text().startswith("{")
        refused = runner.get("bad")
        assert refused.result.returncode == 2 and "bad.pld" in refused.result.stderr, refused.result.stderr
        assert refused.tmp != ran.tmp and "good" in runner and "other" not in runner
    finally:
        runner.close()
    assert not ran.tmp.exists(), "closing the runner left its folders"


def test_closing_the_runner_kills_the_command_in_flight_and_drops_the_rest(tmp_path: Path) -> None:
    spin = tmp_path / "prefetch_spin.pld"
    spin.write_text(SPIN)
    runner = Prefetcher({"spin": ("run", str(spin), "-n", "2", "--job-timeout", "3600"),
                         "after": ("lower", "--collective", "barrier")})
    try:
        deadline = time.monotonic() + 120
        while len(processes_with(spin.name)) < 3 and time.monotonic() < deadline:  # launcher + 2 ranks
            time.sleep(0.2)
        assert len(processes_with(spin.name)) >= 3, "the spinning job never started"
    finally:
        start = time.monotonic()
        runner.close()
    assert time.monotonic() - start < 30, "closing waited for the command instead of killing it"
    assert not processes_with(spin.name), "a process of the killed command outlived close()"
    with pytest.raises(Cancelled):
        runner.get("spin")
    with pytest.raises(CancelledError):  # the command after it never started
        runner.get("after")
