"""End to end through ``pldemu pytest``: pldemu's own task-graph programs in pypto's class form
(tests/pypto_frontend/task_programs, written here, not collected by pldemu's own suite; issue 40 item 5).

Every dependency rule has a program that needs it, clean at 1-5 ranks, and the same program without the
rule is reported (a race naming both tasks' lines, or the deadlock). Each real bug has a buggy and a fixed
version in its pattern: pypto #2391 (waiters submitted before their publisher can take every core),
pypto-lib #953 (FP32 AtomicAdd partials from the blocks of one grid: by remote_store, and in #953's own
spelling, pl.assemble(..., atomic=pl.AtomicType.Add), where an INT32 count is exact and clean), #975 (a row
count without an epoch, satisfied by the previous layer's rows) and pypto #1981 (the two AIV lanes of a split
region exchanging halves through GM without a barrier). Every buggy one is reported in every run and every fixed
one is clean, in the default seeded random order, in fifo order, under jitter with deferred visibility,
and in program order (each task run to completion at its submission; the checks decided from the task graph
report the same there): one ``pldemu pytest`` session per flag set. The program session leaves out the
programs that need a rank's tasks at once (``CONCURRENT``: a wait for a later task of the rank), which
deadlock in program order, that schedule's honest result (``tests/runtime/test_task_programs.py`` checks
its report), at the timeout's cost each."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefetch import Outcome, line_in, prefetched, session_outcomes

PROGRAMS = Path(__file__).resolve().parent / "task_programs"
FILES = (
    "task_rules.py",
    "task_bug_cores.py",
    "task_bug_partials.py",
    "task_bug_epoch.py",
    "task_bug_lanes.py",
    "task_bug_assemble.py",
    "task_bug_peer.py",
)
RANKS = range(1, 6)
CONCURRENT = (
    "test_the_publisher_opts_out_of_the_handshake_edge",  # the handshake waits for the publisher submitted after it
    "test_an_automatic_edge_behind_the_handshake",
    "test_deferred_waiters_free_their_cores",  # the waiters, then their publisher
    "test_an_orchestration_read_waits_for_its_writer_only",  # a waiter submitted before its notifier
    "test_an_orchestration_write_beside_a_reader",
    "test_waiters_submitted_before_their_publisher",  # pypto #2391
)
"""The tests whose programs need their rank's tasks to run at once: they deadlock in program order."""
ASSEMBLE_RANKS = range(1, 4)

PASSING = (
    *(f"test_a_tensor_edge_orders_the_consumer[{n}]" for n in RANKS),
    *(f"test_deps_order_a_manual_scope[{n}]" for n in RANKS),
    *(f"test_the_publisher_opts_out_of_the_handshake_edge[{m}-{n}]" for m in ("manual", "no_dep") for n in RANKS),
    *(f"test_an_early_resolving_grid_keeps_its_edge[{n}]" for n in RANKS),
    *(f"test_deferred_waiters_free_their_cores[{n}]" for n in RANKS),
    *(f"test_an_orchestration_read_waits_for_its_writer_only[{n}]" for n in RANKS),
    *(f"test_the_publisher_submitted_first_orders_the_waiters[{n}]" for n in RANKS),
    *(f"test_partials_reduced_in_ascending_k[{n}]" for n in RANKS),
    *(f"test_a_row_count_per_epoch[{n}]" for n in RANKS),
    *(f"test_lanes_exchange_after_the_barrier[{n}]" for n in RANKS),
    *(f"test_split_k_partials_reduced_in_ascending_k[{n}]" for n in ASSEMBLE_RANKS),
    *(f"test_an_int32_count_assembled_atomically[{n}]" for n in ASSEMBLE_RANKS),
    *(f"test_an_audit_after_the_consumer[{n}]" for n in range(2, 5)),
)


def _session(key: str, *flags: str) -> pytest.MarkDecorator:
    return pytest.mark.prefetch(key, "pytest", "-p", "no:cacheprovider", "--device", "0-4", "--pldemu-timeout", "10",
                                *flags, "--junitxml={tmp}/report.xml", *(str(PROGRAMS / f) for f in FILES))


@pytest.fixture(scope="class")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of the class's one ``pldemu pytest`` run over every program."""
    return session_outcomes(prefetched(request, tmp_path_factory))


def _failed(outcomes: dict[str, Outcome], test: str) -> str:
    outcome, text = outcomes[test]
    assert outcome == "failed", (test, outcome, text)
    assert "Traceback" not in text and "pldemu/pypto/" not in text, text
    return text


def _at(name: str, text: str) -> str:
    return f"[{line_in(PROGRAMS, name, text)}]"


def _task_race(text: str, name: str, write: str, read: str) -> None:
    assert "between two tasks of rank 0" in text and "no dependency path between the tasks" in text, text
    assert _at(name, write) in text and _at(name, read) in text, text


def _needs_concurrency(test: str) -> bool:
    return test.split("[")[0] in CONCURRENT


