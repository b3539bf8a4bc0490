"""Our own task-graph programs (tests/runtime/task_programs/, written here in pypto's patterns) run by
``pldemu run`` with concurrent tasks (issue 40, stages 3-4): each buggy one is reported whatever order
the scheduler takes (fifo, seeded random, jitter, deferred visibility, 1-3 ranks) and in program order
(each task run to completion at its submission), each fixed one is clean; the invariants (Set/AtomicAdd
mixing, cells not 0 at rest) see what tasks notify, in every order. A program that needs its rank's tasks
at once (a wait for a later task of the rank) deadlocks in program order: that schedule's honest result,
checked as such, not as clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "task_programs"

SCHEDULES = [
    ("--task-order", "fifo"),
    ("--task-order", "random", "--seed", "1"),
    ("--task-order", "random", "--seed", "7", "--jitter", "50", "--visibility", "deferred"),
]
SCHEDULE_IDS = ["fifo", "random", "random-jitter-deferred"]
EVERY_ORDER = [*SCHEDULES, ("--task-order", "program")]
"""The concurrent schedules and the named program order."""
EVERY_ORDER_IDS = [*SCHEDULE_IDS, "program"]


def _run(tmp_path: Path, name: str, ranks: int, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pldemu", "run", str(PROGRAMS / f"{name}.pld"), "-n", str(ranks),
                           "--races", "--timeout", "3", *flags], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)


@pytest.mark.parametrize("flags", EVERY_ORDER, ids=EVERY_ORDER_IDS)
@pytest.mark.parametrize(("name", "ranks", "found"), [
    ("war_without_deps", 2, "between two tasks of rank 0"),
    ("atomic_partials", 1, "order-dependent sum on acc"),
    ("race_in_first_batch", 1, 'in task 0 main:9 task r = core_group "reader"'),
    ("race_after_drain", 1, "[race_after_drain.pld:15] in task 1"),  # left || right, early is before the drain
    ("race_in_second_branch", 2, "between two tasks of rank 1"),  # rank 1's copy: the else of the per-device if
])
def test_buggy_task_graph_is_reported_in_every_schedule(tmp_path: Path, name: str, ranks: int, found: str,
                                                        flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, name, ranks, *flags)
    assert found in res.stdout + res.stderr, res.stdout + res.stderr
    assert "no dependency path" in res.stdout or "task-completion order" in res.stdout


@pytest.mark.parametrize(("name", "ranks", "flags"), [
    *((name, ranks, flags) for name, ranks in (("war_with_deps", 3), ("waits_after_notifier", 2), ("two_batches", 1))
      for flags in EVERY_ORDER),
    *(("deferred_waiters", 2, flags) for flags in SCHEDULES),  # program order: it deadlocks (below)
], ids=[*(f"{n}-{o}" for n in ("war_with_deps", "waits_after_notifier", "two_batches") for o in EVERY_ORDER_IDS),
        *(f"deferred_waiters-{o}" for o in SCHEDULE_IDS)])
def test_fixed_task_graph_is_clean(tmp_path: Path, name: str, ranks: int, flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, name, ranks, "--cores", "1", *flags)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "races: none" in res.stdout, res.stdout


@pytest.mark.parametrize("flags", EVERY_ORDER, ids=EVERY_ORDER_IDS)
@pytest.mark.parametrize("name", ["task_id_across_drain", "writer_before_drain"])
def test_a_drain_keeps_the_task_keys(tmp_path: Path, name: str, flags: tuple[str, ...]) -> None:
    """After a drain the call's tasks keep their keys: a TaskId kept across it names its own task (it named a
    later one, which the race detector's logical threads followed round a cycle for ever), and the task race
    check judges a task before the drain as itself, ordered before every task after it (it was taken for the
    task that reused its key: a race reported between ordered tasks)."""
    res = _run(tmp_path, name, 1, *flags)
    assert res.returncode == 0 and "races: none" in res.stdout, res.stdout + res.stderr


def test_waits_holding_every_core_deadlock_and_the_report_names_the_tasks(tmp_path: Path) -> None:
    res = _run(tmp_path, "waits_take_every_core", 2, "--cores", "1", "--task-order", "fifo")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "deadlock" in out, out
    assert out.count("holds a core, blocked in wait sig cell 0 >= 1") >= 2, out
    assert 'would have notified sig (not started): task 2' in out and 'core_group "notifier"' in out, out


def test_deferred_waiters_free_their_cores_where_blocking_ones_deadlock(tmp_path: Path) -> None:
    ok = _run(tmp_path, "deferred_waiters", 1, "--cores", "1", "--task-order", "fifo")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    program = tmp_path / "blocking.pld"
    program.write_text((PROGRAMS / "deferred_waiters.pld").read_text().replace("defer_wait", "wait"))
    res = subprocess.run([sys.executable, "-m", "pldemu", "run", str(program), "-n", "1", "--cores", "1",
                          "--task-order", "fifo", "--timeout", "2"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert res.returncode != 0 and "holds a core" in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.parametrize(("name", "held"), [
    ("deferred_waiters", "deferred (no core), completes when sig cell 0 >= 1: task 0"),
    ("waits_take_every_core", "holds a core, blocked in wait sig cell 0 >= 1"),
])
def test_program_order_runs_tasks_at_submission(tmp_path: Path, name: str, held: str) -> None:
    # one legal schedule: a waiter whose notifier is a later task of its rank never completes in program order
    # (as before stage 3); with --races the scheduler runs it (the graph is built) and its report says why
    res = _run(tmp_path, name, 1, "--task-order", "program", "--timeout", "1")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "deadlock" in out and held in out, out
    assert "task order program: the Orchestration submits its next task only once" in out, out
    # without a task-aware check no scheduler runs: the compiler runs each task inline, the wait blocks the rank
    res = subprocess.run([sys.executable, "-m", "pldemu", "run", str(PROGRAMS / f"{name}.pld"), "-n", "1",
                          "--task-order", "program", "--timeout", "1"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "deadlock" in out and "rank 0's tasks:" not in out, out


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_waits_that_can_take_every_core_are_reported_in_any_order(tmp_path: Path, seed: str) -> None:
    # pypto #2391 decided from the graph: a run whose order let the notifier in first reports it as well
    res = _run(tmp_path, "waits_take_every_core", 2, "--cores", "1", "--task-order", "random", "--seed", seed)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "(pypto #2391" in out, out
    assert "waits can take every core on rank" in out or "waits took every core task 2" in out, out
    assert 'core_group "notifier"' in out, out


@pytest.mark.parametrize("flags", EVERY_ORDER, ids=EVERY_ORDER_IDS)
def test_the_invariants_see_a_task_s_notify(tmp_path: Path, flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, "mixed_credits", 2, "--invariants", *flags)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "invariant set-and-add: signal cell sig[0, 0] of rank 0" in out, out
    assert "[mixed_credits.pld:" in out, out


@pytest.mark.parametrize("flags", EVERY_ORDER, ids=EVERY_ORDER_IDS)
def test_credits_left_by_tasks_are_not_0_at_rest(tmp_path: Path, flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, "credits_left", 3, "--invariants", *flags)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "invariant nonzero-at-rest: signal cell sig[0, 0] of rank 0 is 4" in out, out
    program = tmp_path / "retired.pld"  # the fix: retire the four credits once they are awaited
    program.write_text((PROGRAMS / "credits_left.pld").read_text().replace(
        "cmp=Ge)\n", "cmp=Ge)\n    pld.system.notify(sig, me, [0, 0], -4, op=AtomicAdd)\n"))
    res = subprocess.run([sys.executable, "-m", "pldemu", "run", str(program), "-n", "3", "--races", "--invariants",
                          "--timeout", "3", *flags], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0 and "invariants: none" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize(("name", "ranks"), [("deferred_waiters", 2), ("waits_after_notifier", 3)])
def test_fixed_task_programs_keep_the_invariants(tmp_path: Path, name: str, ranks: int) -> None:
    res = _run(tmp_path, name, ranks, "--invariants", "--task-order", "random", "--seed", "3")
    assert res.returncode == 0 and "invariants: none" in res.stdout, res.stdout + res.stderr
