"""Fenced mode's intervals in the conflict search (a write from issue to completion, a scalar read
from its line fill), their report kinds, and lost updates among Set notifies, without MPI traffic."""

from __future__ import annotations

from race_helpers import data_buffer

from pldemu.runtime.instrument.race_clocks import REL
from pldemu.runtime.instrument.races import (
    LOST_UPDATE,
    MISSING_FENCE,
    MISSING_INVALIDATE,
    READ,
    WRITE,
    find_races,
    lost_updates,
)

BUF = [data_buffer()]
INF = (1 << 62, 1 << 62)


def _span(rank: int, kind: int, lo: tuple[int, ...], hi: tuple[int, ...], detail: tuple[object, ...],
          where: str, epoch: tuple[int, int] = (0, 0), hi_epoch: tuple[int, int] = (1, 1)) -> tuple:  # type: ignore[type-arg]
    return (rank, 0, kind, lo, [(0, 8)], where, 1, 0.0, epoch, (hi, hi_epoch, detail))


def _point(rank: int, kind: int, vc: tuple[int, ...], where: str, epoch: tuple[int, int] = (0, 0)) -> tuple:  # type: ignore[type-arg]
    return (rank, 0, kind, vc, [(0, 8)], where, 1, 1.0, epoch)


def test_a_put_completed_after_the_notify_its_reader_acquired_is_a_missing_fence() -> None:
    # rank 0 puts at clock (1, 0), notifies (release clock (1, 0)), fences at (2, 0); rank 1 acquired (1, 0)
    put = _span(0, WRITE, (1, 0), (2, 0), ("fence", ((1, "main:14 notify", False),)), "main:13 put")
    read = _point(1, READ, (1, 1), "main:19 load")
    (r,) = find_races(1, BUF, [put, read])
    assert (r.reason, r.first.location, r.second.location, r.via) == (MISSING_FENCE, "main:13 put", "main:19 load",
                                                                        ("main:14 notify", ""))
    assert "was still pending at main:14 notify (no system.fence between)" in r.describe()


def test_the_report_names_the_release_the_peer_acquired_and_whether_the_write_was_still_cached() -> None:
    # a scalar write pending at three releases (entries 1, 2, 3), cleaned after the first; rank 1 knows entry 2
    releases = ((1, "main:4 notify A", True), (2, "main:6 notify B", False), (3, "main:8 notify C", False))
    write = _span(0, WRITE, (1, 0), (4, 0), ("fence", releases), "main:3 tensor.write")
    (r,) = find_races(1, BUF, [write, _point(1, READ, (2, 1), "main:9 load")])
    assert r.via == ("main:6 notify B", "")
    assert "was still pending at main:6 notify B" in r.describe()
    (r,) = find_races(1, BUF, [write, _point(1, READ, (1, 1), "main:9 load")])
    assert r.via == ("main:4 notify A", "cached")
    assert "was still in rank 0's data cache at main:4 notify A" in r.describe()


def test_a_put_fenced_before_the_notify_is_ordered() -> None:
    put = _span(0, WRITE, (1, 0), (1, 0), ("fence", ()), "main:13 put")
    assert find_races(1, BUF, [put, _point(1, READ, (1, 1), "main:19 load")]) == []


def test_a_write_never_completed_is_unordered_with_every_later_access() -> None:
    put = _span(0, WRITE, (1, 1), INF, ("fence", ((1, "main:14 notify", False),)), "main:13 put")
    (r,) = find_races(1, BUF, [put, _point(1, READ, (5, 3), "main:30 load")])
    assert r.reason == MISSING_FENCE
    # ... but not with an access that happens before its issue (rank 0 had acquired rank 1's entry 1)
    assert find_races(1, BUF, [put, _point(1, READ, (0, 1), "main:2 load")]) == []


def test_a_read_from_a_line_filled_before_the_wait_is_a_missing_cacheinvalid() -> None:
    put = _span(0, WRITE, (1, 0), (1, 0), ("fence", ()), "main:13 put")
    waits = (((1, 2), "main:22 wait"),)
    read = _span(1, READ, (0, 1), (1, 2), ("fill", "main:20 early read", waits), "main:23 late read")
    (r,) = find_races(1, BUF, [put, read])
    assert (r.reason, r.first.location, r.second.location, r.via) == (
        MISSING_INVALIDATE, "main:13 put", "main:23 late read", ("main:20 early read", "main:22 wait"))
    # the line filled after the wait: a point, ordered
    assert find_races(1, BUF, [put, _point(1, READ, (1, 2), "main:23 late read")]) == []


def test_an_unordered_write_with_no_interval_is_a_plain_race() -> None:
    a = _span(0, WRITE, (1, 0), (1, 0), ("fence", ()), "main:3 put")
    (r,) = find_races(1, BUF, [a, _point(1, READ, (0, 1), "main:5 load")])
    assert r.reason == ""


