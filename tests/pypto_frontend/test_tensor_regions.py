"""Tensor-level ops in a kernel, as pypto's ConvertTensorToTileOps lowers them: slices (``t[a:b, c:d]``,
``pl.slice``, ``pl.tensor.slice``) are tile loads, slice assignment and ``pl.assemble`` tile stores, a
full-rank scalar subscript ``t[i]`` is ``tensor.read``, unified ``pl.add`` / ``pl.cast`` take tensors,
``pl.tensor.dim``; and the integer dtypes. Translation checks, one 2-rank run, the bad-input catalogue."""

from __future__ import annotations

import inspect
import re

import ml_dtypes
import numpy as np
import pytest

from pldemu.ir.nodes import NR as IR_NR
from pldemu.ir.nodes import BinOp, Const, For, Program
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls, walk_stmts
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS = 4
COLS = 16  # an fp16 row of 16 is 32 bytes: ptoas aligns every tile row to 32


def _calls(program: Program, op: Op) -> list:  # type: ignore[type-arg]
    return [c for f in program.functions for c in function_calls(f) if c.op is op]


def _ints(lst) -> list[int | None]:  # type: ignore[no-untyped-def]
    return [getattr(i, "value", None) for i in lst.items]


@pl.program
class SliceExchange:
    """Each rank pushes its rows (slices of x, made in a pl.range over pl.tensor.dim) into the peer's
    window, then gathers them back through a permutation read from an INT32 tensor (``perm[i]``) with
    window slices at run-time offsets, and fills a rank-3 output by row (``z[1] = ...``: a dropped
    leading axis) from unified tensor-level ``pl.add`` / ``pl.cast`` and ``pl.assemble``."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], h: pl.Tensor[[ROWS, COLS], pl.FP16],
          perm: pl.Tensor[[ROWS], pl.INT32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          z: pl.Out[pl.Tensor[[3, ROWS, COLS], pl.FP32]],
          win: pld.DistributedTensor[[ROWS, COLS], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
          peer: pl.Scalar[pl.INDEX]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        rows = pl.tensor.dim(x, 0)
        for r in pl.range(0, rows, 2):
            pld.tile.remote_store(x[r:r + 2, 0:COLS], win, peer, [r, 0])
        pld.system.notify(sig, peer, [0, 0], 1)
        pld.system.wait(sig, [0, 0], 1)
        for i in pl.range(pl.tensor.dim(perm, -1)):
            src = perm[i]
            y[i:i + 1, :] = win[src:src + 1, 0:COLS]
        z[0] = x
        z[1, :, 0:COLS] = pl.add(pl.cast(h, pl.FP32), x)
        twice = pl.mul(pl.slice(y, [ROWS, COLS], [0, 0]), 2.0)
        z = pl.tensor.assemble(z, pl.tensor.sub(twice, y), [2, 0, 0])
        z[2, 0:2, :] = pl.tensor.slice(z, [1, 2, COLS], [0, 1, 0], drop_dims=[0])
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], h: pl.Tensor[[ROWS, COLS], pl.FP16],
             perm: pl.Tensor[[ROWS], pl.INT32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             z: pl.Out[pl.Tensor[[3, ROWS, COLS], pl.FP32]],
             win: pld.DistributedTensor[[ROWS, COLS], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
             peer: pl.Scalar[pl.INDEX]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.k(x, h, perm, y, z, win, sig, peer)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32], hs: pl.Tensor[[NR, ROWS, COLS], pl.FP16],
                  perms: pl.Tensor[[NR, ROWS], pl.INT32], ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
                  zs: pl.Out[pl.Tensor[[NR, 3, ROWS, COLS], pl.FP32]]) -> None:
        wbuf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        n = pl.tensor.dim(xs, 0)
        for r in pl.range(pld.world_size()):  # pypto's device= loop is bounded by world_size() or a constant
            self.orch(xs[r], hs[r], perms[r], ys[r], zs[r], pld.window(wbuf, [ROWS, COLS], dtype=pl.FP32),
                      pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % n, device=r)


def _exchange_args(n: int) -> tuple[np.ndarray, ...]:
    xs = np.arange(n * ROWS * COLS, dtype=np.float32).reshape(n, ROWS, COLS)
    hs = (xs * 0.5).astype(np.float16)
    perms = np.array([np.roll(np.arange(ROWS), r + 1) for r in range(n)], np.int32)
    return xs, hs, perms, np.zeros_like(xs), np.zeros((n, 3, ROWS, COLS), np.float32)


def test_slices_assignments_and_reads_translate_onto_tile_loads_stores_and_reads() -> None:
    built, _ = translate(SliceExchange, 2, _exchange_args(2))
    loads = _calls(built.program, Op.TILE_LOAD)
    stores = _calls(built.program, Op.TILE_STORE)
    read = next(c for c in _calls(built.program, Op.TENSOR_READ) if c.args[0].name == "perms")
    assert _ints(read.args[1]) == [None]  # perm[i] at the loop variable: a scalar read
    # x[r:r + 2, 0:COLS]: a [2, COLS] load at the loop variable's row.
    assert any(c.args[0].name == "xs" and _ints(c.args[2]) == [2, COLS] for c in loads)
    # y[i:i + 1, :] = win[src:src + 1, 0:COLS]: a [1, COLS] load of the window, stored into y.
    assert any(c.args[0].name == "wbuf" and _ints(c.args[2]) == [1, COLS] for c in loads)
    assert any(c.args[2].name == "ys" and c.args[0].type.shape == (1, COLS) for c in stores)
    # z[1, :, 0:COLS] = ...: the dropped leading axis folds into the rows of a [3 * ROWS, COLS] view.
    views = _calls(built.program, Op.TENSOR_VIEW)
    assert any(_ints(v.args[1]) == [3 * ROWS, COLS] for v in views)
    assert any(_ints(c.args[1]) == [ROWS, 0] for c in stores)
    assert any(_ints(c.args[1]) == [2 * ROWS, 0] for c in stores)  # the rank-2 assemble at [2, 0, 0]
    assert any(c.args[0].name.startswith("zs_view") and _ints(c.args[1]) == [1, 0] for c in loads)  # z[0, 1:3, :]
    assert len(_calls(built.program, Op.TILE_CAST)) == 2 and len(_calls(built.program, Op.TILE_ADD)) == 2


@pytest.mark.launcher
def test_slice_exchange_runs_on_two_ranks() -> None:
    xs, hs, perms, ys, zs = _exchange_args(2)
    ir.compile(SliceExchange, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, hs, perms, ys, zs)
    got_from_peer = xs[::-1]
    for r in range(2):
        np.testing.assert_array_equal(ys[r], got_from_peer[r][perms[r]])
        np.testing.assert_array_equal(zs[r, 0], xs[r])
        np.testing.assert_array_equal(zs[r, 1], hs[r].astype(np.float32) + xs[r])
        np.testing.assert_array_equal(zs[r, 2], np.r_[xs[r][1:3], ys[r][2:]])


@pl.program
class Clamped:
    """A tail read past the tensor's end with clamp=True, valid_shape narrowed, and a row of a rank-3
    tensor read by a leading scalar index (``t[b]``)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], t: pl.Tensor[[2, ROWS, COLS], pl.FP32],
          y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], row: pl.Scalar[pl.INDEX]) -> None:
        tail = pl.slice(x, [4, COLS], [row, 0], clamp=True)
        narrow = pl.tensor.slice(x, [2, COLS], [0, 0], valid_shape=[1, COLS])
        pl.assemble(y, pl.add(t[1], t[0, :, :]), [0, 0])
        y[0:4, :] = tail
        y[0:2, :] = narrow
        pl.assemble(y, tail, [2, 0])  # pypto moves the source's valid rows only: in bounds

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[ROWS, COLS], pl.FP32], ts: pl.Tensor[[2, ROWS, COLS], pl.FP32],
                  ys: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(xs, ts, ys, 2)


