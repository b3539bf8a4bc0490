"""The replay's chunked vector clocks (``race_clocks`` keeps one per sync event of every logical thread) read
and combine exactly as the dense tuples they replaced, and share what an operation does not change."""

from __future__ import annotations

import random

import pytest

from pldemu.runtime.instrument.vclock import CHUNK, VClock, join_all, meet_all

WIDTHS = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5]


def _dense(rng: random.Random, width: int, zeros: float = 0.7) -> tuple[int, ...]:
    """Mostly zeros, as a thread's clock is: few threads known."""
    return tuple(0 if rng.random() < zeros else rng.randrange(1, 300) for _ in range(width))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_clock_reads_as_its_tuple(width: int) -> None:
    rng = random.Random(width)
    for _ in range(20):
        d = _dense(rng, width)
        c = VClock.of(d)
        assert len(c) == width and tuple(c) == d and c.dense() == d
        assert all(c[x] == d[x] for x in range(width))
        assert all(c[-x] == d[-x] for x in range(1, width + 1))
        assert c[1:] == d[1:] and c[::2] == d[::2]
        assert c == d and hash(c) == hash(d) and {d: 1}[c] == 1
        assert c == VClock.of(list(d)) and hash(c) == hash(VClock.of(list(d)))
        with pytest.raises(IndexError):
            c[width]


@pytest.mark.parametrize("width", [w for w in WIDTHS if w])
def test_set_tick_join_and_meet_are_the_dense_ones(width: int) -> None:
    rng = random.Random(100 + width)
    for _ in range(50):
        a, b, e = (_dense(rng, width) for _ in range(3))
        ca, cb, ce = VClock.of(a), VClock.of(b), VClock.of(e)
        x = rng.randrange(width)
        assert ca.tick(x) == (*a[:x], a[x] + 1, *a[x + 1 :])
        assert ca.set(x, 0) == (*a[:x], 0, *a[x + 1 :])
        assert ca.join(cb) == tuple(map(max, a, b))
        assert join_all([ca, cb, ce]) == tuple(map(max, a, b, e))
        assert meet_all([ca, cb, ce]) == tuple(map(min, a, b, e))
        assert meet_all([ca]) == a
        assert (ca.join(cb) == ca) == all(p >= q for p, q in zip(a, b, strict=True))


def test_an_operation_shares_what_it_does_not_change() -> None:
    width = 10 * CHUNK
    base = VClock.of(range(1, width + 1))
    mine = base.tick(3 * CHUNK + 1)
    assert all(mine.chunks[k] is base.chunks[k] for k in range(10) if k != 3)
    assert mine.join(base) is mine  # it knows everything base does: no new clock
    assert base.join(mine).chunks[3] is mine.chunks[3]  # the dominating chunk is taken, not copied
    other = base.tick(7 * CHUNK)
    both = mine.join(other)
    assert both.chunks[3] is mine.chunks[3] and both.chunks[7] is other.chunks[7]
    assert all(both.chunks[k] is base.chunks[k] for k in range(10) if k not in (3, 7))
    assert VClock.zeros(width).set(5, 1).set(5, 0).chunks[0] is VClock.zeros(1).chunks[0]  # one zero chunk


def test_clocks_of_other_widths_do_not_join() -> None:
    with pytest.raises(ValueError):
        VClock.zeros(3).join(VClock.zeros(4))
    with pytest.raises(IndexError):
        VClock.zeros(3).set(3, 1)
