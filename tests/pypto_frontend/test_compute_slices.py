"""Slices of tiles, column concatenation and element access in kernels: a subscript of a tile
(``t[:, 0:8]``, at a loop offset, with a scalar index that drops its axis) and ``pl.slice`` of a tile are
pypto's ``tile.slice``; ``pl.concat`` / ``pl.tile.concat`` is ``tile.concat``; ``pl.tile.read`` /
``pl.tile.write`` (and ``pl.read`` / ``pl.write`` of a tile) are ``tile.read`` / ``tile.write``,
``pl.tensor.read`` / ``pl.tensor.write`` the tensor's. Run on two ranks against numpy; the valid box
through a slice; ``pl.create_l1`` / ``pl.gather_row`` (an in-place ``tile.assemble``); ``pl.scatter``'s mask form; ``pl.cmp`` of tensors; refusals at the user's
line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from pldemu.ir import ProgramBuilder
from pldemu.ir.nodes import Const, ListExpr
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.ir.vocabulary import IRTypeError
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
R, C, H = 8, 32, 8


@pl.program
class Slices:
    """y[0]: the tile's halves swapped by subscripts and concat; y[1]: per loop step a [R, H] window at a
    run-time column offset, doubled; y[2]: pl.slice of rows 2..6 and a row picked by a scalar index then
    concatenated with itself; p: a window of a partly valid tile (its valid box carried)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[3, R, C], pl.FP32]],
          p: pl.Out[pl.Tensor[[R, H], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [R, C])
        swapped = pl.concat(t[:, 16:32], t[:, 0:16])
        y = pl.assemble(y, swapped, [0, 0, 0])
        for j in pl.range(C // H):
            col = j * H
            y = pl.assemble(y, pl.mul(t[0:R, col:col + H], 2.0), [1, 0, col])
        middle = pl.slice(t, [4, C], [2, 0])
        y = pl.assemble(y, middle, [2, 0, 0])
        row = pl.reshape(t[5, 0:16], [1, 16])
        y = pl.assemble(y, pl.tile.concat(row, row), [2, 6, 0])
        part = pl.set_validshape(t, 5, 12)
        pl.store(part[:, H:2 * H], [0, 0], p)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, R, C], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 3, R, C], pl.FP32]],
                  ps: pl.Out[pl.Tensor[[NR, R, H], pl.FP32]]) -> None:
        for r in pl.range(2):
            self.k(xs[r], ys[r], ps[r], device=r)


def _args() -> tuple[np.ndarray, ...]:
    xs = np.random.default_rng(5).standard_normal((2, R, C)).astype(np.float32)
    return xs, np.zeros((2, 3, R, C), np.float32), np.full((2, R, H), -1.0, np.float32)


@pytest.mark.launcher
def test_tile_slices_and_concat_run_on_two_ranks() -> None:
    xs, ys, ps = _args()
    ir.compile(Slices, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys, ps)
    np.testing.assert_array_equal(ys[:, 0], np.concatenate([xs[:, :, 16:], xs[:, :, :16]], axis=2))
    np.testing.assert_array_equal(ys[:, 1], 2 * xs)
    np.testing.assert_array_equal(ys[:, 2, :4], xs[:, 2:6])
    np.testing.assert_array_equal(ys[:, 2, 6], np.concatenate([xs[:, 5, :16], xs[:, 5, :16]], axis=1))
    np.testing.assert_array_equal(ys[:, 2, 4:6], 0.0)
    want = np.full((2, R, H), -1.0, np.float32)
    want[:, :5, :4] = xs[:, :5, H:H + 4]  # valid columns 8..11 of the 5 x 12 box; the store writes the box
    np.testing.assert_array_equal(ps, want)


