"""Comm sub-domains (pypto's MaterializeCommDomainScopes) end to end: pldemu's own pypto-style programs of
tests/pypto_frontend/group_programs (written here) in one ``pldemu pytest`` session: two overlapping
groups, three groups (one non-contiguous, one running an allreduce over its own signal), a group-local
race reported with both numbers of the peer and its fixed version clean. Plus the IR's text form of a
group window and the wait-for report's naming of a group peer."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefetch import Outcome, line_in, prefetched, session_outcomes

from pldemu.ir import parse_program
from pldemu.ir.printer import format_program
from pldemu.runtime.status import WaitTarget, awaited_rank

PROGRAMS = Path(__file__).resolve().parent / "group_programs"
FILES = ("prog_groups_overlap.py", "prog_groups_three.py", "prog_group_race.py")


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return session_outcomes(prefetched(request, tmp_path_factory))


pytestmark = [pytest.mark.launcher,
              pytest.mark.prefetch("comm-groups", "pytest", "-p", "no:cacheprovider", "--device", "0-4",
                                   "--pldemu-timeout", "30", "--junitxml={tmp}/report.xml",
                                   *(str(PROGRAMS / name) for name in FILES))]


@pytest.mark.parametrize("test", ["test_overlapping_group_rings", "test_three_groups", "test_group_fixed"])
def test_group_programs_match_their_goldens(outcomes: dict[str, Outcome], test: str) -> None:
    outcome, text = outcomes.get(test, ("missing", ""))
    assert outcome == "passed", (outcome, text)


def test_a_group_race_names_the_peer_both_ways(outcomes: dict[str, Outcome]) -> None:
    outcome, text = outcomes["test_group_race"]
    assert outcome == "failed" and "races found" in text, text
    assert "of peer 1 of group {1, 2} = rank 2" in text and "of peer 0 of group {1, 2} = rank 1" in text, text
    read, write = (line_in(PROGRAMS, "prog_group_race.py", t) for t in ("pld.tile.remote_load", "pl.store(mine"))
    assert f"[{read}]" in text and f"[{write}]" in text, text


def test_a_group_window_prints_and_parses() -> None:
    text = ("program p nranks=3 {\n  window w: fp32[1, 16] group [1, 2]\n  signal s: int32[2, 1] group [1, 2]\n"
            "  local x: fp32[1, 16]\n\n  func main() {\n  }\n}\n")
    prog = parse_program(text)
    assert [b.group for b in prog.buffers] == [(1, 2), (1, 2), None]
    assert format_program(prog) == text


def test_the_wait_for_report_maps_a_group_layout_to_its_rank() -> None:
    # A [2, 1] signal of group {1, 2}: cell [1, 0] counts group rank 1's credit, which is rank 2.
    t = WaitTarget("s", (1, 0), (2, 1), 0, None, 0, (1, 2))
    assert awaited_rank(t, 1, 3) == 2
    assert t.rank_text(2) == "peer 1 of group {1, 2} = rank 2"
    assert WaitTarget("s", (1, 0), (2, 1), 0).rank_text(1) == "rank 1"