def test_same_origin_in_fenced_mode_needs_a_completion_between_put_and_read() -> None:
    put = _span(0, WRITE, (1, 0), (1, 0), ("fence", ()), "main:13 put", epoch=(0, 0), hi_epoch=(0, 2))
    before = _point(0, READ, (1, 0), "main:14 load", epoch=(0, 1))
    after = _point(0, READ, (1, 0), "main:16 load", epoch=(0, 2))
    (r,) = find_races(1, BUF, [put, before, after])
    assert (r.reason, r.second.location) == (MISSING_FENCE, "main:14 load")
    assert "with no system.fence between them" in r.describe()


def _set_log(*events: tuple[int, int, int]) -> list[tuple[object, ...]]:
    """REL events (target, cell, is_set) into buffer 0, timestamps in order."""
    return [(REL, float(i), t, 0, c, 1, bool(s)) for i, (t, c, s) in enumerate(events)]


def test_two_unordered_sets_into_one_cell_are_a_lost_update() -> None:
    sync = [(_set_log((0, 1, 1)), [(7, 1)]), (_set_log((0, 1, 1)), [(9, 1)])]
    segments = [[(1, 0), (2, 0)], [(0, 1), (0, 2)]]
    (r,) = lost_updates(sync, segments, BUF, lambda s: f"main:{s} notify")
    assert (r.reason, r.target, r.start, r.first.location, r.second.location) == (
        LOST_UPDATE, 0, 1, "main:7 notify", "main:9 notify")
    assert "two Set notifies into one signal cell that nothing orders" in r.describe()


def test_a_lost_update_names_the_lower_rank_first_whichever_set_came_first() -> None:
    late_rank0 = [([(REL, 9.0, 0, 0, 1, 1, True)], [(7, 1)]), ([(REL, 1.0, 0, 0, 1, 1, True)], [(9, 1)])]
    (r,) = lost_updates(late_rank0, [[(1, 0), (2, 0)], [(0, 1), (0, 2)]], BUF, lambda s: f"main:{s} notify")
    assert (r.first.rank, r.first.location, r.second.rank) == (0, "main:7 notify", 1)


def test_ordered_sets_and_atomic_adds_are_not_lost_updates() -> None:
    where = str
    ordered = [(_set_log((0, 1, 1)), [(7, 1)]), (_set_log((0, 1, 1)), [(9, 1)])]
    assert lost_updates(ordered, [[(1, 0), (2, 0)], [(1, 1), (1, 2)]], BUF, where) == []  # rank 1 knew rank 0's Set
    adds = [(_set_log((0, 1, 0)), [(7, 1)]), (_set_log((0, 1, 0)), [(9, 1)])]
    assert lost_updates(adds, [[(1, 0), (2, 0)], [(0, 1), (0, 2)]], BUF, where) == []
    other_cells = [(_set_log((0, 1, 1)), [(7, 1)]), (_set_log((0, 2, 1)), [(9, 1)])]
    assert lost_updates(other_cells, [[(1, 0), (2, 0)], [(0, 1), (0, 2)]], BUF, where) == []


def test_notes_of_markers_a_pass_placed_are_one_line_and_the_users_one_per_site() -> None:
    from pldemu.runtime.instrument.race_fenced import MarkerNotes, fence_notes, merge_notes

    notes = MarkerNotes()
    for site in (1, 2, 3):  # 1, 2: placed by InsertCommFence; 3: the user's own
        notes.count(notes.fence, site, True)
    notes.count(notes.inval, 2, True)
    notes.count(notes.inval, 4, False)  # useful once: no note
    placed = {1: "InsertCommFence", 2: "InsertCommFence"}
    out = fence_notes(merge_notes([notes.wire()]), lambda s: f"site{s}", lambda s: placed.get(s, ""))
    assert len(out) == 2, out
    assert out[0].startswith("note: system.fence at site3 ordered nothing")
    assert out[1].startswith("note: InsertCommFence placed 3 markers that did nothing or not enough")
    assert "2 x a system.fence that ordered nothing; 1 x a system.cacheinvalid that dropped no cached line" in out[1]
    assert "site1" not in out[1] and "site2" not in out[1]


def test_a_write_ordered_after_a_notify_while_the_read_was_in_flight_is_a_missing_fence() -> None:
    from pldemu.runtime.instrument.races import READ_IN_FLIGHT

    # rank 1 remote_loads rank 0's window at clock (0, 1), notifies (own entry 1) while the read is in flight,
    # completes it at (0, 2); rank 0 acquired that notify and then writes at (1, 1)
    read = _span(1, READ, (0, 1), (0, 2), ("flight", ((1, "main:21 notify", False),)), "main:20 remote_load")
    write = _point(0, WRITE, (1, 1), "main:14 store")
    (r,) = find_races(0, BUF, [read, write])
    assert (r.reason, r.first.location, r.second.location, r.via) == (READ_IN_FLIGHT, "main:20 remote_load",
                                                                        "main:14 store", ("main:21 notify",))
    assert "was still in flight at main:21 notify (no system.fence or drain between)" in r.describe()
    # completed before the notify (a fence or drain first): a point, ordered before the write
    done = _point(1, READ, (0, 1), "main:20 remote_load")
    assert find_races(0, BUF, [done, write]) == []
