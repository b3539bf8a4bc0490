"""End to end through ``pldemu pytest``: pldemu's own ``pl.jit`` programs (tests/pypto_frontend/jit_programs,
written here in the style of pypto's tutorial, not collected by pldemu's own suite) pass at every rank
count 1-5, and the mistakes of pypto's debugging table (docs/en/user/distributed/04-debugging.md) each
fail with pldemu's report naming the cause at the program's own line. One ``pldemu pytest`` session
runs them all (``--device 0-4``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prefetch import prefetched

PROGRAMS = Path(__file__).resolve().parent / "jit_programs"
RANKS = (1, 2, 3, 4, 5)

PASSING = {
    "jit_ring.py": ("test_ring_two_steps", "test_the_cache_gives_one_program_per_key"),
    "jit_specialize.py": ("test_scalars_and_keywords_at_every_rank_count", "test_single_device_entry_specialises_its_scalars",
                          "test_runtime_scalar_in_signature_mode", "test_runtime_marker_on_a_real_call_is_refused"),
}
"""Program file -> its tests (a parametrized one runs at every rank count of RANKS)."""

BUGS = ("jit_bug_hang.py", "jit_bug_set.py", "jit_bug_shift.py", "jit_bug_race.py", "jit_bug_static_nr.py",
        "jit_bug_bytes.py", "jit_bug_loop_allreduce.py")
HELPERS = ("jit_helpers.py",)

Outcome = tuple[str, str]


def line_of(name: str, text: str) -> str:
    """``name:N`` of the first line of ``jit_programs/name`` holding ``text``."""
    lines = (PROGRAMS / name).read_text().splitlines()
    return f"{name}:{next(i for i, line in enumerate(lines, 1) if text in line)}"


def _outcome(case: ET.Element) -> Outcome:
    for kind in ("failure", "error", "skipped"):
        found = case.find(kind)
        if found is not None:
            return ("failed" if kind != "skipped" else kind), (found.text or "") + found.get("message", "")
    return "passed", ""


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of one ``pldemu pytest`` run over every program (prefetched: tests/prefetch.py)."""
    done = prefetched(request, tmp_path_factory)
    res = done.result
    assert res.returncode == 1, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stdout + res.stderr, res.stdout
    return {case.get("name", ""): _outcome(case) for case in ET.parse(done.tmp / "report.xml").getroot().iter("testcase")}


pytestmark = [pytest.mark.launcher,
              pytest.mark.prefetch("jit-programs", "pytest", "-p", "no:cacheprovider", "--device", "0-4",
                                   "--pldemu-timeout", "12", "--pldemu-invariants", "--junitxml={tmp}/report.xml",
                                   *(str(PROGRAMS / name) for name in (*PASSING, *BUGS)))]


def test_every_program_file_is_run() -> None:
    assert {p.name for p in PROGRAMS.glob("*.py")} == {*PASSING, *BUGS, *HELPERS}


@pytest.mark.parametrize("program", sorted(PASSING))
def test_program_passes(outcomes: dict[str, Outcome], program: str) -> None:
    for test in PASSING[program]:
        runs = {name: o for name, o in outcomes.items() if name == test or name.startswith(test + "[")}
        assert runs, test
        if any(name.startswith(test + "[") for name in runs):
            assert sorted(runs) == sorted(f"{test}[{n}]" for n in RANKS), runs
        assert all(o == "passed" for o, _ in runs.values()), runs


def _failed(outcomes: dict[str, Outcome], test: str) -> str:
    outcome, text = outcomes[test]
    assert outcome == "failed", (outcome, text)
    assert "Traceback" not in text and "pldemu/pypto/" not in text, text  # pldemu's report, not its frames
    return text


def test_all_ranks_hang_gives_the_wait_for_cycle_at_the_wait(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_hang")
    assert "cycle: rank 0 -> rank 1 -> rank 0" in text and f"[{line_of('jit_bug_hang.py', 'BUG: waits first')}]" in text


def test_set_instead_of_atomic_add_is_named(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_set_instead_of_atomic_add")
    assert f"[{line_of('jit_bug_set.py', 'pld.system.wait')}]" in text, text
    assert "2 ranks wrote it with Set" in text and "need NotifyOp.AtomicAdd" in text, text


def test_a_shifted_remote_load_is_refused_at_its_line(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_shifted_remote_load")
    assert f"[{line_of('jit_bug_shift.py', 'BUG: row 1')}]: region offsets [1, 0] shape [2, 16] leaves" in text, text


def test_a_missing_barrier_is_a_race_at_both_lines(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_missing_barrier")
    write, read = line_of("jit_bug_race.py", "data = pl.store"), line_of("jit_bug_race.py", "pld.tile.remote_load")
    assert "races found" in text and f"[{write}]" in text and f"[{read}]" in text, text


def test_a_fixed_rank_count_names_pl_dynamic(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_static_rank_count")
    assert f"{line_of('jit_bug_static_nr.py', 'def copy_all')}: host tensor x: dim 0 is 3, its annotation fixes it " \
           "at 2" in text and "pl.dynamic" in text, text


def test_a_window_sized_in_cells_names_the_bytes(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_count_instead_of_bytes")
    assert f"{line_of('jit_bug_bytes.py', 'pld.window(sig_buf')}: pld.window of (2, 1) pl.INT32 needs 8 bytes; the " \
           "buffer sig_buf has 2" in text, text


def test_a_signal_less_host_allreduce_in_a_loop_is_refused(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_signal_less_allreduce_in_a_loop")
    assert f"{line_of('jit_bug_loop_allreduce.py', 'BUG: no signal')}: pld.tensor.allreduce without an explicit " \
           "signal is not supported inside a HOST loop" in text, text
