"""End to end through ``pldemu pytest``: pldemu's own pypto-style programs (tests/pypto_frontend/programs,
written here, not collected by pldemu's own suite) pass at every rank count 1-5 against their torch
goldens, and a race, a deadlock and an unknown ``pl`` name each fail with pldemu's report at the
program's own file:line, never a traceback from inside pldemu. One ``pldemu pytest`` session runs them
all (``--device 0-4``; each program test is parametrized by its rank count)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefetch import Outcome, line_in, prefetched, session_outcomes

PROGRAMS = Path(__file__).resolve().parent / "programs"
RANKS = (1, 2, 3, 4, 5)

PASSING: dict[str, tuple[str, int]] = {
    "prog_ring_shift.py": ("test_ring_shift", 1),
    "prog_put_chunked.py": ("test_chunked_ring_put", 1),
    "prog_put_regions.py": ("test_put_region_forms", 1),
    "prog_get_regions.py": ("test_get_both_region_forms", 1),
    "prog_atomic_root.py": ("test_atomic_add_into_root", 1),
    "prog_remote_store_bf16.py": ("test_remote_store_bf16", 1),
    "prog_scalars.py": ("test_scalar_arithmetic", 1),
    "prog_dynamic_dims.py": ("test_dynamic_dims_and_tuples", 1),
    "prog_allreduce_fp16_chunks.py": ("test_allreduce_fp16_chunks", 1),
    "prog_allreduce_ring_max.py": ("test_ring_allreduce_max_fp16", 2),
    "prog_gather_scatter.py": ("test_gather_scatter_one_signal", 1),
    "prog_broadcast_rounds.py": ("test_broadcast_rounds_one_signal", 1),
    "prog_all_to_all_v.py": ("test_all_to_all_and_v", 1),
    "prog_host_allreduce.py": ("test_host_allreduce_synthesised_and_ring", 1),
    "prog_host_gather_scatter.py": ("test_host_gather_scatter_barrier", 1),
    "prog_host_exchange.py": ("test_host_broadcast_and_exchanges", 1),
    "prog_host_rounds.py": ("test_host_rounds_reuse_one_signal", 1),
}
"""Program file -> its test function and the fewest ranks it runs at (below: skipped with a reason)."""

FAILING = ("prog_reuse_race.py", "prog_missing_notify.py", "prog_unknown_name.py")

def line_of(name: str, text: str) -> str:
    """``name:N`` of the first line of ``PROGRAMS/name`` holding ``text``."""
    return line_in(PROGRAMS, name, text)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of this module's one ``pldemu pytest`` run over every program (its prefetched
    command: it runs in the background from the end of collection, see tests/prefetch.py)."""
    return session_outcomes(prefetched(request, tmp_path_factory))


pytestmark = [pytest.mark.launcher,
              pytest.mark.prefetch("pypto-programs", "pytest", "-p", "no:cacheprovider", "--device", "0-4",
                                   "--pldemu-timeout", "30", "--junitxml={tmp}/report.xml",
                                   *(str(PROGRAMS / name) for name in (*PASSING, *FAILING)))]


def test_every_program_file_is_run() -> None:
    assert {p.name for p in PROGRAMS.glob("prog_*.py")} == {*PASSING, *FAILING}
    assert len(PASSING) >= 15


@pytest.mark.parametrize("program", sorted(PASSING))
def test_program_passes_at_every_rank_count(outcomes: dict[str, Outcome], program: str) -> None:
    test, fewest = PASSING[program]
    for n in RANKS:
        outcome, text = outcomes.get(f"{test}[{n}]", ("missing", ""))
        if n < fewest:
            assert outcome == "skipped" and "needs 2 devices" in text, (n, outcome, text)
        else:
            assert outcome == "passed", (n, outcome, text)


def test_a_race_names_both_accesses_at_the_programs_lines(outcomes: dict[str, Outcome]) -> None:
    outcome, text = outcomes["test_early_reuse"]
    assert outcome == "failed" and "races found" in text, text
    read, write = line_of("prog_reuse_race.py", "pld.tile.remote_load"), line_of("prog_reuse_race.py", "second, [0, 0]")
    assert "read at" in text and f"[{read}]" in text and f"[{write}]" in text, text
    assert line_of("prog_reuse_race.py", "compiled(rows, gots)") in text  # the test's own line


def test_a_deadlock_shows_the_wait_for_graph_at_the_programs_line(outcomes: dict[str, Outcome]) -> None:
    outcome, text = outcomes["test_missing_notify"]
    assert outcome == "failed" and "wait-for graph" in text, text
    assert f"[{line_of('prog_missing_notify.py', 'pld.system.wait')}]" in text, text


def test_an_unknown_pl_name_is_one_error_at_its_line(outcomes: dict[str, Outcome]) -> None:
    outcome, text = outcomes["test_unknown_name"]
    assert outcome == "failed" and f"{line_of('prog_unknown_name.py', 'pl.frobnicate')}: pl.frobnicate" in text, text
