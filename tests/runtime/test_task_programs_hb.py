"""Cross-rank happens-before per task (issue 40, item 4): our own programs (tests/runtime/task_programs/)
where a peer's access races with one task of a rank that other tasks of that rank synchronise with.

Each buggy one is reported in every task order: fifo (which, with one clock per rank, hid both: it runs
the unrelated reader after the consumer's acquire, the writer before the unrelated notifier), seeded
random orders, jitter with deferred visibility, and program order (each task run to completion at its
submission: with --races it goes through the scheduler, so the rank's tasks are logical threads there
too), at 2 and 3 ranks. Each fixed one (an explicit dep, a
tensor RAW edge) is clean in the same orders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "task_programs"

ORDERS = [
    ("--task-order", "fifo"),
    *(("--task-order", "random", "--seed", seed) for seed in ("1", "2", "3", "4")),
    ("--task-order", "random", "--seed", "7", "--jitter", "50", "--visibility", "deferred"),
    ("--task-order", "program"),
]
ORDER_IDS = ["fifo", "random1", "random2", "random3", "random4", "random-jitter-deferred", "program"]


def _run(tmp_path: Path, name: str, ranks: int, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pldemu", "run", str(PROGRAMS / f"{name}.pld"), "-n", str(ranks),
                           "--races", "--timeout", "5", "--cores", "1", *flags], capture_output=True, text=True,
                          cwd=tmp_path, timeout=180)


@pytest.mark.parametrize("flags", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize(("name", "ranks", "peer", "task"), [
    # rank 1's put || the read of the task with no path from the task whose wait observed rank 1's notify
    pytest.param("peer_data_unrelated_reader", 2, "rank 1 write at main:13 pld.tile.put(data, 0, fill, stage, "
                 "atomic=None) [peer_data_unrelated_reader.pld:18]", "rank 0 read at main:23 v = tile.load(data, "
                 "[0, 0], [4, 8]) [peer_data_unrelated_reader.pld:28]", id="acquire-2"),
    pytest.param("peer_data_unrelated_reader", 3, "[peer_data_unrelated_reader.pld:18]",
                 "[peer_data_unrelated_reader.pld:28]", id="acquire-3"),
    # the writer task's store || rank 1's get, which an unrelated task's notify let through
    pytest.param("peer_reads_unrelated_writer", 2, "rank 1 read at main:23 pld.tile.get(out, 0, data, stage) "
                 "[peer_reads_unrelated_writer.pld:27]", "rank 0 write at main:13 tile.store(t, [0, 0], data) "
                 "[peer_reads_unrelated_writer.pld:17]", id="release-2"),
])
def test_a_peer_racing_one_task_is_reported_in_every_order(tmp_path: Path, name: str, ranks: int, peer: str,
                                                            task: str, flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, name, ranks, *flags)
    out = res.stdout + res.stderr
    assert res.returncode == 4 and "races: 1 report(s)" in out, out
    assert "race on data[0, 0] .. data[3, 7] of rank 0" in out and peer in out and task in out, out


@pytest.mark.parametrize("flags", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize(("name", "ranks"), [
    ("peer_data_ordered_reader", 2),  # the reader depends on the consumer (deps)
    ("peer_data_ordered_reader", 3),
    ("peer_reads_writer_dep", 2),  # the notifier depends on the writer (deps)
    ("peer_reads_writer_raw", 3),  # the notifier reads what the writer wrote (a RAW edge)
])
def test_a_task_ordered_after_the_synchronising_one_is_clean(tmp_path: Path, name: str, ranks: int,
                                                              flags: tuple[str, ...]) -> None:
    res = _run(tmp_path, name, ranks, *flags)
    assert res.returncode == 0 and "races: none" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("flags", ORDERS, ids=ORDER_IDS)
def test_a_continued_thread_tells_a_peer_only_its_producer(tmp_path: Path, flags: tuple[str, ...]) -> None:
    """A task that logs on its producer's thread (race_threads: a chain is one thread) is not ordered
    before a peer that synchronised with a sibling task depending on the same producer."""
    res = _run(tmp_path, "peer_reads_sibling_writer", 2, *flags)
    out = res.stdout + res.stderr
    assert res.returncode == 4 and "races: 1 report(s)" in out, out
    assert "race on data2[0, 0] .. data2[3, 7] of rank 0" in out, out
    assert "rank 0 write at main:18 tile.store(u, [0, 0], data2) [peer_reads_sibling_writer.pld:22]" in out, out