def test_clamp_and_valid_shape_narrow_the_load() -> None:
    x = np.zeros((ROWS, COLS), np.float32)
    built, _ = translate(Clamped, 1, (x, np.zeros((2, ROWS, COLS), np.float32), x.copy()))
    loads = [c for c in _calls(built.program, Op.TILE_LOAD) if c.args[0].name == "xs"]
    assert _ints(loads[0].args[3]) == [2, COLS]  # row 2 of 4: two valid rows (4 - 2, cut to the edge)
    assert _ints(loads[1].args[3]) == [1, COLS]
    t_loads = [c for c in _calls(built.program, Op.TILE_LOAD) if c.args[0].name != "xs"]
    assert [_ints(c.args[1]) for c in t_loads] == [[ROWS, 0], [0, 0]]  # t[1] and t[0, :, :] in the view
    assert [_ints(c.args[1]) for c in _calls(built.program, Op.TILE_STORE)] == [[0, 0], [0, 0], [0, 0], [2, 0]]


@pytest.mark.launcher
def test_clamped_and_narrowed_slices_move_their_valid_rows_only() -> None:
    x = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    t = np.stack([x * 10, x * 100])
    y = np.full_like(x, -1)
    ir.compile(Clamped, distributed_config=DistributedConfig(device_ids=[0]))(x, t, y)
    np.testing.assert_array_equal(y, np.r_[x[0:1], x[3:4], x[2:4]])


