"""The wait-for report for any signal layout (issue 13): the awaited rank comes from who has posted to
the cell (the invariant checker's posters shadow) or from the row of an ``[NR, ...]`` buffer, and a
cell nobody ever posted to is called so. Pure functions: no MPI."""

from __future__ import annotations

import time

from pldemu.runtime.errors import Cause, DeadlockError
from pldemu.runtime.status import (
    CMP_GE,
    RankState,
    RankStatus,
    WaitTarget,
    awaited_rank,
    format_report,
    source_rank,
)


def _blocked(rank: int, target: WaitTarget) -> tuple[RankStatus, WaitTarget]:
    return RankStatus(rank, RankState.TIMED_OUT, 1, 3, 0, 0, 1, CMP_GE, 0, int(time.time() * 1000)), target


def test_a_hand_written_nr_by_2_layout_is_read_by_its_row() -> None:
    assert source_rank((3, 2), (2, 0), 3) == 2 and source_rank((3, 2), (1, 1), 3) == 1
    assert source_rank((6, 4), (3, 1), 4) == 1  # the ring collective's [2*(NR-1), NR] still by column


def test_posters_name_the_awaited_rank_whatever_the_layout() -> None:
    cell = WaitTarget("flags", (3, 1), (5, 2), 0, posters=(2,))
    assert awaited_rank(cell, 0, 4) == 2
    # The owner's own retiring notifies do not make it wait for itself.
    assert awaited_rank(WaitTarget("flags", (3, 1), (5, 2), 0, posters=(0, 2)), 0, 4) == 2
    assert awaited_rank(WaitTarget("flags", (3, 1), (5, 2), 0, posters=(1, 2)), 0, 4) is None
    # Several posters on an [NR, ...] buffer: the row decides when it is among them.
    assert awaited_rank(WaitTarget("sig", (1, 0), (4, 2), 0, posters=(1, 3)), 0, 4) == 1
    assert awaited_rank(WaitTarget("sig", (2, 0), (4, 2), 0, posters=()), 0, 4) == 2


def test_a_ring_on_an_nr_by_2_layout_gets_its_cycle_and_the_cells_nobody_posted_to() -> None:
    n = 3
    rows = [_blocked(r, WaitTarget("sig", ((r - 1) % n, 0), (n, 2), 0, posters=())) for r in range(n)]
    text, _ = format_report(0, [s for s, _ in rows], str, {s.rank: t for s, t in rows}, 2.0)
    assert "cycle: rank 0 -> rank 2 -> rank 1 -> rank 0" in text, text
    assert "rank 0 waits on sig[2, 0]: no rank has posted to sig[2, 0]" in text, text
    assert "names no source rank" not in text, text


def test_an_unknown_layout_says_what_is_not_known() -> None:
    rows = [_blocked(0, WaitTarget("flags", (4, 1), (5, 2), 0)),
            _blocked(1, WaitTarget("flags", (4, 1), (5, 2), 0, posters=(0, 2)))]
    text, _ = format_report(0, [s for s, _ in rows] + [RankStatus(2, RankState.DONE, 1, -1, 0, 0, 0, CMP_GE, 0, 0)],
                            str, {s.rank: t for s, t in rows}, 2.0)
    assert "rank 0 waits on flags[4, 1]: the cell address names no source rank, and who posts to it is not known" in text
    assert "rank 1 waits on flags[4, 1]: ranks 0, 2 posted to it before" in text, text


def test_a_deadlock_names_its_root_cause_first() -> None:
    inv = Cause("invariant", 0, "invariant negative-cell: signal cell sig[1, 0] of rank 0 went negative (-1)")
    race = Cause("race", 2, "race on data[0, 0:4] of rank 1")
    err = DeadlockError("deadlock: rank 0 waited 2.0s", rank=0, location="main:3", report="wait-for graph",
                        primary=True, causes=(inv,))
    lines = str(err).splitlines()
    assert lines[0] == inv.text and lines[1] == "then deadlock: rank 0 waited 2.0s" and lines[-1] == "wait-for graph"
    both = err.with_causes((race, Cause("invariant", 1, "# a harness line of a kind the board has")))
    assert [c.kind for c in both.causes] == ["invariant", "race"] and both.message == err.message
    assert "root causes known when the wait gave up (2):" in str(both)
    assert str(DeadlockError("deadlock: x", rank=0, location="", report="graph", primary=True)) == "deadlock: x\ngraph"
