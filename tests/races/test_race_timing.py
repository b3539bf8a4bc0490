"""Races found whatever the schedule: each hand-written program in ``timing/`` comes as a bug and
as its correct protocol (one knob substituted into the text). The bug must be reported in every
call, under a schedule that hides it (a straggler on the other side, no jitter: nothing random, so
the 20 calls stand in for 20 seeds; each call is its own block, checked on its own with
``--block 1``); the correct protocol must get no report under the same straggler.

Before the replayed exact acquires, ``deep_lead`` and ``same_origin`` were reported in none of 5
calls under the straggler given here, ``early_count`` in 2 and ``retire_lead`` in 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from helpers import pldemu as run_pldemu
from helpers import report as _report

from pldemu.cli.commands import run as run_cli

HERE = Path(__file__).parent / "timing"
CALLS = 20
STRAGGLE_US = 3000
pldemu = partial(run_pldemu, timeout=300.0)


@dataclass(frozen=True)
class Case:
    program: str
    knob: str
    bug: str
    ok: str
    ranks: int
    hides: int
    """The straggler that hides the bug (the rank on the other side from the racing access)."""

    def text(self, value: str) -> str:
        return (HERE / f"{self.program}.pld").read_text().replace(self.knob, value)


CASES = [
    Case("deep_lead", "LAG", "0", "1", 2, hides=1),  # the producer 11 credits ahead
    Case("early_count", "AWAIT", "2", "1", 4, hides=0),  # every peer arrived before the root waits
    Case("retire_lead", "AHEAD", "1", "0", 2, hides=1),
    Case("eq_ack", "ACK_EARLY", "1", "0", 2, hides=1),
    Case("double_buffer", "REUSE_WAIT", "0", "1", 2, hides=0),  # the consumer done before the reuse
    Case("same_origin", "NOTIFY_FIRST", "0", "1", 2, hides=1),
]
IDS = [c.program for c in CASES]


def _write(tmp_path: Path, case: Case, value: str) -> Path:
    path = tmp_path / f"{case.program}_{value}.pld"
    path.write_text(case.text(value))
    return path


def _races_per_call(stdout: str) -> list[int]:
    """The races column of every block row of ``run --iters`` (a row: iters, time, cells, inv, races)."""
    rows = [line.split() for line in stdout.splitlines() if line[:1] == " " and line.split()[:1] != []]
    return [int(r[4]) for r in rows if len(r) == 5 and all(f.replace(".", "").isdigit() for f in r)]


def _run(path: Path, case: Case, straggler: int, calls: int) -> tuple[list[int], str]:
    res = pldemu("run", str(path), "-n", str(case.ranks), "--iters", str(calls), "--block", "1", "--races",
                 "--straggler", f"{straggler}:{STRAGGLE_US}")
    per_call = _races_per_call(res.stdout)
    assert len(per_call) == calls, _report(res)
    return per_call, _report(res) + f"\nexit {res.returncode}"


@pytest.mark.launcher
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_bug_is_reported_in_every_call_under_the_schedule_that_hides_it(tmp_path: Path, case: Case) -> None:
    per_call, text = _run(_write(tmp_path, case, case.bug), case, case.hides, CALLS)
    assert all(n > 0 for n in per_call), f"races per call {per_call}\n{text}"
    assert f"exit {run_cli.EXIT_RACES}" in text, text


@pytest.mark.launcher
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_correct_protocol_gets_no_report(tmp_path: Path, case: Case) -> None:
    # Under the same straggler: a producer far ahead leaves the longest histories to resolve.
    per_call, text = _run(_write(tmp_path, case, case.ok), case, case.hides, CALLS // 2)
    assert per_call == [0] * (CALLS // 2), f"races per call {per_call}\n{text}"
    assert "exit 0" in text, text


@pytest.mark.launcher
def test_same_origin_read_is_stale_under_deferred_visibility_and_the_report_says_why(tmp_path: Path) -> None:
    case = CASES[IDS.index("same_origin")]
    for value, fresh in ((case.bug, False), (case.ok, True)):
        res = pldemu("run", str(_write(tmp_path, case, value)), "-n", "2", "--races", "--visibility", "deferred",
                     "--seed", "1")
        out = res.stdout.split("local out", 1)[1].splitlines()[1]
        assert out.strip().startswith("rank 0:") and ("min=1 max=1 nan=0" in out) is fresh, _report(res)
        if not fresh:
            assert res.returncode == run_cli.EXIT_RACES, _report(res)
            assert "rank 0 write at main:14 pld.tile.put" in res.stdout and "rank 0 read at main:19" in res.stdout
            assert "no notify by rank 0 and no barrier between them" in res.stdout, _report(res)
            assert "races: 4 report(s)" in res.stdout, _report(res)  # both puts x (get, remote_load)
            assert "|| rank 0 write" not in res.stdout, _report(res)  # put -> put stays ordered
