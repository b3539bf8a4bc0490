"""The checkpoint replay of the race detector's clocks (``race_clocks.replay``) on hand-made sync logs:
what a satisfied wait acquires, without MPI."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.runtime.instrument.race_clocks import ACQ, JOIN, REL, SyncEvent, replay

NR = 4


def rel(t: float, target: int, value: int = 1, is_set: bool = False, cell: int = 0) -> SyncEvent:
    return (REL, t, target, 0, cell, value, is_set)


def acq(t: float, expected: int, eq: bool = False, cell: int = 0) -> SyncEvent:
    return (ACQ, t, 0, cell, eq, expected)


def after(logs: list[list[SyncEvent]], rank: int, event: int, init: int = 0) -> tuple[int, ...]:
    """Rank ``rank``'s clock just after its event number ``event`` (0-based)."""
    inits = [{0: np.array([init if r == rank else 0, 0])} for r in range(len(logs))]
    return replay(logs, inits).segments[rank][event + 1]


@pytest.mark.parametrize("k", [1, 3, 11, 12])
def test_one_writer_far_ahead_gives_the_release_that_reached_k(k: int) -> None:
    # Rank 0 posted 12 credits before rank 1 waits: the wait for k needs the k-th, however old.
    logs = [[rel(t, 1) for t in range(1, 13)], [acq(20, k)], [], []]
    assert after(logs, 1, 0)[0] == k


def test_several_writers_on_one_counter_count_like_a_semaphore() -> None:
    writers = [[], [rel(1, 0)], [rel(2, 0)], [rel(3, 0)]]
    assert after([[acq(10, 2)], *writers[1:]], 0, 0)[1:] == (0, 0, 0)  # any two suffice: none needed
    assert after([[acq(10, 3)], *writers[1:]], 0, 0)[1:] == (1, 1, 1)  # all three needed


def test_a_concurrent_credit_issued_after_the_wait_counts_as_one_that_could_have_come_first() -> None:
    logs = [[acq(5, 1)], [rel(1, 0)], [rel(10, 0)], []]
    assert after(logs, 0, 0)[1] == 0


def test_what_every_alternative_knows_is_acquired() -> None:
    # Rank 1 releases to ranks 2 and 3, which then each post to rank 0: either post lets rank 0 pass,
    # and both know rank 1's first release.
    logs = [[acq(10, 1)], [rel(1, 2), rel(2, 3)], [acq(3, 1), rel(5, 0)], [acq(4, 1), rel(6, 0)]]
    assert after(logs, 0, 0)[1:] == (1, 0, 0)


def test_a_relayed_credit_implies_the_one_before_it() -> None:
    # Rank 2's credit follows rank 1's (rank 2 waited for rank 1's second release): either way rank
    # 1's first release has landed when rank 0 passes.
    logs = [[acq(10, 1)], [rel(1, 0), rel(2, 2)], [acq(3, 1), rel(4, 0)], []]
    assert after(logs, 0, 0)[1] == 1


def test_a_credit_caused_by_the_wait_itself_is_not_a_candidate() -> None:
    # Rank 2's credit into the same cell happens after rank 0's wait (through rank 0's later release).
    logs = [[acq(5, 1), rel(6, 2)], [rel(1, 0)], [acq(7, 1), rel(8, 0)], []]
    assert after(logs, 0, 0)[1] == 1


def test_retirements_and_the_cell_at_the_epoch_start() -> None:
    # My own retirement (-1) between two credits: waiting for 1 again needs the second credit.
    logs = [[acq(5, 1), rel(6, 0, -1), acq(7, 1)], [rel(1, 0), rel(2, 0)], [], []]
    assert after(logs, 0, 0)[1] == 1 and after(logs, 0, 2)[1] == 2
    assert after([[acq(5, 5)], [rel(1, 0)], [], []], 0, 0, init=5)[1] == 0  # already there before the epoch
    assert after([[acq(5, 6)], [rel(1, 0)], [], []], 0, 0, init=5)[1] == 1


def test_eq_waits_and_set_only_flags() -> None:
    credits = [rel(1, 0), rel(2, 0), rel(3, 0)]
    assert after([[acq(5, 2, eq=True)], credits, [], []], 0, 0)[1] == 2
    flags = [[acq(5, 1, eq=True)], [rel(1, 0, 1, is_set=True)], [rel(2, 0, 2, is_set=True)], []]
    assert after(flags, 0, 0)[1:3] == (1, 0)  # only rank 1's Set gives 1


def test_a_join_orders_everything_before_it() -> None:
    logs = [[(JOIN, 3), acq(5, 1)], [rel(1, 0), (JOIN, 3)], [(JOIN, 3)], [(JOIN, 3)]]
    assert after(logs, 0, 1)[1] >= 1
    with pytest.raises(RuntimeError, match="joined a different number"):
        replay([[(JOIN, 1)], [], [], []], [{}] * NR)


def test_my_own_reset_after_the_wait_is_not_part_of_what_it_saw() -> None:
    logs = [[acq(5, 1, eq=True), rel(6, 0, 0, is_set=True)], [rel(1, 0, 1, is_set=True)], [], []]
    res = replay(logs, [{0: np.zeros(2)} for _ in range(NR)])
    assert res.segments[0][1][1] == 1 and res.exact[0] == 1 and res.coarse[0] == 0