@pl.program
class RuntimeClamp:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          row: pl.Scalar[pl.INDEX]) -> None:
        for r in pl.range(row):
            y[0:4, :] = pl.slice(x, [4, COLS], [r, 0], clamp=True)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(xs, ys, 1)


def test_clamp_at_a_run_time_offset_is_a_min() -> None:
    x = np.zeros((ROWS, COLS), np.float32)
    built, _ = translate(RuntimeClamp, 1, (x, x.copy()))
    (load,) = _calls(built.program, Op.TILE_LOAD)
    assert _ints(load.args[3]) == [None, COLS] and isinstance(load.args[3].items[0], BinOp)


@pl.program
class IntDtypes:
    """The integer dtypes and BOOL as annotations, copied by slices; an INT64 scalar read."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[2, COLS], pl.INT8], b: pl.Out[pl.Tensor[[2, COLS], pl.INT8]],
          c: pl.Tensor[[1, COLS], pl.UINT32], d: pl.Out[pl.Tensor[[1, COLS], pl.UINT32]],
          e: pl.Tensor[[COLS], pl.INT64], f: pl.Out[pl.Tensor[[1, 1], pl.INT64]],
          g: pl.Tensor[[1, COLS], pl.BOOL], u: pl.Tensor[[1, COLS], pl.UINT8], s: pl.Tensor[[1, COLS], pl.INT16],
          w: pl.Tensor[[1, COLS], pl.UINT16]) -> None:
        b[0:2, :] = a[0:2, :]
        d[0:1, 0:COLS] = c
        pl.write(f, [0, 0], e[COLS - 1])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[2, COLS], pl.INT8], b: pl.Out[pl.Tensor[[2, COLS], pl.INT8]],
                  c: pl.Tensor[[1, COLS], pl.UINT32], d: pl.Out[pl.Tensor[[1, COLS], pl.UINT32]],
                  e: pl.Tensor[[COLS], pl.INT64], f: pl.Out[pl.Tensor[[1, 1], pl.INT64]],
                  g: pl.Tensor[[1, COLS], pl.BOOL], u: pl.Tensor[[1, COLS], pl.UINT8],
                  s: pl.Tensor[[1, COLS], pl.INT16], w: pl.Tensor[[1, COLS], pl.UINT16]) -> None:
        self.k(a, b, c, d, e, f, g, u, s, w)


def test_integer_dtypes_and_bool() -> None:
    assert [(t.name, t.get_byte()) for t in (pl.INT8, pl.INT16, pl.INT64, pl.UINT8, pl.UINT16, pl.UINT32, pl.BOOL)] == [
        ("INT8", 1), ("INT16", 2), ("INT64", 8), ("UINT8", 1), ("UINT16", 2), ("UINT32", 4), ("BOOL", 1)]
    args = (np.zeros((2, COLS), np.int8), np.zeros((2, COLS), np.int8), np.zeros((1, COLS), np.uint32),
            np.zeros((1, COLS), np.uint32), np.zeros(COLS, np.int64), np.zeros((1, 1), np.int64),
            np.zeros((1, COLS), np.bool_), np.zeros((1, COLS), np.uint8), np.zeros((1, COLS), np.int16),
            np.zeros((1, COLS), np.uint16))
    built, _ = translate(IntDtypes, 1, args)
    (read,) = _calls(built.program, Op.TENSOR_READ)
    assert read.type.dtype.value == "int64" and _ints(read.args[1]) == [COLS - 1]
    assert {c.args[2].name for c in _calls(built.program, Op.TILE_STORE)} == {"b", "d"}


def test_dtype_mismatch_of_a_host_tensor_names_the_annotation() -> None:
    args = [np.zeros((2, COLS), np.int8)] * 2 + [np.zeros((1, COLS), np.int32)] * 2 + [
        np.zeros(COLS, np.int64), np.zeros((1, 1), np.int64), np.zeros((1, COLS), np.bool_),
        np.zeros((1, COLS), np.uint8), np.zeros((1, COLS), np.int16), np.zeros((1, COLS), np.uint16)]
    with pytest.raises(FrontendError, match="is int32, its annotation says uint32"):
        translate(IntDtypes, 1, tuple(args))


# -- the bad-input catalogue: one FrontendError at the user's line ----------------------------------


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


def _kernel_mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[1], pl.INT32],
              y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], t: pl.Tensor[[2, ROWS, COLS], pl.FP32]) -> None:
            m = n[0]
            if mistake == "rank":
                y[0:2, :] = x[0:2, 0:COLS, 0]  # MARK-rank
            elif mistake == "bounds":
                y[0:4, :] = x[2:6, :]  # MARK-bounds
            elif mistake == "static-extent":
                y[0:2, :] = x[0:m, :]  # MARK-static-extent
            elif mistake == "shape":
                y[0:2, :] = x  # MARK-shape
            elif mistake == "element-write":
                y[0, 1] = m  # MARK-element-write
            elif mistake == "dtype":
                y[:, :] = pl.cast(x, pl.FP16)  # MARK-dtype
            elif mistake == "step":
                y[0:2, :] = x[0:4:2, :]  # MARK-step
            elif mistake == "inner-index":
                y[0:2, 0:1] = x[0:2, 1]  # MARK-inner-index
            elif mistake == "slice-rank":
                y[0:2, :] = pl.slice(x, [2, COLS], [0])  # MARK-slice-rank
            elif mistake == "slice-dynamic":
                y[0:2, :] = pl.tensor.slice(x, [m, COLS], [0, 0])  # MARK-slice-dynamic
            elif mistake == "slice-bounds":
                y[0:2, :] = pl.slice(x, [2, COLS], [3, 0])  # MARK-slice-bounds
            elif mistake == "drop-dims":
                y[0:2, :] = pl.slice(x, [2, COLS], [0, 0], drop_dims=[0])  # MARK-drop-dims
            elif mistake == "dim-axis":
                y[0:2, :] = x[0:pl.tensor.dim(x, 2), :]  # MARK-dim-axis
            elif mistake == "assemble-bounds":
                pl.assemble(y, pl.load(x, [0, 0], [2, COLS]), [3, 0])  # MARK-assemble-bounds
            elif mistake == "assemble-rank":
                pl.assemble(t, x, [0, 0])  # MARK-assemble-rank
            elif mistake == "add-scalar":
                y[:, :] = pl.add(m, x)  # MARK-add-scalar
            elif mistake == "subscript-count":
                y[0:2, :, 0] = x[0:2, :]  # MARK-subscript-count
            elif mistake == "tile-subscript":
                y[0:2, :] = pl.add(x, x)[0, 1]  # MARK-tile-subscript

        @pl.function(type=pl.FunctionType.InCore)
        def takes(self, x: pl.Tensor[[2, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            y[0:2, :] = x[1:3, :]  # MARK-view-bounds

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[1], pl.INT32],
                 y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], t: pl.Tensor[[2, ROWS, COLS], pl.FP32]) -> None:
            if mistake == "view-bounds":
                self.takes(x[2:4, :], y)
            elif mistake == "assemble-atomic":
                pl.assemble(y, x, [0, 0], atomic=pl.AtomicType.Add)  # MARK-assemble-atomic
            else:
                self.k(x, n, y, t)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[1], pl.INT32],
                      y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], t: pl.Tensor[[2, ROWS, COLS], pl.FP32]) -> None:
            if mistake == "host-dim":
                self.orch(x, n, y, t, pl.tensor.dim(x, 3))  # MARK-host-dim
            self.orch(x, n, y, t)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("rank", "x has 2 dims, the subscript 3 indices"),
    ("bounds", "x: axis 0 region [2, 6) is outside its 4 elements"),
    ("static-extent", "a slice extent must be static (a tile's shape is): n_val - 0 is not"),
    ("shape", "the region of y is [2, 16], the value [4, 16]"),
    ("element-write", "an element write is not supported (as in pypto): use pl.write"),
    ("dtype", "y is fp32, the value fp16 (pl.cast it first)"),
    ("step", "a slice step is not supported in 'x[0:4:2, :]'"),
    ("inner-index", "pldemu drops only leading scalar-indexed axes (t[i, a:b]), not axes [1] of 2"),
    ("slice-rank", "x has 2 dims, the region 1 offsets and 2 extents"),
    ("slice-dynamic", "pl.tensor.slice: shape (a slice extent must be static) must be a list of static ints"),
    ("slice-bounds", "x: axis 0 region [3, 5) is outside its 4 elements"),
    ("drop-dims", "pl.slice: drop_dims [0] must name unit axes of shape [2, 16]"),
    ("dim-axis", "pl.tensor.dim: axis must be a static int in [-2, 2) for x (2 dims), got 2"),
    ("assemble-atomic", "pl.assemble: atomic=pl.AtomicType.Add outside a kernel: pypto has no atomic combine at the "
                        "orchestration level"),
    ("assemble-bounds", "y: axis 0 region [3, 5) is outside its 4 elements"),
    ("assemble-rank", "t has 3 dims, the source 2 and the offset 2 entries"),
    ("add-scalar", "pl.add: lhs must be a tile or a tensor, got Var(n_val)"),
    ("subscript-count", "y has 2 dims, the subscript 3 indices"),
    ("tile-subscript", "y[0:2, :] = ...: the value must be a tensor or a tile, got Var(val)"),  # a scalar: tile.read
    ("view-bounds", "x[view]: axis 0 region [1, 3) is outside its 2 elements"),  # a slice passed is a view
    ("host-dim", "pl.tensor.dim: axis must be a static int in [-2, 2), got 3"),
])
def test_tensor_op_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((ROWS, COLS), np.float32), np.zeros(1, np.int32), np.zeros((ROWS, COLS), np.float32),
            np.zeros((2, ROWS, COLS), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_kernel_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def test_bf16_slice_copy_keeps_the_dtype() -> None:
    @pl.program
    class Bf16:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.BF16], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.BF16]]) -> None:
            y[1:3, :] = x[0:2, :]

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.BF16], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.BF16]]) -> None:
            self.k(x, y)

    x = np.zeros((ROWS, COLS), ml_dtypes.bfloat16)
    built, _ = translate(Bf16, 1, (x, x.copy()))
    (store,) = _calls(built.program, Op.TILE_STORE)
    assert _ints(store.args[1]) == [1, 0] and store.args[0].type.dtype.value == "bf16"
    assert isinstance(store.args[1].items[0], Const)


@pl.program
class RankCountDims:
    """``pl.tensor.dim`` of a dim that is the rank count is NR's SymInt, at HOST level (a window shaped by it
    is declared ``[NR, 1]``, as pldemu's recipes want) and in a kernel (a loop over the peers)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, sig: pld.DistributedTensor[[NR, 1], pl.INT32]) -> None:
        me = pld.rank(pld.get_comm_ctx(sig))
        for p in pl.range(pl.tensor.dim(sig, 0)):
            pld.system.notify(sig, p, [me, 0], 1)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, 1], pl.FP32]) -> None:
        sbuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.k(pld.window(sbuf, [pl.tensor.dim(xs, -2), 1], dtype=pl.INT32), device=r)