def test_names_translate_onto_tile_slice_and_concat() -> None:
    built, _ = translate(Slices, 2, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert ops.count(Op.TILE_SLICE) == 2 * 6 and ops.count(Op.TILE_CONCAT) == 2 * 2  # one block per rank


@pl.program
class Elements:
    """A count per bucket built element by element into a tile (pypto-lib's MoE meta row), an INT8 tile
    written past its range (wraps as the core's scalar store), elements read back into a tensor."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, idx: pl.Tensor[[16], pl.INT32], counts: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
          small: pl.Out[pl.Tensor[[1, 32], pl.INT8]], picked: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
        meta = pl.tile.full([1, 8], dtype=pl.INT32, value=0)
        for i in pl.range(16):
            b = pl.tensor.read(idx, [i])
            pl.tile.write(meta, [0, b], pl.tile.read(meta, [0, b]) + 1)
        pl.store(meta, [0, 0], counts)
        bytes_ = pl.tile.full([1, 32], dtype=pl.INT8, value=1)
        pl.write(bytes_, [0, 3], pl.read(meta, [0, 0]) + 200)  # an INT32 value past INT8's range
        pl.store(bytes_, [0, 0], small)
        for j in pl.range(8):
            pl.tensor.write(picked, [0, j], pl.read(meta, [0, 7 - j]) * 10)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, idx: pl.Tensor[[NR, 16], pl.INT32], counts: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT32]],
                  small: pl.Out[pl.Tensor[[NR, 1, 32], pl.INT8]],
                  picked: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT32]]) -> None:
        for r in pl.range(2):
            self.k(idx[r], counts[r], small[r], picked[r], device=r)


@pytest.mark.launcher
def test_tile_elements_read_and_written_in_place() -> None:
    idx = np.random.default_rng(9).integers(0, 8, (2, 16)).astype(np.int32)
    counts, picked = np.zeros((2, 1, 8), np.int32), np.zeros((2, 1, 8), np.int32)
    small = np.zeros((2, 1, 32), np.int8)
    ir.compile(Elements, distributed_config=DistributedConfig(device_ids=[0, 1]))(idx, counts, small, picked)
    want = np.stack([np.bincount(row, minlength=8) for row in idx]).astype(np.int32)
    np.testing.assert_array_equal(counts[:, 0], want)
    np.testing.assert_array_equal(picked[:, 0], want[:, ::-1] * 10)
    bytes_ = np.ones((2, 1, 32), np.int8)
    bytes_[:, 0, 3] = (want[:, 0] + 200 + 128) % 256 - 128
    np.testing.assert_array_equal(small, bytes_)


@pl.program
class SliceMatmul:
    """pypto-lib's decode_o_proj spellings: tensor slices (a subscript, pl.slice) into a matmul with b_trans, a
    tensor-level matmul to pypto although pldemu loads each slice where it is made; a row_max without a
    scratch of an op on a slice (tensor-level too)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[16, C], pl.FP32],
          y: pl.Out[pl.Tensor[[R, 16], pl.FP32]], peak: pl.Out[pl.Tensor[[R, 1], pl.FP32]]) -> None:
        acc = pl.matmul(pl.slice(x, [R, 16], [0, 0]), w[0:16, 0:16], b_trans=True, out_dtype=pl.FP32)
        acc = pl.matmul_acc(acc, x[:, 16:32], w[:, 16:32], b_trans=True)
        pl.store(acc, [0, 0], y)
        later = [c for c in range(0, C, 16) if c > 0]  # a static list comprehension: [16]
        mags = pl.abs(pl.slice(x, [R, 16], [0, later[0]]))  # a tensor-level op of a slice: a tensor to pypto
        pl.store(pl.row_max(mags), [0, 0], peak)  # so the reduction's scratch is synthesised

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[16, C], pl.FP32],
                  y: pl.Out[pl.Tensor[[R, 16], pl.FP32]], peak: pl.Out[pl.Tensor[[R, 1], pl.FP32]]) -> None:
        self.k(x, w, y, peak)


@pytest.mark.launcher
def test_b_trans_on_tensor_slices_is_the_tensor_form() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (R, C)).astype(np.float32)
    w = rng.integers(-3, 4, (16, C)).astype(np.float32)
    y, peak = np.zeros((R, 16), np.float32), np.zeros((R, 1), np.float32)
    ir.compile(SliceMatmul, distributed_config=DistributedConfig(device_ids=[0]))(x, w, y, peak)
    np.testing.assert_array_equal(y, x @ w.T)
    np.testing.assert_array_equal(peak[:, 0], np.abs(x[:, 16:]).max(axis=1))


