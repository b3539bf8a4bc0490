"""End to end through ``pldemu pytest``: pldemu's own ``pl.jit`` programs (tests/pypto_frontend/jit_programs,
written here in the style of pypto's tutorial, not collected by pldemu's own suite) pass at every rank
count 1-5, and the mistakes of pypto's debugging table (docs/en/user/distributed/04-debugging.md) each
fail with pldemu's report naming the cause at the program's own line. One ``pldemu pytest`` session
runs them all (``--device 0-4``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefetch import Outcome, line_in, prefetched, session_outcomes

PROGRAMS = Path(__file__).resolve().parent / "jit_programs"
RANKS = (1, 2, 3, 4, 5)

PASSING = {
    "jit_ring.py": ("test_ring_two_steps", "test_the_cache_gives_one_program_per_key"),
    "jit_regions.py": ("test_gather_in_table_order",),
    "jit_host_collectives.py": ("test_reduce_then_gather",),
    "jit_specialize.py": ("test_scalars_and_keywords_at_every_rank_count", "test_single_device_entry_specialises_its_scalars",
                          "test_runtime_scalar_in_signature_mode", "test_runtime_marker_on_a_real_call_is_refused",
                          "test_a_dependency_declares_its_own_dynamic_dims"),
}
"""Program file -> its tests (a parametrized one runs at every rank count of RANKS)."""

BUGS = ("jit_bug_hang.py", "jit_bug_set.py", "jit_bug_shift.py", "jit_bug_race.py", "jit_bug_static_nr.py",
        "jit_bug_bytes.py", "jit_bug_loop_allreduce.py", "jit_bug_trip_count.py")
HELPERS = ("jit_helpers.py",)

def line_of(name: str, text: str) -> str:
    """``name:N`` of the first line of ``PROGRAMS/name`` holding ``text``."""
    return line_in(PROGRAMS, name, text)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of this module's one ``pldemu pytest`` run over every program (its prefetched
    command: it runs in the background from the end of collection, see tests/prefetch.py)."""
    return session_outcomes(prefetched(request, tmp_path_factory))


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


def test_a_dispatch_loop_short_of_the_devices_names_the_idle_device(outcomes: dict[str, Outcome]) -> None:
    text = _failed(outcomes, "test_trip_count_below_the_devices")
    assert f"{line_of('jit_bug_trip_count.py', 'def copy_two')}: device 2 of the 3 gets no dispatch" in text, text