def test_a_rank_count_dim_is_nr() -> None:
    built, _ = translate(RankCountDims, 3, (np.zeros((3, 1), np.float32),))
    assert built.program.buffer("sbuf").var.type.shape[0] == IR_NR
    loops = [s for f in built.program.functions for s in walk_stmts(f.body.stmts) if isinstance(s, For)]
    assert len(loops) == 3 and all(getattr(s.stop, "value", None) == 3 for s in loops)
    assert len(_calls(built.program, Op.NOTIFY)) == 3


@pl.program
class NamedBounds:
    """Rows scattered by a permutation read at run time, the slice's end a name bound to ``start + 1``
    (pypto-lib's CP prefill: ``end = destination + 1``, ``flat[destination:end, :] = row``); the next
    row's end named after its start is re-bound (a stale binding must not fold)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], perm: pl.Tensor[[ROWS], pl.INT32],
          y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        for i in pl.range(ROWS):
            destination = pl.cast(perm[i], pl.INDEX) * 1 + 0
            destination_end = destination + 1
            y[destination:destination_end, :] = x[i:i + 1, 0:COLS]
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], perm: pl.Tensor[[ROWS], pl.INT32],
                  y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(x, perm, y)


@pytest.mark.launcher
def test_a_slice_end_bound_to_a_name_folds_through_it() -> None:
    x = np.random.default_rng(5).standard_normal((ROWS, COLS)).astype(np.float32)
    perm = np.array([2, 0, 3, 1], np.int32)
    y = np.zeros_like(x)
    ir.compile(NamedBounds, distributed_config=DistributedConfig(device_ids=[0]))(x, perm, y)
    want = np.zeros_like(x)
    want[perm] = x
    np.testing.assert_array_equal(y, want)


@pl.program
class StaleBound:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], perm: pl.Tensor[[ROWS], pl.INT32],
          y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        start = pl.cast(perm[0], pl.INDEX) + 0
        end = start + 1
        for _i in pl.range(2):
            start = start + 1  # the loop re-assigns start: end - start is no longer 1
            y[start:end, :] = x[0:1, 0:COLS]  # MARK-stale
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], perm: pl.Tensor[[ROWS], pl.INT32],
                  y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(x, perm, y)


def test_a_slice_bound_re_assigned_since_does_not_fold() -> None:
    x = np.zeros((ROWS, COLS), np.float32)
    with pytest.raises(FrontendError, match="a slice extent must be static"):
        translate(StaleBound, 1, (x, np.zeros(ROWS, np.int32), x.copy()))
