"""End to end through ``pldemu pytest``: pldemu's own model-layer programs in pypto's style
(tests/pypto_frontend/model_programs, written here, not collected by pldemu's own suite) match their
torch goldens at 2 and 4 ranks. One prefetched
``pldemu pytest`` session runs them all (``--device 0-3``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prefetch import Outcome, _outcome, prefetched

PROGRAMS = Path(__file__).resolve().parent / "model_programs"
RANKS = (2, 4)
PASSING = {"attention_tp.py": ("test_attention_tp",), "moe_layer.py": ("test_moe_layer",)}
"""Program file -> its tests (each parametrized over RANKS)."""

_FILES = [str(PROGRAMS / name) for name in PASSING]
pytestmark = [pytest.mark.launcher,
              pytest.mark.prefetch("model-programs", "pytest", "-p", "no:cacheprovider", "--device", "0-3",
                                   "--junitxml={tmp}/report.xml", *_FILES)]


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of this module's one ``pldemu pytest`` run (prefetched, tests/prefetch.py), which
    must pass (exit 0)."""
    done = prefetched(request, tmp_path_factory)
    assert done.result.returncode == 0, f"exit {done.result.returncode}\n{done.result.stdout}\n{done.result.stderr}"
    return {case.get("name", ""): _outcome(case) for case in ET.parse(done.tmp / "report.xml").getroot().iter("testcase")}


def test_every_program_file_is_run() -> None:
    assert {p.name for p in PROGRAMS.glob("*.py")} == set(PASSING)


@pytest.mark.parametrize("program", sorted(PASSING))
def test_program_matches_its_golden(outcomes: dict[str, Outcome], program: str) -> None:
    for test in PASSING[program]:
        runs = {name: o for name, o in outcomes.items() if name.startswith(test + "[")}
        assert sorted(runs) == sorted(f"{test}[{n}]" for n in RANKS), runs
        assert all(o == "passed" for o, _ in runs.values()), runs
