"""The race detector's pure parts: regions as flat intervals, overlap, and the conflict search over
exchanged records (vector-clock order, kinds, dedup), without MPI traffic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from race_helpers import data_buffer

from pldemu.runtime.instrument.intervals import MAX_RUNS, merge_intervals, overlap, region_intervals
from pldemu.runtime.instrument.races import (
    ATOMIC,
    READ,
    WRITE,
    RaceAccess,
    RaceReport,
    find_races,
)


@pytest.mark.parametrize(
    ("view", "off", "ext", "want"),
    [
        ((1, 64), (0, 16), (1, 16), [(16, 32)]),
        ((4, 8), (1, 0), (2, 8), [(8, 24)]),  # full rows merge into one run
        ((4, 8), (1, 2), (2, 3), [(10, 13), (18, 21)]),  # a column block: one run per row
        ((2, 3, 4), (1, 0, 0), (1, 3, 4), [(12, 24)]),
        ((2, 3, 4), (0, 1, 1), (2, 1, 2), [(5, 7), (17, 19)]),
        ((64,), (3,), (5,), [(3, 8)]),
        ((4, 8), (0, 0), (0, 8), []),  # empty
        ((), (), (), [(0, 1)]),  # a 0-d view is one element
    ],
)
def test_region_intervals(view: tuple[int, ...], off: tuple[int, ...], ext: tuple[int, ...],
                          want: list[tuple[int, int]]) -> None:
    assert region_intervals(view, off, ext) == want


@pytest.mark.parametrize("seed", range(30))
def test_region_intervals_are_sorted_disjoint_unmerged_runs_of_exactly_the_regions_cells(seed: int) -> None:
    rng = np.random.default_rng(seed)
    view = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
    off = tuple(int(rng.integers(0, d)) for d in view)
    ext = tuple(int(rng.integers(1, d - o + 1)) for d, o in zip(view, off, strict=True))
    got = region_intervals(view, off, ext)
    cells = np.zeros(view, bool)
    cells[tuple(slice(o, o + e) for o, e in zip(off, ext, strict=True))] = True
    assert merge_intervals(got) == got  # nothing left to join
    assert sorted(c for lo, hi in got for c in range(lo, hi)) == list(np.flatnonzero(cells.ravel()))


def test_region_with_too_many_runs_becomes_its_bounding_interval() -> None:
    rows = MAX_RUNS + 1
    got = region_intervals((rows, 4), (0, 1), (rows, 1))
    assert got == [(1, (rows - 1) * 4 + 2)]


def test_merge_and_overlap() -> None:
    assert merge_intervals([(5, 7), (0, 2), (2, 4), (6, 9)]) == [(0, 4), (5, 9)]
    assert overlap([(0, 4), (10, 20)], [(3, 12)]) == (3, 4, 1 + 2)
    assert overlap([(0, 4)], [(4, 8)]) is None
    assert overlap([], [(0, 1)]) is None


def _wire(rank: int, kind: int, vc: tuple[int, ...], ivs: list[tuple[int, int]], where: str = "main:1 op",
          call: int = 1, t: float = 0.0, epoch: int = 0) -> tuple:  # type: ignore[type-arg]
    return (rank, 0, kind, vc, ivs, where, call, t, epoch)


BUF = [data_buffer()]


def test_unordered_writes_to_the_same_elements_are_a_race() -> None:
    a = _wire(0, WRITE, (1, 0, 0), [(0, 8)], "main:3 put", t=1.0)
    b = _wire(1, WRITE, (0, 1, 0), [(4, 12)], "main:5 put", t=2.0)
    (r,) = find_races(2, BUF, [a, b])
    assert (r.buffer, r.target, r.start, r.stop, r.overlap) == ("data", 2, 4, 8, 4)
    assert (r.first.rank, r.first.location, r.second.rank) == (0, "main:3 put", 1)
    assert r.region_text() == "data[0, 4:8]"
    assert "neither happens before the other" in r.describe()


def test_ordered_accesses_are_not_a_race() -> None:
    # a (rank 0 at its clock 1) happens before b: rank 1 acquired rank 0's clock 1 (a notify after a).
    a = _wire(0, WRITE, (1, 0), [(0, 8)])
    b = _wire(1, READ, (1, 1), [(0, 8)])
    assert find_races(1, BUF, [a, b]) == []
    # ... and the other way round
    c = _wire(0, WRITE, (2, 3), [(0, 8)], epoch=1)
    d = _wire(1, WRITE, (0, 3), [(0, 8)])
    assert find_races(1, BUF, [c, d]) == []


def test_the_clock_a_rank_released_before_an_access_does_not_order_it() -> None:
    # Rank 0 released at clock 1 (then ticked to 2) and wrote at clock 2; rank 1 acquired only clock 1.
    a = _wire(0, WRITE, (2, 0), [(0, 1)])
    b = _wire(1, READ, (1, 1), [(0, 1)])
    assert len(find_races(0, BUF, [a, b])) == 1


@pytest.mark.parametrize(("k1", "k2", "race"), [
    (READ, READ, False), (ATOMIC, ATOMIC, False), (ATOMIC, READ, True), (ATOMIC, WRITE, True), (WRITE, READ, True),
])
def test_kinds(k1: int, k2: int, race: bool) -> None:
    a = _wire(0, k1, (1, 0), [(0, 4)])
    b = _wire(1, k2, (0, 1), [(0, 4)])
    assert bool(find_races(0, BUF, [a, b])) is race


def test_disjoint_regions_and_one_rank_never_race() -> None:
    assert find_races(0, BUF, [_wire(0, WRITE, (1, 0), [(0, 4)]), _wire(1, WRITE, (0, 1), [(4, 8)])]) == []
    assert find_races(0, BUF, [_wire(0, WRITE, (1, 0), [(0, 4)]), _wire(0, READ, (1, 0), [(0, 4)], epoch=1)]) == []


def test_repeats_of_one_site_pair_are_counted_in_one_report() -> None:
    wires = []
    for k in range(3):  # three epochs of each rank, all concurrent with each other
        wires.append(_wire(0, WRITE, (1 + k, 0), [(0, 4)], "main:3 put", call=k + 1, epoch=k))
        wires.append(_wire(1, READ, (0, 1 + k), [(0, 4)], "main:7 load", call=k + 1, epoch=k))
    (r,) = find_races(0, BUF, wires)
    assert r.count == 9 and {r.first.location, r.second.location} == {"main:3 put", "main:7 load"}


def test_concurrent_range_is_found_among_ordered_neighbours() -> None:
    # Rank 1's records: before a (acquired nothing of rank 0 yet, but rank 0 acquired its clock 1),
    # concurrent with a, and after a (acquired rank 0's clock 5).
    a = _wire(0, WRITE, (5, 1), [(0, 4)], "main:2 a")
    before = _wire(1, WRITE, (0, 1), [(0, 4)], "main:3 before", epoch=0)
    during = _wire(1, WRITE, (0, 2), [(0, 4)], "main:4 during", epoch=1)
    after = _wire(1, WRITE, (5, 3), [(0, 4)], "main:5 after", epoch=2)
    (r,) = find_races(0, BUF, [a, before, during, after])
    assert {r.first.location, r.second.location} == {"main:2 a", "main:4 during"}


def test_host_access_reads_as_after_the_call() -> None:
    host = RaceAccess(0, WRITE, "host: inputs", 3, math.nan)
    prog = RaceAccess(1, READ, "main:9 x = pld.tile.remote_load(...)", 3, 1.0)
    rep = RaceReport("data", (4, 8), 0, 8, 16, 8, prog, host)
    text = rep.describe()
    assert "rank 0 write at host: inputs (after call 3)" in text and "rank 1 read at main:9" in text
    assert rep.region_text() == "data[1, 0:8]"
    assert RaceReport("data", (4, 8), 0, 6, 10, 4, prog, host).region_text() == "data[0, 6] .. data[1, 1]"
