"""The NumPy oracles against small cases computed by hand from the ranks' inputs."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.harness import data, oracle
from pldemu.harness.data import CheckCase
from pldemu.ir import ReduceOp


def mk(name: str, nranks: int = 3, size: int = 4, dtype: type = np.float32, **kw: object) -> CheckCase:
    shape = kw.pop("shape", (1, size))
    return CheckCase(name=name, nranks=nranks, dtype=np.dtype(dtype), size=size, shape=shape, seed=11, **kw)  # type: ignore[arg-type]


def inp(case: CheckCase, rank: int, it: int) -> data.RankInputs:
    return data.rank_inputs(case, rank, it)


def test_reduce_fold_hand_values() -> None:
    a = [
        np.array([1.0, -2.0], np.float16),
        np.array([0.5, 4.0], np.float16),
        np.array([2.0, 0.5], np.float16),
    ]
    assert oracle.reduce_fold(a, ReduceOp.Sum).tolist() == [3.5, 2.5]
    assert oracle.reduce_fold(a, ReduceOp.Max).tolist() == [2.0, 4.0]
    assert oracle.reduce_fold(a, ReduceOp.Min).tolist() == [0.5, -2.0]
    assert oracle.reduce_fold(a, ReduceOp.Prod).tolist() == [1.0, -4.0]
    assert oracle.reduce_fold(a, ReduceOp.Sum).dtype == np.float16
    # FP16 rounds every step: 2048 + 1 is 2048 in FP16 (the reason the data stays small).
    big = [np.array([2048.0], np.float16), np.array([1.0], np.float16)]
    assert oracle.reduce_fold(big, ReduceOp.Sum).tolist() == [2048.0]
    assert oracle.reduce_fold(big, ReduceOp.Sum, np.float32).tolist() == [2049.0]
    with pytest.raises(ValueError):
        oracle.reduce_fold([], ReduceOp.Sum)


@pytest.mark.parametrize("op", list(ReduceOp))
def test_allreduce_two_ranks(op: ReduceOp) -> None:
    case = mk("allreduce", nranks=2, reduce=op)
    a, b = inp(case, 0, 3).target, inp(case, 1, 3).target
    assert a is not None and b is not None
    want = {
        ReduceOp.Sum: a + b,
        ReduceOp.Max: np.maximum(a, b),
        ReduceOp.Min: np.minimum(a, b),
        ReduceOp.Prod: a * b,
    }[op]
    for r in (0, 1):
        exp = oracle.expected(case, r, 3)
        assert exp.mask is None and exp.recv_counts is None
        assert np.array_equal(exp.target, want)


def test_allreduce_mesh_partial_valid_rectangle() -> None:
    case = mk("allreduce", nranks=3, size=12, shape=(3, 4), valid_shape=(2, 3))
    ins = [inp(case, r, 0).target for r in range(3)]
    exp = oracle.expected(case, 1, 0).target
    assert exp is not None
    total = ins[0] + ins[1] + ins[2]  # type: ignore[operator]
    assert np.array_equal(exp[:2, :3], total[:2, :3])
    assert np.array_equal(exp[2, :], ins[1][2, :])  # type: ignore[index]
    assert np.array_equal(exp[:, 3], ins[1][:, 3])  # type: ignore[index]
    assert oracle.reduced_region(case) == (slice(0, 2), slice(0, 3))


def test_allreduce_ring_partial_valid_is_a_prefix() -> None:
    case = mk("allreduce", nranks=2, size=12, shape=(3, 4), valid_shape=(2, 4), mode="ring")
    assert oracle.reduced_region(case) == 8
    ins = [inp(case, r, 0).target for r in range(2)]
    exp = oracle.expected(case, 0, 0).target
    assert exp is not None
    flat = exp.reshape(-1)
    assert np.array_equal(flat[:8], (ins[0] + ins[1]).reshape(-1)[:8])  # type: ignore[operator]
    assert np.array_equal(flat[8:], ins[0].reshape(-1)[8:])  # type: ignore[union-attr]
    full = mk("allreduce", size=12, shape=(3, 4), valid_shape=(3, 4))
    assert oracle.reduced_region(full) is None


def test_reduce_scatter_row_r_only() -> None:
    case = mk("reduce_scatter", nranks=3, reduce=ReduceOp.Max)
    ins = [inp(case, r, 2).target for r in range(3)]
    for r in range(3):
        exp = oracle.expected(case, r, 2).target
        assert exp is not None
        assert np.array_equal(exp[r], np.maximum(np.maximum(ins[0][r], ins[1][r]), ins[2][r]))  # type: ignore[index]
        others = [i for i in range(3) if i != r]
        assert np.array_equal(exp[others], ins[r][others])  # type: ignore[index]


def test_broadcast_allgather_all_to_all() -> None:
    b = mk("broadcast", root=2)
    for r in range(3):
        assert np.array_equal(oracle.expected(b, r, 1).target, inp(b, 2, 1).target)  # type: ignore[arg-type]
    g = mk("allgather")
    for r in range(3):
        exp = oracle.expected(g, r, 1).target
        assert exp is not None and exp.shape == (3, 4)
        for s in range(3):
            assert np.array_equal(exp[s], inp(g, s, 1).local_data[0])  # type: ignore[index]
    a = mk("all_to_all")
    for r in range(3):
        exp = oracle.expected(a, r, 1).target
        assert exp is not None
        for s in range(3):
            assert np.array_equal(exp[s], inp(a, s, 1).input[r])  # type: ignore[index]


def test_all_to_all_v_by_hand() -> None:
    case = mk("all_to_all_v", nranks=3, size=2, max_recv=2)
    it = 4
    for r in range(3):
        exp = oracle.expected(case, r, it)
        assert exp.target is not None and exp.mask is not None and exp.recv_counts is not None
        for s in range(3):
            sent = int(data.send_counts(11, s, it, 3, 2)[r])
            rows = max(0, min(sent, 2))
            assert exp.recv_counts[s, 0] == rows
            src = inp(case, s, it).input
            assert src is not None
            assert np.array_equal(exp.target[s * 2 : s * 2 + rows], src[r * 2 : r * 2 + rows])
            assert exp.mask[s * 2 : s * 2 + rows].all()
            assert not exp.mask[s * 2 + rows : s * 2 + 2].any()


def test_all_to_all_v_counts_cover_zero_and_clamp() -> None:
    """Over a few iterations the oracle sees empty edges and clamped ones."""
    case = mk("all_to_all_v", nranks=4, size=1, max_recv=1)
    rows = [oracle.expected(case, r, it).recv_counts for r in range(4) for it in range(10)]
    flat = np.concatenate([x.reshape(-1) for x in rows if x is not None])
    assert set(flat.tolist()) == {0, 1}
    raw = np.concatenate([data.send_counts(11, s, it, 4, 1) for s in range(4) for it in range(10)])
    assert (raw > 1).any() and (raw <= 0).any()


def test_barrier_has_no_data() -> None:
    assert oracle.expected(mk("barrier"), 0, 0) == oracle.Expected()


def test_compare() -> None:
    exp = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert oracle.compare(exp, exp.copy()).ok
    seen = exp.copy()
    seen[1, 0] = np.nan
    seen[1, 1] = 5.0
    mm = oracle.compare(exp, seen)
    assert mm.as_tuple() == (2, (1, 0), 3.0, mm.seen)
    assert np.isnan(mm.seen)  # type: ignore[arg-type]
    assert "2 wrong in target, first at (1, 0)" in mm.describe()
    mask = np.array([[True, True], [False, True]])
    assert oracle.compare(exp, seen, mask).as_tuple() == (1, (1, 1), 4.0, 5.0)
    assert oracle.compare(exp, seen.reshape(4)).count == 2  # same size, other shape: compared flat
    assert oracle.compare(exp, np.zeros(3)).count == 4
    sig = oracle.signal_nonzero(np.array([[0, 0], [0, -1]], np.int32))
    assert sig.as_tuple() == (1, (1, 1), 0, -1) and sig.what == "signal"
    assert oracle.signal_nonzero(np.zeros((3, 1), np.int32)).ok


def test_check_rank() -> None:
    case = mk("all_to_all_v", nranks=2, size=2, max_recv=2)
    exp = oracle.expected(case, 0, 0)
    assert exp.target is not None and exp.mask is not None
    seen = np.where(exp.mask, exp.target, np.float32(np.nan))  # stale rows are not checked
    got = oracle.check_rank(case, 0, 0, seen, exp.recv_counts)
    assert [m.ok for m in got] == [True, True]
    bad = exp.recv_counts.copy()  # type: ignore[union-attr]
    bad[0, 0] += 1
    got = oracle.check_rank(case, 0, 0, seen, bad)
    assert got[1].what == "recv_counts" and got[1].count == 1
    with pytest.raises(ValueError):
        oracle.check_rank(case, 0, 0, None, None)
