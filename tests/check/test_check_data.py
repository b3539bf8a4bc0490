"""The harness's input data: recomputable, varied, and exact in every reduction order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pldemu.harness import data
from pldemu.harness.oracle import reduce_fold
from pldemu.ir import ReduceOp

DTYPES = (np.float16, np.float32)
UFUNC = {ReduceOp.Sum: np.add, ReduceOp.Max: np.maximum, ReduceOp.Min: np.minimum, ReduceOp.Prod: np.multiply}


def _inputs(
    op: ReduceOp, dtype: type, nranks: int, iters: int = 4, count: int = 16, seed: int = 7
) -> np.ndarray:
    """[nranks, iters*count]: every rank's values at several iterations, side by side."""
    return np.stack(
        [
            np.concatenate(
                [data.values(dtype, op, seed, r, it, count, start=it * 1000) for it in range(iters)]
            )
            for r in range(nranks)
        ]
    )


def _exact(op: ReduceOp, a: np.ndarray) -> np.ndarray:
    """The mathematically exact reduction over axis 0 (float64 holds every value here exactly)."""
    x = a.astype(np.float64)
    return {ReduceOp.Sum: x.sum(0), ReduceOp.Max: x.max(0), ReduceOp.Min: x.min(0), ReduceOp.Prod: x.prod(0)}[
        op
    ]


def _tree(op: ReduceOp, items: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Combine ``items`` in a random binary tree, every step in the items' dtype."""
    items = list(items)
    while len(items) > 1:
        i = int(rng.integers(0, len(items) - 1))
        a, b = items[i], items[i + 1]
        items[i : i + 2] = [UFUNC[op](a, b, dtype=a.dtype)]
    return items[0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(ReduceOp))
def test_every_order_of_8_ranks_is_exact(op: ReduceOp, dtype: type) -> None:
    """All 8! left folds and random trees give the oracle's result, which is the exact one."""
    a = _inputs(op, dtype, 8)
    oracle = reduce_fold(list(a), op, dtype)
    exact = _exact(op, a)
    assert np.array_equal(oracle.astype(np.float64), exact)
    perms = np.array(list(itertools.permutations(range(8))), dtype=np.intp)  # 40320 x 8
    g = a[perms]  # 40320 x 8 x P
    acc = g[:, 0]
    for k in range(1, 8):
        acc = UFUNC[op](acc, g[:, k], dtype=a.dtype)
    assert acc.dtype == np.dtype(dtype)
    assert np.array_equal(acc, np.broadcast_to(oracle, acc.shape))
    rng = np.random.default_rng(1)
    for _ in range(200):
        order = rng.permutation(8)
        assert np.array_equal(_tree(op, [a[i] for i in order], rng), oracle)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(ReduceOp))
def test_exact_at_many_ranks(op: ReduceOp, dtype: type) -> None:
    """Beyond 8 ranks too: up to the documented limit (Sum) or 64 ranks (the others)."""
    limit = data.max_exact_ranks(op, dtype)
    nranks = min(limit, 135) if limit is not None else 64
    a = _inputs(op, dtype, nranks, iters=2, count=64)
    exact = _exact(op, a)
    rng = np.random.default_rng(2)
    for _ in range(20):
        order = rng.permutation(nranks)
        folded = reduce_fold([a[i] for i in order], op, dtype)
        assert np.array_equal(folded.astype(np.float64), exact)
        assert np.array_equal(_tree(op, [a[i] for i in order], rng).astype(np.float64), exact)


def test_sum_limit_is_tight_enough() -> None:
    assert data.max_exact_ranks(ReduceOp.Sum, np.float16) == 135
    assert data.max_exact_ranks(ReduceOp.Prod, np.float16) is None


@pytest.mark.parametrize("op", [None, *ReduceOp])
def test_values_are_recomputable_and_vary(op: ReduceOp | None) -> None:
    a = data.values(np.float32, op, 3, 2, 5, 4096)
    assert np.array_equal(a, data.values(np.float32, op, 3, 2, 5, 4096))
    # A window of the stream equals the same positions of the whole.
    assert np.array_equal(data.values(np.float32, op, 3, 2, 5, 100, start=1000), a[1000:1100])
    # Rank, iteration, seed and position all change the values.
    for other in (
        data.values(np.float32, op, 3, 3, 5, 4096),
        data.values(np.float32, op, 3, 2, 6, 4096),
        data.values(np.float32, op, 4, 2, 5, 4096),
    ):
        assert np.count_nonzero(a != other) > 4096 * 0.4
    assert len(np.unique(a)) >= (5 if op is ReduceOp.Prod else 20)
    assert np.all(np.isfinite(a))
    assert not np.any(np.signbit(a) & (a == 0)), "negative zero is never produced"
    if op is ReduceOp.Prod:
        assert not np.any(a == 0)
        assert set(np.abs(a).tolist()) == {0.5, 1.0, 2.0}


