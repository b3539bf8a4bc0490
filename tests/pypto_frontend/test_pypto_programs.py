"""End to end through ``pldemu pytest``: pypto-style test files (tests/pypto_frontend/programs, not
collected by pldemu's own suite) pass at 1-5 ranks, and a race, a deadlock and an unknown ``pl`` name
each fail with pldemu's report at the program's own file:line, never a traceback from inside pldemu."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"


def line_of(name: str, text: str) -> str:
    """``name:N`` of the first line of ``programs/name`` holding ``text``."""
    lines = (PROGRAMS / name).read_text().splitlines()
    return f"{name}:{next(i for i, line in enumerate(lines, 1) if text in line)}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """test name -> (outcome, failure text) of one ``pldemu pytest`` run over every program."""
    report = tmp_path_factory.mktemp("programs") / "report.xml"
    res = subprocess.run([sys.executable, "-m", "pldemu", "pytest", "-p", "no:cacheprovider", "--device", "0-4",
                          "--pldemu-timeout", "30", f"--junitxml={report}", str(PROGRAMS / "prog_ring_shift.py"),
                          str(PROGRAMS / "prog_reuse_race.py"), str(PROGRAMS / "prog_missing_notify.py"),
                          str(PROGRAMS / "prog_unknown_name.py")], capture_output=True, text=True, timeout=600,
                         check=False, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert res.returncode == 1, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stdout + res.stderr, res.stdout
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        found[case.get("name", "")] = ("passed", "") if failure is None else ("failed", failure.text or "")
    return found


pytestmark = pytest.mark.launcher


def test_ring_shift_passes_at_one_to_five_ranks(outcomes: dict[str, tuple[str, str]]) -> None:
    for devices in (1, 2, 3, 5):
        assert outcomes[f"test_ring_shift[{devices}]"][0] == "passed", outcomes


def test_a_race_names_both_accesses_at_the_programs_lines(outcomes: dict[str, tuple[str, str]]) -> None:
    outcome, text = outcomes["test_early_reuse"]
    assert outcome == "failed" and "races found" in text, text
    read, write = line_of("prog_reuse_race.py", "pld.tile.remote_load"), line_of("prog_reuse_race.py", "second, [0, 0]")
    assert "read at" in text and f"[{read}]" in text and f"[{write}]" in text, text
    assert line_of("prog_reuse_race.py", "compiled(rows, gots)") in text  # the test's own line


def test_a_deadlock_shows_the_wait_for_graph_at_the_programs_line(outcomes: dict[str, tuple[str, str]]) -> None:
    outcome, text = outcomes["test_missing_notify"]
    assert outcome == "failed" and "wait-for graph" in text, text
    assert f"[{line_of('prog_missing_notify.py', 'pld.system.wait')}]" in text, text


def test_an_unknown_pl_name_is_one_error_at_its_line(outcomes: dict[str, tuple[str, str]]) -> None:
    outcome, text = outcomes["test_unknown_name"]
    assert outcome == "failed" and f"{line_of('prog_unknown_name.py', 'pl.frobnicate')}: pl.frobnicate" in text, text
