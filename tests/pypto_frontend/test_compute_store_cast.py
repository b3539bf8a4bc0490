"""Three spellings pypto-lib's layers use, written here in their pattern: a scalar ``pl.cast`` between
integer dtypes is typed as its target (an INT32 minimum carried through a loop, its lane offset an INDEX
product cast to INT32, pypto-lib's greedy sampler); ``pl.tile.store(..., shapes=)`` (the ND partition
pypto's FlattenTileNdTo2D injects, spelled out by pypto-lib's gate); ``pl.store(..., atomic=Add)`` in a
kernel. Run at one and two ranks against numpy."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from pldemu.ir.dtypes import DType
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
LANES, WIDTH, CELLS = 4, 16, 8
"""The sampler's lanes (rows) and row width: a flat index is lane * WIDTH + column."""


@pl.program
class LaneArgmin:
    """Each row's minimum column index where the value is the row maximum; the smallest flat index over the
    lanes, an INT32 carried through ``pl.range`` and combined with ``pl.min``."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, hits: pl.Tensor[[LANES, CELLS], pl.INT32], out: pl.Out[pl.Tensor[[1, CELLS], pl.INT32]]) -> None:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="argmin"):
            lanes = pl.load(hits, [0, 0], [LANES, CELLS])
            best = pl.read(lanes, [0, 0])
            for lane in pl.range(1, LANES):
                offset = pl.cast(lane * WIDTH, pl.INT32)
                best = pl.min(best, pl.read(lanes, [lane, 0]) + offset)
            row = pl.full([1, CELLS], dtype=pl.INT32, value=0)
            out = pl.store(pl.add(row, best), [0, 0], out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, hits: pl.Tensor[[NR, LANES, CELLS], pl.INT32],
                  out: pl.Out[pl.Tensor[[NR, 1, CELLS], pl.INT32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(hits[r], out[r], device=r)


TOKENS, D = 4, 32


@pl.program
class RowStores:
    """One token per SPMD block: its scaled row stored with ``shapes=[1, D]``, and every block's row added
    atomically into one INT32 total (``pl.store(..., atomic=Add)``: integer sums are exact in any order)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[TOKENS, D], pl.FP32], counts: pl.Tensor[[TOKENS, D], pl.INT32],
             y: pl.Out[pl.Tensor[[TOKENS, D], pl.FP32]], total: pl.InOut[pl.Tensor[[1, D], pl.INT32]],
             heads: pl.Out[pl.Tensor[[TOKENS, 1], pl.FP32]]) -> None:
        for tok in pl.spmd(TOKENS, name_hint="rows"):
            row = pl.mul(pl.tile.load(x, [tok, 0], [1, D]), 3.0)
            pl.tile.store(row, [tok, 0], y, shapes=[1, D])
            first = pl.set_validshape(pl.mul(pl.tile.load(x, [tok, 0], [1, 8]), 2.0), 1, 1)
            pl.tile.store(first, [tok, 0], heads, shapes=[1, 1])  # the valid box (pypto-lib's gate)
            pl.store(pl.tile.load(counts, [tok, 0], [1, D]), [0, 0], total, atomic=pl.AtomicType.Add)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, TOKENS, D], pl.FP32], counts: pl.Tensor[[NR, TOKENS, D], pl.INT32],
                  y: pl.Out[pl.Tensor[[NR, TOKENS, D], pl.FP32]],
                  total: pl.InOut[pl.Tensor[[NR, 1, D], pl.INT32]],
                  heads: pl.Out[pl.Tensor[[NR, TOKENS, 1], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], counts[r], y[r], total[r], heads[r], device=r)


def _compiled(program: Any, nranks: int) -> Any:
    return ir.compile(program, distributed_config=DistributedConfig(device_ids=list(range(nranks))))


def _hits(nranks: int) -> np.ndarray:
    return np.random.default_rng(7).integers(0, WIDTH, (nranks, LANES, CELLS)).astype(np.int32)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_an_int32_carried_through_a_loop_with_a_cast_index_offset(nranks: int) -> None:
    hits = _hits(nranks)
    out = np.zeros((nranks, 1, CELLS), np.int32)
    _compiled(LaneArgmin, nranks)(hits, out)
    flat = hits[:, :, 0] + np.arange(LANES, dtype=np.int32) * WIDTH
    np.testing.assert_array_equal(out[:, 0], np.repeat(flat.min(axis=1)[:, None], CELLS, axis=1))


