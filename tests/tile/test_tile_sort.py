"""The sort / gather / arange tile ops on one rank (COMM_SELF): each against a reference written here (Python's
stable ``sorted``, plain indexing), ties and NaNs, partial index boxes, and the run-time refusals (an unsorted run
given to a merge, an index outside the source)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pldemu.ir import DType, ProgramBuilder
from pldemu.ir.nodes import Const
from pldemu.ir.ops import Op
from pldemu.runtime.errors import ProgramError
from tests.tile.tile_helpers import run_local


def _sort_program(n: int, block: int | None):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder("s")
    x, out = pb.local("x", "fp32", [1, n]), pb.local("out", "fp32", [1, 2 * n])
    fb = pb.function()
    ids = fb.op(Op.TILE_CI, [Const(0, DType.UINT32), [1, n]], {"dtype": DType.UINT32, "descending": 0})
    t = fb.op(Op.TILE_SORT32, [fb.pld.tile.load(x, [0, 0], [1, n]), ids])
    if block is not None:
        t = fb.op(Op.TILE_MRGSORT, [t], {"block_len": block})
    fb.pld.tile.store(t, [0, 0], out)
    return pb.build()


def _pairs(out: np.ndarray) -> tuple[list[float], list[int]]:
    flat = out.reshape(-1)
    return flat[0::2].tolist(), flat[1::2].view(np.uint32).tolist()


@pytest.mark.parametrize("n", [32, 96])
def test_sort32_sorts_each_block_stably_with_nans_last(n: int) -> None:
    x = np.round(np.random.default_rng(n).standard_normal((1, n)), 0).astype(np.float32)
    x[0, 5] = np.nan
    out = run_local(_sort_program(n, None), {"x": x})[0]["out"]
    values, index = _pairs(out)
    for b in range(n // 32):
        block = x[0, 32 * b:32 * b + 32].tolist()
        order = sorted(range(32), key=lambda i: (math.isnan(block[i]), -block[i] if not math.isnan(block[i]) else 0))
        assert index[32 * b:32 * b + 32] == [32 * b + i for i in order]
        got, want = values[32 * b:32 * b + 32], [block[i] for i in order]
        assert [v for v in got if not math.isnan(v)] == [v for v in want if not math.isnan(v)]


def test_a_merge_of_a_partial_group_sorts_what_is_there() -> None:
    """96 values: runs of 64 slots merged four at a time leave one group of three runs (the row), sorted whole."""
    x = np.random.default_rng(5).integers(-3, 3, (1, 96)).astype(np.float32)
    values, index = _pairs(run_local(_sort_program(96, 64), {"x": x})[0]["out"])
    order = sorted(range(96), key=lambda i: -x[0, i])
    assert index == order and values == [x[0, i] for i in order]


def test_a_merge_refuses_an_unsorted_run() -> None:
    pb = ProgramBuilder("m")
    x, out = pb.local("x", "fp32", [1, 128]), pb.local("out", "fp32", [1, 128])
    fb = pb.function()
    fb.pld.tile.store(fb.op(Op.TILE_MRGSORT, [fb.pld.tile.load(x, [0, 0], [1, 128])], {"block_len": 64}), [0, 0], out)
    pairs = np.zeros((1, 128), np.float32)
    pairs[0, 0::2] = np.arange(64)  # ascending: not what sort32 makes
    with pytest.raises(ProgramError, match=r"run 0 of row .* is not sorted descending"):
        run_local(pb.build(), {"x": pairs})


def _gather_program(per_row: int, valid: list[int] | None):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder("g")
    x, i = pb.local("x", "fp32", [4, 8]), pb.local("i", "int32", [4, 8])
    out = pb.local("out", "fp32", [4, 8])
    fb = pb.function()
    idx = fb.pld.tile.load(i, [0, 0], [4, 8], valid)
    fb.pld.tile.store(fb.op(Op.TILE_GATHER, [fb.pld.tile.load(x, [0, 0], [4, 8]), idx], {"per_row": per_row}),
                      [0, 0], out)
    return pb.build()


def test_gathers_per_row_and_flat_read_only_the_index_box() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    row_idx = rng.integers(0, 8, (4, 8)).astype(np.int32)
    got = run_local(_gather_program(1, None), {"x": x, "i": row_idx})[0]["out"]
    assert got.tolist() == [[x[r, row_idx[r, k]] for k in range(8)] for r in range(4)]
    flat_idx = rng.integers(0, 32, (4, 8)).astype(np.int32)
    flat_idx[2:, :] = 999  # outside the valid box [2, 8]: never read
    got = run_local(_gather_program(0, [2, 8]), {"x": x, "i": flat_idx})[0]["out"]
    assert got[:2].tolist() == [[x.reshape(-1)[flat_idx[r, k]] for k in range(8)] for r in range(2)]


def test_a_per_row_gather_with_fewer_index_rows_reads_the_sources_first_rows() -> None:
    pb = ProgramBuilder("g")
    x, i, out = pb.local("x", "fp32", [4, 16]), pb.local("i", "int32", [2, 8]), pb.local("out", "fp32", [2, 8])
    fb = pb.function()
    src, idx = fb.pld.tile.load(x, [0, 0], [4, 16]), fb.pld.tile.load(i, [0, 0], [2, 8])
    fb.pld.tile.store(fb.op(Op.TILE_GATHER, [src, idx], {"per_row": 1}), [0, 0], out)
    rng = np.random.default_rng(5)
    xs, ids = rng.standard_normal((4, 16)).astype(np.float32), rng.integers(0, 16, (2, 8)).astype(np.int32)
    got = run_local(pb.build(), {"x": xs, "i": ids})[0]["out"]
    np.testing.assert_array_equal(got, np.take_along_axis(xs[:2], ids, axis=-1))  # pypto: rows 2, 3 unused


@pytest.mark.parametrize(("per_row", "bad", "message"), [(1, 8, "outside a row's 8 elements"),
                                                         (0, -1, "outside the source's 32 elements")])
def test_an_index_outside_the_source_is_refused(per_row: int, bad: int, message: str) -> None:
    idx = np.zeros((4, 8), np.int32)
    idx[1, 3] = bad
    with pytest.raises(ProgramError, match=f"index {bad} is {message}"):
        run_local(_gather_program(per_row, None), {"x": np.zeros((4, 8), np.float32), "i": idx})