@pl.program
class WindowOfTensorOp:
    """A subscript of a tensor-level op's result (pypto-lib's greedy sampler merges halves of a sorted
    tensor) is a tensor window to pypto: its row_max gets the scratch pypto's conversion synthesises."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], peak: pl.Out[pl.Tensor[[R, 1], pl.FP32]]) -> None:
        mags = pl.abs(x[:, 0:C])
        pl.store(pl.row_max(mags[:, 8:24]), [0, 0], peak)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], peak: pl.Out[pl.Tensor[[R, 1], pl.FP32]]) -> None:
        self.k(x, peak)


@pytest.mark.launcher
def test_a_window_of_a_tensor_level_value_is_tensor_level() -> None:
    x = np.random.default_rng(8).standard_normal((R, C)).astype(np.float32)
    peak = np.zeros((R, 1), np.float32)
    ir.compile(WindowOfTensorOp, distributed_config=DistributedConfig(device_ids=[0]))(x, peak)
    np.testing.assert_array_equal(peak[:, 0], np.abs(x[:, 8:24]).max(axis=1))


@pl.program
class Interleave:
    """pypto-lib's dspark attention re-interleaves RoPE halves with the mask form of pl.tensor.scatter."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [R, C])
        out = pl.full([R, C], dtype=pl.FP32, value=0.0)
        out = pl.tensor.scatter(t[:, 0:16], mask_pattern=pl.tile.MaskPattern.P0101, dst=out)
        out = pl.scatter(t[:, 16:32], mask_pattern=pl.tile.MaskPattern.P1010, dst=out)
        pl.store(out, [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        self.k(x, y)


@pytest.mark.launcher
def test_mask_scatter_interleaves() -> None:
    x = np.random.default_rng(6).standard_normal((R, C)).astype(np.float32)
    y = np.zeros((R, C), np.float32)
    ir.compile(Interleave, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    want = np.empty_like(x)
    want[:, 0::2], want[:, 1::2] = x[:, :16], x[:, 16:]
    np.testing.assert_array_equal(y, want)


@pl.program
class Compare:
    """pypto-lib's lm_head greedy sampler: pl.cmp of tensor slices is 0 / 1 in the lhs dtype (pypto's CmpConv)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], gt: pl.Out[pl.Tensor[[R, 16], pl.FP32]],
          eq: pl.Out[pl.Tensor[[R, 16], pl.INT32]]) -> None:
        pl.store(pl.cmp(x[:, 0:16], 0.0, cmp_type=4), [0, 0], gt)
        same = pl.cmp(x[:, 0:16], x[:, 16:32], cmp_type=0)
        pl.store(pl.cast(same, target_type=pl.INT32), [0, 0], eq)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], gt: pl.Out[pl.Tensor[[R, 16], pl.FP32]],
                  eq: pl.Out[pl.Tensor[[R, 16], pl.INT32]]) -> None:
        self.k(x, gt, eq)


@pytest.mark.launcher
def test_tensor_compare_is_zero_or_one() -> None:
    x = np.random.default_rng(2).integers(-2, 3, (R, C)).astype(np.float32)
    gt, eq = np.full((R, 16), 7.0, np.float32), np.full((R, 16), 7, np.int32)
    ir.compile(Compare, distributed_config=DistributedConfig(device_ids=[0]))(x, gt, eq)
    np.testing.assert_array_equal(gt, (x[:, :16] > 0).astype(np.float32))
    np.testing.assert_array_equal(eq, (x[:, :16] == x[:, 16:]).astype(np.int32))


P, G = 12, 8


@pl.program
class PagedGather:
    """A kernel-driven paged gather (pypto-lib's sparse attention): rows of a GM pool picked by a block
    table land in an L1 accumulator (pl.create_l1 + pl.gather_row), as rows and, transposed, as columns;
    both feed a matmul."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, q: pl.Tensor[[2, 16], pl.FP32], pool: pl.Tensor[[P, 16], pl.FP32], table: pl.Tensor[[G], pl.INT32],
          s: pl.Out[pl.Tensor[[2, G], pl.FP32]], st: pl.Out[pl.Tensor[[2, G], pl.FP32]]) -> None:
        kv = pl.create_l1([G, 16], pl.FP32)
        kv_t = pl.create_l1([16, G], pl.FP32, transpose=True)
        for r in pl.range(G):
            phys = pl.cast(pl.tensor.read(table, [r]), pl.INDEX)
            kv = pl.gather_row(kv, pool, [r, 0], [phys, 0], [1, 16])
            kv_t = pl.gather_row(kv_t, pool, [0, r], [phys, 0], [1, 16], transpose=True)
        pl.store(pl.matmul(pl.load(q, [0, 0], [2, 16]), kv, b_trans=True), [0, 0], s)
        pl.store(pl.matmul(pl.load(q, [0, 0], [2, 16]), kv_t), [0, 0], st)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, q: pl.Tensor[[2, 16], pl.FP32], pool: pl.Tensor[[P, 16], pl.FP32],
                  table: pl.Tensor[[G], pl.INT32], s: pl.Out[pl.Tensor[[2, G], pl.FP32]],
                  st: pl.Out[pl.Tensor[[2, G], pl.FP32]]) -> None:
        self.k(q, pool, table, s, st)


@pytest.mark.launcher
def test_paged_gather_into_l1_feeds_a_matmul() -> None:
    rng = np.random.default_rng(8)
    q = rng.integers(-3, 4, (2, 16)).astype(np.float32)
    pool = rng.integers(-3, 4, (P, 16)).astype(np.float32)
    table = rng.permutation(P)[:G].astype(np.int32)
    s, st = np.zeros((2, G), np.float32), np.zeros((2, G), np.float32)
    ir.compile(PagedGather, distributed_config=DistributedConfig(device_ids=[0]))(q, pool, table, s, st)
    np.testing.assert_array_equal(s, q @ pool[table].T)
    np.testing.assert_array_equal(st, q @ pool[table].T)


def _list(items: list[int]) -> ListExpr:
    return ListExpr(tuple(Const(i) for i in items))


def test_slice_type_carries_the_valid_box_and_concat_checks_rows() -> None:
    fb = ProgramBuilder("s").function()
    t = fb.pld.tile.set_validshape(fb.pld.tile.create([R, C], "fp32"), [5, 12])
    window = make_call(Op.TILE_SLICE, [t, _list([4, 16]), _list([2, 8])])
    assert [int(v.value) for v in window.type.valid_shape] == [3, 4]  # type: ignore[union-attr]
    with pytest.raises(IRTypeError, match="runs off"):
        make_call(Op.TILE_SLICE, [t, _list([4, 16]), _list([6, 0])])
    other = fb.pld.tile.create([4, 8], "fp32")
    with pytest.raises(IRTypeError, match="row count must match, got 8 vs 4"):
        make_call(Op.TILE_CONCAT, [t, other])
    with pytest.raises(IRTypeError, match="same dtype"):
        make_call(Op.TILE_CONCAT, [t, fb.pld.tile.create([R, 16], "fp16")])


def test_assemble_checks_the_box_that_moves_not_the_window() -> None:
    """gather_row's static window may overhang its accumulator; its valid box is what is written."""
    fb = ProgramBuilder("a").function()
    acc = fb.pld.tile.create([16, 16], "fp32")
    rows = fb.let("rows", 5)
    moving = fb.pld.tile.set_validshape(fb.pld.tile.create([16, 16], "fp32"), [rows, 16])
    make_call(Op.TILE_ASSEMBLE, [acc, moving, _list([8, 0])])  # a run-time box: checked when it runs
    fixed = fb.pld.tile.set_validshape(fb.pld.tile.create([16, 16], "fp32"), [8, 16])
    make_call(Op.TILE_ASSEMBLE, [acc, fixed, _list([8, 0])])
    with pytest.raises(IRTypeError, match=r"source box \[8, 16\] at axis 0 offset 9 runs off"):
        make_call(Op.TILE_ASSEMBLE, [acc, fixed, _list([9, 0])])
    with pytest.raises(IRTypeError, match="runs off"):
        make_call(Op.TILE_ASSEMBLE, [acc, fb.pld.tile.create([16, 16], "fp32"), _list([1, 0])])


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if mistake == "outside":
                t = t[:, 24:40]  # MARK-outside
            if mistake == "element":
                t[1, 2] = t[0, 0]  # MARK-element
            if mistake == "clamp":
                t = pl.slice(t, [4, 8], [6, 0], clamp=True)  # MARK-clamp
            if mistake == "tile-clamp":
                t = pl.tile.slice(t, [4, 8], [0, 0], clamp=True)  # MARK-tile-clamp
            if mistake == "pad":
                t = pl.slice(t, [4, 8], [0, 0], pad_value=pl.PadValue.zero)  # MARK-pad
            if mistake == "valid-wide":
                t = pl.slice(t, [4, 8], [0, 0], valid_shape=[4, 9])  # MARK-valid-wide
            if mistake == "window":
                t[0:2, 0:8] = t[0:2, 0:16]  # MARK-window
            if mistake == "rows":
                t = pl.concat(t, t[0:4, :])  # MARK-rows
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("outside", "axis 1 region [24, 40) is outside its 32 elements"),
    ("element", "pypto refuses it: Subscript-write source must also be a tile, got ScalarType"),
    ("clamp", "pypto refuses it: pl.slice: clamp=True is not supported for a Tile. An on-chip window has no "
              "clamping mechanism"),
    ("tile-clamp", "pl.tile.slice() got an unexpected keyword argument 'clamp'"),
    ("pad", "pypto refuses it: pl.slice of a tile with pad_value=zero: a tile's slice is pto.subview"),
    ("valid-wide", "pypto refuses it: tile.slice valid_shape 1 is 9, which exceeds the window extent 8"),
    ("window", "the source must be a fp32 tile of the window's extents [2, 8], got fp32 [2, 16]"),
    ("rows", "row count must match, got 8 vs 4"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    src, start = inspect.getsourcelines(inspect.getmodule(_mistake))  # type: ignore[arg-type]
    want = next(max(start, 1) + i for i, line in enumerate(src) if f"MARK-{mistake}" in line)
    assert err.value.line == want, str(err.value)


@pl.program
class TileElements:
    """A tile's element read by subscript (pypto's tile.read) scales a window; windows of the tile written by
    subscript (pypto's ``t = tile.assemble(t, src, offsets)``: a new value, the name copied before keeps the old)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[3, R, C], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [R, C])
        before = t
        corner = t[R - 1, C - 1]
        t[2:4, 8:16] = pl.mul(t[0:2, 0:8], corner)
        t[5, 0:8] = t[6:7, 8:16]
        y = pl.assemble(y, t, [0, 0, 0])
        y = pl.assemble(y, before, [1, 0, 0])
        # pypto's tile form (pypto-lib's pro hc_pre): a one-valid-row tile assembled into rows of a zero tile
        row = pl.set_validshape(pl.load(x, [0, 0], [1, C]), 1, 4)
        z0 = pl.tile.full([R, C], dtype=pl.FP32, value=0.0)
        z1 = pl.tile.assemble(z0, row, [1, 0])
        z2 = pl.tile.assemble(z1, row, [3, 8])
        y = pl.assemble(y, z2, [2, 0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[3, R, C], pl.FP32]]) -> None:
        self.k(x, y)


def test_tile_subscripts_read_an_element_and_write_windows() -> None:
    built, _ = translate(TileElements, 1, (np.zeros((R, C), np.float32), np.zeros((3, R, C), np.float32)))
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert ops.count(Op.TILE_READ) == 1 and ops.count(Op.TILE_ASSEMBLE) == 4


@pytest.mark.launcher
def test_tile_elements_run() -> None:
    x = np.random.default_rng(8).standard_normal((R, C)).astype(np.float32)
    y = np.zeros((3, R, C), np.float32)
    ir.compile(TileElements, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    want = x.copy()
    want[2:4, 8:16] = x[0:2, 0:8] * x[R - 1, C - 1]
    want[5, 0:8] = want[6, 8:16]
    np.testing.assert_array_equal(y[0], want)
    np.testing.assert_array_equal(y[1], x)
    rows = np.zeros((R, C), np.float32)
    rows[1, 0:4], rows[3, 8:12] = x[0, 0:4], x[0, 0:4]  # only the valid box moves
    np.testing.assert_array_equal(y[2], rows)


@pl.program
class NarrowedSlices:
    """``valid_shape=`` on slices of a tile: a static box, a run-time row count (``pl.tile.slice``), and a request
    wider than a partly valid source's window, which narrows to the source (pypto: it never widens); each
    assembled into y, which takes only the valid box."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Scalar[pl.INDEX],
          y: pl.Out[pl.Tensor[[3, R, C], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [R, C])
        y = pl.assemble(y, pl.slice(t, [4, 16], [2, 8], valid_shape=[3, 10]), [0, 0, 0])
        y = pl.assemble(y, pl.tile.slice(t, [R, 16], [0, 16], valid_shape=[n, 16]), [1, 0, 0])
        top = pl.slice(t, [4, 16], [0, 0], valid_shape=[2, 16])
        y = pl.assemble(y, pl.slice(top, [4, 8], [0, 8], valid_shape=[4, 8]), [2, 0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[3, R, C], pl.FP32]]) -> None:
        self.k(x, 5, y)


def test_narrowed_slices_keep_the_smaller_box() -> None:
    built, _ = translate(NarrowedSlices, 1, (np.zeros((R, C), np.float32), np.zeros((3, R, C), np.float32)))
    boxes = [c.type.valid_shape for f in built.program.functions for c in function_calls(f)
             if c.op is Op.TILE_SET_VALIDSHAPE]
    assert [int(v.value) for v in boxes[0]] == [3, 10]  # type: ignore[union-attr]
    assert [int(v.value) for v in boxes[-1]] == [2, 8]  # type: ignore[union-attr]


@pytest.mark.launcher
def test_narrowed_slices_run() -> None:
    x = np.random.default_rng(9).standard_normal((R, C)).astype(np.float32)
    y = np.zeros((3, R, C), np.float32)
    ir.compile(NarrowedSlices, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    want = np.zeros_like(y)
    want[0, 0:3, 0:10] = x[2:5, 8:18]
    want[1, 0:5, 0:16] = x[0:5, 16:32]
    want[2, 0:2, 0:8] = x[0:2, 8:16]
    np.testing.assert_array_equal(y, want)


MIX, PAD = 24, 32  # pypto-lib's hc_pre: MIX_HC rows read through a MIX_PAD-row window


@pl.program
class PaddedWindow:
    """A tensor slice whose window overhangs the tensor, its valid_shape naming the rows that exist (pypto
    bounds only what a tensor slice reads: pypto-lib's ``pl.slice(hc_fn, [MIX_PAD, K], [0, k0],
    valid_shape=[MIX_HC, K])``); the valid rows are stored back."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[MIX, C], pl.FP32], y: pl.Out[pl.Tensor[[MIX, C], pl.FP32]]) -> None:
        for kb in pl.range(2):
            part = pl.slice(w, [PAD, 16], [0, kb * 16], valid_shape=[MIX, 16])
            y = pl.assemble(y, pl.mul(part, 2.0), [0, kb * 16])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, w: pl.Tensor[[MIX, C], pl.FP32], y: pl.Out[pl.Tensor[[MIX, C], pl.FP32]]) -> None:
        self.k(w, y)


@pytest.mark.launcher
def test_a_padded_window_reads_its_valid_rows() -> None:
    w = np.random.default_rng(10).standard_normal((MIX, C)).astype(np.float32)
    y = np.zeros_like(w)
    ir.compile(PaddedWindow, distributed_config=DistributedConfig(device_ids=[0]))(w, y)
    np.testing.assert_array_equal(y, w * 2.0)


def test_a_valid_shape_past_the_tensor_is_refused() -> None:
    @pl.program
    class Past:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, w: pl.Tensor[[MIX, C], pl.FP32], y: pl.Out[pl.Tensor[[MIX, C], pl.FP32]]) -> None:
            part = pl.slice(w, [PAD, C], [0, 0], valid_shape=[MIX + 1, C])  # MARK-past
            y = pl.assemble(y, part, [0, 0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, w: pl.Tensor[[MIX, C], pl.FP32], y: pl.Out[pl.Tensor[[MIX, C], pl.FP32]]) -> None:
            self.k(w, y)

    with pytest.raises(FrontendError, match=re.escape("w: axis 0 region [0, 25) is outside its 24 elements")) as err:
        translate(Past, 1, (np.zeros((MIX, C), np.float32), np.zeros((MIX, C), np.float32)))
    src, start = inspect.getsourcelines(inspect.getmodule(_mistake))  # type: ignore[arg-type]
    assert err.value.line == next(max(start, 1) + i for i, line in enumerate(src) if "MARK-past" in line)