def test_a_scalar_cast_is_typed_as_its_target() -> None:
    built, _ = translate(LaneArgmin, 1, (_hits(1), np.zeros((1, 1, CELLS), np.int32)))
    casts = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.SCALAR_CAST]
    assert casts and all(c.attr("dtype") is DType.INT32 and c.type.dtype is DType.INT32 for c in casts)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_rows_stored_with_shapes_and_counts_added_atomically(nranks: int) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((nranks, TOKENS, D)).astype(np.float32)
    counts = rng.integers(-50, 50, (nranks, TOKENS, D)).astype(np.int32)
    y = np.zeros_like(x)
    total = np.full((nranks, 1, D), 5, np.int32)
    heads = np.zeros((nranks, TOKENS, 1), np.float32)
    _compiled(RowStores, nranks)(x, counts, y, total, heads)
    np.testing.assert_array_equal(y, x * np.float32(3.0))
    np.testing.assert_array_equal(heads, x[:, :, :1] * np.float32(2.0))
    np.testing.assert_array_equal(total[:, 0], 5 + counts.sum(axis=1, dtype=np.int32))


@pl.program
class WrongShapes:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[TOKENS, D], pl.FP32], y: pl.Out[pl.Tensor[[TOKENS, D], pl.FP32]]) -> None:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="rows"):
            pl.tile.store(pl.tile.load(x, [0, 0], [1, D]), [0, 0], y, shapes=[2, D])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, TOKENS, D], pl.FP32], y: pl.Out[pl.Tensor[[NR, TOKENS, D], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


def test_shapes_other_than_the_tiles_are_refused_at_the_line() -> None:
    x = np.zeros((1, TOKENS, D), np.float32)
    with pytest.raises(FrontendError, match=re.escape("shapes=[2, 32] is neither the tile's shape [1, 32] nor its valid box")) as err:
        translate(WrongShapes, 1, (x, np.zeros_like(x)))
    assert "test_compute_store_cast.py" in str(err.value)


N_IDS, WIDE = 16, 4
NOISE = 7


@pl.program
class QueryIds:
    """A token id carried through a branch: a cast constant, a cast noise id for active tokens, the anchor's
    INT64 id for the first of each group (pypto-lib's drafter pattern); a cast of a number is a typed
    constant, so the carried value is INT64 throughout."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, anchors: pl.Tensor[[N_IDS], pl.INT64], ids: pl.Out[pl.Tensor[[N_IDS], pl.INT64]],
             active: pl.Scalar[pl.INDEX]) -> None:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="ids"):
            for tok in pl.range(N_IDS):
                tid = pl.cast(0, pl.INT64)
                if tok < active:
                    tid = pl.cast(NOISE, pl.INT64)
                    if tok % WIDE == 0:
                        tid = pl.read(anchors, [tok // WIDE])
                pl.write(ids, [tok], tid)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, anchors: pl.Tensor[[NR, N_IDS], pl.INT64], ids: pl.Out[pl.Tensor[[NR, N_IDS], pl.INT64]],
                  active: pl.Scalar[pl.INDEX]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(anchors[r], ids[r], active, device=r)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_a_cast_number_carried_with_an_int64_read(nranks: int) -> None:
    anchors = (np.arange(nranks * N_IDS, dtype=np.int64).reshape(nranks, N_IDS) + 2**40)
    ids = np.full((nranks, N_IDS), -1, np.int64)
    _compiled(QueryIds, nranks)(anchors, ids, 10)
    want = np.zeros((nranks, N_IDS), np.int64)
    want[:, :10] = NOISE
    for tok in range(0, 10, WIDE):
        want[:, tok] = anchors[:, tok // WIDE]
    np.testing.assert_array_equal(ids, want)


@pl.program
class BranchLocal:
    """A name bound in two branches of one ``if`` with different scalar dtypes and used only inside each (an
    INDEX row from the loop index in one, an INT32 row from a read in the other, under a nested ``if``):
    pypto's SSA scopes each to its branch, so there is nothing to carry and no type to keep."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, sel: pl.Tensor[[N_IDS], pl.INT32], rows: pl.Tensor[[N_IDS], pl.INT32],
             src: pl.Tensor[[N_IDS], pl.INT64], out: pl.Out[pl.Tensor[[N_IDS], pl.INT64]]) -> None:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="pick"):
            for i in pl.range(N_IDS):
                kind = pl.read(sel, [i])
                if kind == 1:
                    at = (i + 1) % N_IDS
                    pl.write(out, [i], pl.read(src, [at]))
                else:
                    row = pl.read(rows, [i])
                    if row >= 0:
                        at = row
                        pl.write(out, [i], pl.read(src, [at]))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, sel: pl.Tensor[[NR, N_IDS], pl.INT32], rows: pl.Tensor[[NR, N_IDS], pl.INT32],
                  src: pl.Tensor[[NR, N_IDS], pl.INT64], out: pl.Out[pl.Tensor[[NR, N_IDS], pl.INT64]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(sel[r], rows[r], src[r], out[r], device=r)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_a_name_local_to_each_branch_keeps_each_branchs_dtype(nranks: int) -> None:
    rng = np.random.default_rng(5)
    sel = rng.integers(0, 2, (nranks, N_IDS)).astype(np.int32)
    rows = rng.integers(-3, N_IDS, (nranks, N_IDS)).astype(np.int32)
    src = rng.integers(-(2**40), 2**40, (nranks, N_IDS)).astype(np.int64)
    out = np.full((nranks, N_IDS), -1, np.int64)
    _compiled(BranchLocal, nranks)(sel, rows, src, out)
    want = np.full((nranks, N_IDS), -1, np.int64)
    for r in range(nranks):
        for i in range(N_IDS):
            if sel[r, i] == 1:
                want[r, i] = src[r, (i + 1) % N_IDS]
            elif rows[r, i] >= 0:
                want[r, i] = src[r, rows[r, i]]
    np.testing.assert_array_equal(out, want)


VALUES = 8


@pl.program
class ScalarCasts:
    """Each FP32 element read as a device scalar and cast to INT32 and INT8 (pypto-lib's sparse-attention
    block mask: ``pl.cast(pl.read(row_max, ...), pl.INT32)``), each INT32 element cast to FP32."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[1, VALUES], pl.FP32], n: pl.Tensor[[1, VALUES], pl.INT32],
             as_i32: pl.Out[pl.Tensor[[1, VALUES], pl.INT32]], as_i8: pl.Out[pl.Tensor[[1, VALUES], pl.INT32]],
             as_f32: pl.Out[pl.Tensor[[1, VALUES], pl.FP32]]) -> None:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="casts"):
            xs = pl.load(x, [0, 0], [1, VALUES])
            ns = pl.load(n, [0, 0], [1, VALUES])
            for i in pl.range(VALUES):
                v = pl.read(xs, [0, i])
                pl.write(as_i32, [0, i], pl.cast(v, pl.INT32))
                pl.write(as_i8, [0, i], pl.cast(pl.cast(v, pl.INT8), pl.INT32))
                pl.write(as_f32, [0, i], pl.cast(pl.read(ns, [0, i]), pl.FP32))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[1, VALUES], pl.FP32], n: pl.Tensor[[1, VALUES], pl.INT32],
                  as_i32: pl.Out[pl.Tensor[[1, VALUES], pl.INT32]], as_i8: pl.Out[pl.Tensor[[1, VALUES], pl.INT32]],
                  as_f32: pl.Out[pl.Tensor[[1, VALUES], pl.FP32]]) -> None:
        self.orch(x, n, as_i32, as_i8, as_f32)


@pytest.mark.launcher
def test_a_device_scalar_cast_between_float_and_integer() -> None:
    x = np.array([[2.75, -2.75, 0.5, -0.5, 3e9, -3e9, np.nan, 200.0]], np.float32)
    n = np.array([[16777217, -16777219, 7, -7, 2**31 - 1, 0, 1, -1]], np.int32)
    as_i32, as_i8, as_f32 = np.zeros_like(n), np.zeros_like(n), np.zeros_like(x)
    _compiled(ScalarCasts, 1)(x, n, as_i32, as_i8, as_f32)
    truncated = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))  # toward zero, saturated, NaN 0
    np.testing.assert_array_equal(as_i32, np.clip(truncated, -2**31, 2**31 - 1).astype(np.int32))
    np.testing.assert_array_equal(as_i8, np.clip(truncated, -128, 127).astype(np.int32))
    np.testing.assert_array_equal(as_f32, n.astype(np.float32))  # round to nearest even


@pl.program
class CastExtent:
    """A static dim cast to INT32 (a typed constant, as pypto's Cast of a ConstInt) used as a load's extent
    (pypto-lib's prefill KV all-gather: ``local_t = pl.cast(pl.tensor.dim(hidden, 0), pl.INT32)``)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[TOKENS, D], pl.FP32], y: pl.Out[pl.Tensor[[TOKENS, D], pl.FP32]]) -> None:
        rows = pl.cast(pl.tensor.dim(x, 0), pl.INT32)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy"):
            pl.store(pl.neg(pl.load(x, [0, 0], [rows, D])), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[TOKENS, D], pl.FP32], y: pl.Out[pl.Tensor[[TOKENS, D], pl.FP32]]) -> None:
        self.orch(x, y)


@pytest.mark.launcher
def test_a_cast_static_dim_is_a_static_extent() -> None:
    x = np.random.default_rng(12).standard_normal((TOKENS, D)).astype(np.float32)
    y = np.zeros_like(x)
    _compiled(CastExtent, 1)(x, y)
    np.testing.assert_array_equal(y, -x)