def _reference_value(op: ReduceOp | None, seed: int, rank: int, iteration: int, pos: int) -> float:
    """One value by the module docstring's recipe, in Python integers: splitmix64 of the position, then
    the op's level (the stream every replay command relies on)."""
    mask = (1 << 64) - 1
    key = int(data._key(seed, rank, iteration, data._STREAM[op]))
    z = (pos * 0x9E3779B97F4A7C15 + key) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    h = z ^ (z >> 31)
    if op is ReduceOp.Sum:
        return (h % 31 - 15) / 2
    if op is ReduceOp.Prod:
        sign = -1.0 if (h >> 40) & 1 else 1.0
        return sign if rank >= data.PROD_SCALING_RANKS else sign * 2.0 ** (h % 3 - 1)
    return (h % (2 * data.DATA_MAX_HALVES) - data.DATA_MAX_HALVES) / 2


@pytest.mark.parametrize("op", [None, *ReduceOp])
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_follow_the_recipe_at_every_position(op: ReduceOp | None, dtype: type) -> None:
    """The vectorised stream (in-place hashing, level tables) is the recipe, position by position,
    at sizes past NumPy's small-array paths and at ranks on both sides of the Prod scaling limit."""
    for rank in (0, data.PROD_SCALING_RANKS - 1, data.PROD_SCALING_RANKS):
        got = data.values(dtype, op, 11, rank, 3, 70_000, start=5)
        assert got.dtype == np.dtype(dtype) and got.flags.writeable
        for pos in (*range(5, 70), 4101, 65_541, 70_004):
            assert got[pos - 5] == _reference_value(op, 11, rank, 3, pos), (rank, pos)


def test_values_fp16_equal_fp32() -> None:
    """The same values in both dtypes (so FP16 and FP32 runs check the same arithmetic)."""
    for op in [None, *ReduceOp]:
        a16 = data.values(np.float16, op, 0, 1, 2, 1000)
        a32 = data.values(np.float32, op, 0, 1, 2, 1000)
        assert np.array_equal(a16.astype(np.float32), a32)


def test_prod_scaling_stops_at_high_ranks() -> None:
    a = data.values(np.float32, ReduceOp.Prod, 0, data.PROD_SCALING_RANKS, 0, 1000)
    assert set(np.abs(a).tolist()) == {1.0}


def test_values_rejects_other_dtypes() -> None:
    with pytest.raises(ValueError, match="FP16 or FP32"):
        data.values(np.int32, None, 0, 0, 0, 4)


def test_send_counts() -> None:
    m = 3
    draws = np.stack([data.send_counts(5, s, it, 8, m) for s in range(8) for it in range(50)])
    assert draws.dtype == np.int32
    assert draws.min() == data.SEND_COUNT_LOW
    assert draws.max() == m + data.SEND_COUNT_EXTRA
    assert np.any(draws == 0)
    assert np.any(draws > m)
    assert np.array_equal(data.send_counts(5, 2, 7, 8, m), data.send_counts(5, 2, 7, 8, m))
    assert not np.array_equal(data.send_counts(5, 2, 7, 8, m), data.send_counts(5, 2, 8, 8, m))
    assert np.array_equal(data.clamp_rows(np.array([-1, 0, 2, 3, 4, 5]), 3), [0, 0, 2, 3, 3, 3])
    with pytest.raises(ValueError):
        data.send_counts(0, 0, 0, 4, 0)


def test_rank_inputs_shapes() -> None:
    def case(name: str, **kw: object) -> data.CheckCase:
        return data.CheckCase(name=name, nranks=3, dtype=np.dtype(np.float16), size=5, shape=(1, 5), **kw)  # type: ignore[arg-type]

    assert data.rank_inputs(case("allreduce"), 0, 0).target.shape == (1, 5)  # type: ignore[union-attr]
    assert data.rank_inputs(case("reduce_scatter"), 0, 0).target.shape == (3, 5)  # type: ignore[union-attr]
    assert data.rank_inputs(case("allgather"), 0, 0).local_data.shape == (1, 5)  # type: ignore[union-attr]
    assert data.rank_inputs(case("all_to_all"), 0, 0).input.shape == (3, 5)  # type: ignore[union-attr]
    v = data.rank_inputs(case("all_to_all_v", max_recv=2), 1, 0)
    assert v.input.shape == (6, 5) and v.send_counts.shape == (3,)  # type: ignore[union-attr]
    assert data.rank_inputs(case("barrier"), 0, 0) == data.RankInputs()
    with pytest.raises(ValueError, match="root"):
        case("broadcast", root=3)
    with pytest.raises(ValueError, match="unknown collective"):
        case("allscatter")
