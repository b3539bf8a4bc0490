"""NumPy oracles: what each rank's result buffers must hold after one call of a collective.

Everything here is single-process and communication-free: an oracle recomputes the other ranks'
inputs from :func:`pldemu.harness.data.rank_inputs`.  Reductions fold in the buffer's own dtype
(``float16`` arithmetic for FP16: NumPy rounds every FP16 operation back to FP16), one operand at a
time, which is what a faithful FP16 device does.  With the harness's exact data the fold order does
not matter (``tests/check`` proves that for every order), so one rank order is enough.

Comparisons are by value (``==``): a NaN (the windows' poison fill) never matches, and the data
never produces a negative zero, so the value comparison is as strict as a bitwise one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from pldemu.harness.data import CheckCase, clamp_rows, rank_inputs, send_counts, values
from pldemu.ir import ReduceOp
from pldemu.mismatch import Mismatch
from pldemu.mismatch import compare as compare_buffers

_UFUNC: Mapping[ReduceOp, Callable[..., np.ndarray]] = MappingProxyType(
    {
        ReduceOp.Sum: np.add,
        ReduceOp.Max: np.maximum,
        ReduceOp.Min: np.minimum,
        ReduceOp.Prod: np.multiply,
    }
)


def reduce_fold(
    arrays: Sequence[np.ndarray], op: ReduceOp, dtype: np.dtype | type | None = None
) -> np.ndarray:
    """Fold ``arrays`` left to right with ``op``, every step rounded to ``dtype`` (default: the first's)."""
    if not arrays:
        raise ValueError("reduce_fold needs at least one array")
    dt = np.dtype(dtype) if dtype is not None else arrays[0].dtype
    ufunc = _UFUNC[op]
    acc = np.array(arrays[0], dtype=dt, copy=True)
    for a in arrays[1:]:
        acc = ufunc(acc, np.asarray(a, dtype=dt), dtype=dt)
    return acc


@dataclass(frozen=True)
class Expected:
    """One rank's expected result after one call.

    ``target`` is the whole result window; ``mask`` (same shape, optional) marks the elements that are
    defined and checked (all_to_all_v rows past a sender's count are stale, not zeroed).
    ``recv_counts`` is all_to_all_v's INT32 ``[NR, 1]`` count window.
    """

    target: np.ndarray | None = None
    mask: np.ndarray | None = None
    recv_counts: np.ndarray | None = None


def reduced_region(case: CheckCase) -> tuple[slice, ...] | int | None:
    """Which part of the allreduce target is reduced.

    ``None``: all of it.  A tuple of slices: the mesh valid rectangle (top-left ``valid_shape``).
    An ``int`` L: the ring's flattened prefix ``[0, L)`` (ring views the target as ``[1, SIZE]`` and
    carries ``valid_shape`` as a prefix of ``product(valid_shape)`` elements).  Elements outside the
    region must keep this rank's own input.
    """
    if case.valid_shape is None or tuple(case.valid_shape) == tuple(case.shape):
        return None
    if case.mode == "ring":
        return math.prod(case.valid_shape)
    return tuple(slice(0, v) for v in case.valid_shape)


def _assign_region(out: np.ndarray, region: tuple[slice, ...] | int | None, value: np.ndarray) -> None:
    if region is None:
        out[...] = value
    elif isinstance(region, int):
        out.reshape(-1)[:region] = value.reshape(-1)[:region]
    else:
        out[region] = value[region]


def expected(case: CheckCase, rank: int, iteration: int) -> Expected:
    """What ``rank``'s buffers hold after call ``iteration`` of ``case``."""
    nr, size, dt, seed, it = case.nranks, case.size, case.dtype, case.seed, iteration
    name = case.name
    # Only the reductions keep part of this rank's own input; the other collectives' results are
    # built from the senders' values alone (computing the input anyway was as much work again).
    if name == "allreduce":
        ins = [rank_inputs(case, r, it).target for r in range(nr)]
        own = ins[rank]
        assert own is not None
        out = own.copy()
        total = reduce_fold([a for a in ins if a is not None], case.reduce, dt)
        _assign_region(out, reduced_region(case), total)
        return Expected(target=out)
    if name == "reduce_scatter":
        # Only row `rank` is defined by the collective; the other rows are this rank's staged
        # chunks, which the recipe reads (remote_load) but never writes.
        own_target = rank_inputs(case, rank, it).target
        assert own_target is not None
        out = own_target.copy()
        rows = [values(dt, case.reduce, seed, r, it, size, start=rank * size) for r in range(nr)]
        out[rank] = reduce_fold(rows, case.reduce, dt)
        return Expected(target=out)
    if name == "broadcast":
        root_in = rank_inputs(case, case.root, it).target
        assert root_in is not None
        return Expected(target=root_in.copy())
    if name == "allgather":
        out = np.stack([values(dt, None, seed, s, it, size) for s in range(nr)])
        return Expected(target=out)
    if name == "all_to_all":
        # Target row s = sender s's input row `rank`.
        out = np.stack([values(dt, None, seed, s, it, size, start=rank * size) for s in range(nr)])
        return Expected(target=out)
    if name == "all_to_all_v":
        m = case.max_recv
        out = np.zeros((nr * m, size), dtype=dt)
        mask = np.zeros((nr * m, size), dtype=bool)
        counts = np.zeros((nr, 1), dtype=np.int32)
        for s in range(nr):
            nrows = int(clamp_rows(send_counts(seed, s, it, nr, m)[rank], m))
            counts[s, 0] = nrows
            if nrows:
                # Sender s sends its input rows [rank*m, +rows) into our rows [s*m, +rows).
                block = values(dt, None, seed, s, it, nrows * size, start=rank * m * size)
                out[s * m : s * m + nrows] = block.reshape(nrows, size)
                mask[s * m : s * m + nrows] = True
        return Expected(target=out, mask=mask, recv_counts=counts)
    return Expected()  # barrier: the signal check is the whole story


def compare(
    expected: np.ndarray, seen: np.ndarray, mask: np.ndarray | None = None, what: str = "target"
) -> Mismatch:
    """Element-wise ``expected == seen`` over ``mask`` (all elements if None): exact, a NaN never
    equals anything (the poison fill never passes), the same size in another shape compared flat."""
    return compare_buffers(expected, seen, what=what, mask=mask, nan_equal=False, flat_same_size=True)


def count_wrong(expected: np.ndarray, seen: np.ndarray) -> int:
    """How many elements of ``seen`` (reshaped to ``expected``'s shape) differ from ``expected``; a
    NaN never equals anything, so a poisoned element always counts."""
    want = np.asarray(expected)
    return int(np.count_nonzero(want != np.asarray(seen).reshape(want.shape)))


def check_rank(
    case: CheckCase,
    rank: int,
    iteration: int,
    target: np.ndarray | None,
    recv_counts: np.ndarray | None = None,
) -> list[Mismatch]:
    """Compare one rank's result buffers with :func:`expected`; one Mismatch per checked buffer."""
    exp = expected(case, rank, iteration)
    out: list[Mismatch] = []
    if exp.target is not None:
        if target is None:
            raise ValueError(f"{case.name}: the target buffer is needed to check the result")
        out.append(compare(exp.target, target, exp.mask, "target"))
    if exp.recv_counts is not None:
        if recv_counts is None:
            raise ValueError(f"{case.name}: the recv_counts buffer is needed to check the result")
        out.append(compare(exp.recv_counts, recv_counts, None, "recv_counts"))
    return out


def signal_nonzero(cells: np.ndarray) -> Mismatch:
    """Every signal cell must be exactly 0 between calls (the self-clearing protocol's claim)."""
    zeros = np.zeros_like(np.asarray(cells))
    return compare(zeros, cells, None, "signal")


__all__ = [
    "Expected",
    "Mismatch",
    "check_rank",
    "compare",
    "count_wrong",
    "expected",
    "reduce_fold",
    "reduced_region",
    "signal_nonzero",
]
