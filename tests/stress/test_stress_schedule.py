"""Seeded schedules: the same seed draws the same delays on a rank; the write buffer's ordering rules."""

from __future__ import annotations

import pytest
from helpers import HAS_TIMER_SLACK, slack_while

from pldemu.mpi import TIMER_SLACK_NS
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.instrument.schedule import VISIBILITY_SPAN, Schedule, Stream, WriteBuffer
from pldemu.runtime.options import RuntimeOptions


def _delays(opts: RuntimeOptions, rank: int, n: int = 600) -> list[float]:
    s = Schedule(opts, rank, 4)
    return [s.next_delay_us() for _ in range(n)]


def test_jitter_is_a_pure_function_of_seed_and_rank() -> None:
    opts = RuntimeOptions(seed=7, jitter_us=100)
    first = _delays(opts, 2)
    assert first == _delays(opts, 2)  # same seed, same rank: same delays (across batch refills too)
    assert first != _delays(opts, 1)  # every rank has its own stream
    assert first != _delays(RuntimeOptions(seed=8, jitter_us=100), 2)
    assert all(0 <= d < 100 for d in first)
    assert max(first) > 50 > min(first)  # spread over the range, not a constant


def test_other_knobs_do_not_shift_the_jitter_stream() -> None:
    base = _delays(RuntimeOptions(seed=3, jitter_us=40), 0)
    assert base == _delays(RuntimeOptions(seed=3, jitter_us=40, skew_us=500, visibility="deferred"), 0)


def test_negative_and_huge_seeds_are_accepted() -> None:
    assert _delays(RuntimeOptions(seed=-5, jitter_us=10), 0, 5) != _delays(RuntimeOptions(seed=5, jitter_us=10), 0, 5)
    assert len(_delays(RuntimeOptions(seed=1 << 80, jitter_us=10), 0, 5)) == 5


def test_straggler_slows_only_its_rank() -> None:
    opts = RuntimeOptions(straggler=(1, 250.0))
    assert all(d == 250.0 for d in _delays(opts, 1, 10))
    assert all(d == 0.0 for d in _delays(opts, 0, 10))
    assert Schedule(opts, 1, 4).delays and not Schedule(opts, 0, 4).delays
    with pytest.raises(ProgramError, match="straggler rank 4"):
        Schedule(RuntimeOptions(straggler=(4, 1.0)), 0, 4)


def test_skew_draws_per_call() -> None:
    s, t = Schedule(RuntimeOptions(seed=1, skew_us=300), 0, 2), Schedule(RuntimeOptions(seed=1, skew_us=300), 0, 2)
    a = [s.next_skew_us() for _ in range(20)]
    assert a == [t.next_skew_us() for _ in range(20)] and all(0 <= x < 300 for x in a)


def _buffer(rank: int = 0, seed: int = 0) -> tuple[WriteBuffer, list[str]]:
    return WriteBuffer(rank, Stream(seed, rank, 9)), []


def test_entries_land_in_order_by_their_due_point() -> None:
    wb, log = _buffer()
    for i in range(50):
        wb.add(1, lambda i=i: log.append(f"w{i}"))
    assert wb.pending == 50 and log == []
    for _ in range(VISIBILITY_SPAN):
        wb.tick()
    # Dues are at most SPAN ticks after issue and never decrease: everything issued at tick 0 has landed.
    assert log == [f"w{i}" for i in range(50)] and wb.pending == 0


def test_release_lands_everything_and_due_points_replay() -> None:
    runs = []
    for _ in range(2):
        wb, log = _buffer(seed=4)
        for i in range(8):
            wb.add(1, lambda i=i, log=log: log.append(f"w{i}"))
            wb.tick()
        runs.append(list(log))
        wb.flush()
        assert log == [f"w{i}" for i in range(8)] and wb.pending == 0
    assert runs[0] == runs[1]  # the same seed lands the same prefix at the same ticks


def test_read_your_writes_lands_up_to_the_last_write_to_self() -> None:
    wb, log = _buffer(rank=2)
    wb.add(0, lambda: log.append("to0"))
    wb.add(2, lambda: log.append("self"))
    wb.add(1, lambda: log.append("to1"))
    wb.add(2, lambda: log.append("self2"))
    wb.flush_self()
    assert log == ["self", "self2"] and wb.pending == 2  # only writes to this rank land, in their order
    wb.flush_self()
    assert wb.pending == 2
    wb.flush()
    assert log == ["self", "self2", "to0", "to1"]


@pytest.mark.skipif(not HAS_TIMER_SLACK, reason="needs Linux's timer slack in /proc")
def test_a_delay_sleeps_with_the_back_offs_tight_slack() -> None:
    # --jitter 50 must mean 50 us: with the thread's default 50 us of slack it lasted up to twice that.
    straggler = Schedule(RuntimeOptions(straggler=(0, 500_000.0)), 0, 2)
    seen = slack_while(straggler.delay)
    assert seen["during"] == TIMER_SLACK_NS != seen["before"] == seen["after"], seen