def _rules(outcomes: dict[str, Outcome], concurrent: bool) -> None:
    _task_race(_failed(outcomes, "test_a_no_dep_read_drops_the_edge"), "task_rules.py",
               "return pl.store(pl.add(pl.load(x", "return pl.store(pl.load(mid")
    _task_race(_failed(outcomes, "test_a_manual_scope_without_deps"), "task_rules.py",
               "mid = pl.store(pl.add(pl.load(x", "y = pl.store(pl.load(mid")
    if not concurrent:
        return
    text = _failed(outcomes, "test_an_orchestration_write_beside_a_reader")
    assert "between the Orchestration and a task of rank 0" in text and "get_tensor_data" in text, text
    assert _at("task_rules.py", "pl.write(cnt") in text and _at("task_rules.py", "echo = pl.store(pl.load(cnt") in text
    text = _failed(outcomes, "test_an_automatic_edge_behind_the_handshake")
    assert "deadlock" in text and "holds a core, blocked in wait cells cell 0 >= 2" in text, text
    assert 'would have notified cells (not started): task 1' in text and 'core_group "publish"' in text, text


def _bugs(outcomes: dict[str, Outcome], concurrent: bool) -> None:
    for n in RANKS:  # #2391: decided from the graph in a run that ends, the wait-for report in one that hangs
        if concurrent:
            text = _failed(outcomes, f"test_waiters_submitted_before_their_publisher[{n}]")
            assert "(pypto #2391" in text and 'kernel "publish"' in text, text
            assert "waits can take every core on rank" in text or "holds a core, blocked in wait" in text, text
        text = _failed(outcomes, f"test_lanes_exchange_without_a_barrier[{n}]")  # #1981: the lanes run at once
        assert "between two AIV lanes of one task of rank 0" in text and "(pypto #1981)" in text, text
        assert _at("task_bug_lanes.py", "stage = pl.store(pl.mul(mine") in text, text
        assert _at("task_bug_lanes.py", "theirs = pl.load(stage") in text, text
        text = _failed(outcomes, f"test_partials_added_atomically[{n}]")
        assert "order-dependent sum on cells[0, 0:8]" in text and "between two blocks of one task" in text, text
        assert _at("task_bug_partials.py", "atomic=pl.AtomicType.Add") in text and "pypto-lib #953" in text, text
    for n in ASSEMBLE_RANKS:  # #953 in its own spelling: pl.assemble(..., atomic=pl.AtomicType.Add)
        text = _failed(outcomes, f"test_split_k_partials_assembled_atomically[{n}]")
        assert "order-dependent sum on y[0, 0:8]" in text and "between two blocks of one task" in text, text
        assert _at("task_bug_assemble.py", "y = pl.assemble(y, part, [0, col], atomic=") in text, text
        # the task is named at its construct's line, not at a line of its body
        assert f'"proj_matmul" {_at("task_bug_assemble.py", "for b in pl.spmd(GROUPS * SPLIT")}' in text, text
        assert "pypto-lib #953" in text and "race on" not in text, text
    for n in range(2, 6):  # #975: a cross-rank race on the second layer's rows
        text = _failed(outcomes, f"test_a_row_count_without_an_epoch[{n}]")
        assert "races found" in text and "race on rows[4, 0:8]" in text, text
        assert _at("task_bug_epoch.py", "pld.tile.remote_store(row") in text, text
        assert _at("task_bug_epoch.py", "y = pl.store(pl.load(recv") in text, text
    for n in range(2, 5):  # cross-rank happens-before per task: every rank's audit, in every task order
        text = _failed(outcomes, f"test_an_audit_beside_the_consumer[{n}]")
        assert all(f"race on rows[0, 0:8] of rank {r} " in text for r in range(n)), text
        assert _at("task_bug_peer.py", "pld.tile.remote_store(") in text, text
        assert _at("task_bug_peer.py", "z = pl.store(pl.load(recv") in text, text


def _checks(outcomes: dict[str, Outcome], concurrent: bool = True) -> None:
    """The session's outcomes; ``concurrent`` False: a session without the ``CONCURRENT`` tests (program order)."""
    for test in PASSING:
        if concurrent or not _needs_concurrency(test):
            assert outcomes[test][0] == "passed", (test, outcomes[test])
    _rules(outcomes, concurrent)
    _bugs(outcomes, concurrent)


@_session("task-programs")
class TestRandomOrder:
    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        _checks(outcomes)


@_session("task-programs-fifo", "--pldemu-task-order", "fifo")
class TestFifoOrder:
    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        _checks(outcomes)


@_session("task-programs-disturbed", "--pldemu-seed", "7", "--pldemu-jitter", "50", "--pldemu-visibility", "deferred")
class TestJitterAndDeferredVisibility:
    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        _checks(outcomes)


@_session("task-programs-program", "--pldemu-task-order", "program", "-k", f"not ({' or '.join(CONCURRENT)})")
class TestProgramOrder:
    """Each task run to completion at its submission (with ``--races``, the front end's default, through the
    scheduler, so the task graph is built): the same reports. The session took 62 s on the shared machine
    (the fifo one 68 s): the ``CONCURRENT`` tests would add a deadlock timeout each."""

    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        assert not [test for test in outcomes if _needs_concurrency(test)], sorted(outcomes)
        _checks(outcomes, concurrent=False)


pytestmark = pytest.mark.launcher


def test_every_program_file_is_run() -> None:
    assert {p.name for p in PROGRAMS.glob("*.py")} == set(FILES)
