"""The record check's thread pairs and record merging at model scale (``races.find_races``, ``races._wires``):
only threads of different ranks are paired, whichever way their numbers interleave, and records are merged
by runs of equal clocks, without hashing clocks as wide as the epoch's threads."""

from __future__ import annotations

import pytest
from race_helpers import data_buffer

from pldemu.runtime.instrument.races import WRITE, _clock_runs, find_races
from pldemu.runtime.instrument.vclock import VClock

BUF = [data_buffer()]


def _write(thread: int, width: int) -> tuple:  # type: ignore[type-arg]
    """A write of elements 0..8 by ``thread``, at a clock that knows only its own entry (all concurrent)."""
    vc = VClock.zeros(width).set(thread, 1)
    return (thread, 0, WRITE, vc, [(0, 8)], f"main:{thread} store", 1, float(thread), (0, 0))


@pytest.mark.parametrize("ranks", [[0, 0, 1, 1], [0, 1, 0, 1], [1, 0, 0, 1]])
def test_only_threads_of_different_ranks_are_paired(ranks: list[int]) -> None:
    found = find_races(0, BUF, [_write(t, 4) for t in range(4)], ranks)
    pairs = {tuple(sorted((int(r.first.location[5:6]), int(r.second.location[5:6])))) for r in found}
    assert pairs == {(p, q) for p in range(4) for q in range(p + 1, 4) if ranks[p] != ranks[q]}


def test_records_merge_by_runs_of_equal_clocks() -> None:
    a, b, c = VClock.of((1, 0)), VClock.of((1, 2)), VClock.of((2, 2))
    assert _clock_runs([a, VClock.of((1, 0)), b, b, VClock.of((1, 2)), c]) == [0, 0, 2, 2, 2, 5]
