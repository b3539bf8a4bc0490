"""pypto's sub-namespace names that were refused as unknown: ``pl.tile.extract`` (TEXTRACT: a window of a tile into
another memory), ``pl.tile.fillpad_inplace`` (fillpad over the input's own buffer), ``pl.tile.scatter_mask`` (the DPS
mask scatter), ``pl.tile.gather_row`` (the tile spelling, its ``dst``), ``pl.tile.create_tile``,
``pl.tensor.view`` (a zero-copy reshape), ``pl.tensor.create_tensor`` / ``dump_tag`` / ``no_dep``,
``pl.system.task_invalid`` and the pipe barriers ``bar_v`` / ``bar_m`` / ``bar_all``, and the optimization entries'
classes; and the ones pldemu does not run (printed-IR allocations, hand-written pipes, events and flags, the
device's core counts, the compare-form gather), each one error at the user's line saying why. Goldens are numpy's
(the matmul's: the exact dot product rounded once)."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

R, C = 8, 32
M = 32


@pl.program
class Sub:
    @pl.function(type=pl.FunctionType.InCore)
    def tiles(self, x: pl.Tensor[[R, C], pl.FP32], x2: pl.Tensor[[R, 16], pl.FP32],
              y: pl.Out[pl.Tensor[[5, R, C], pl.FP32]]) -> pl.Tensor[[5, R, C], pl.FP32]:
        acc = pl.tile.create_tile([4, C], pl.FP32, target_memory=pl.Mem.Vec)
        for i in pl.range(4):
            acc = pl.tile.gather_row(acc, x, [i, 0], [R - 1 - 2 * i, 0], [1, C])
        pl.system.bar_v()
        y = pl.assemble(y, acc, [0, 0, 0])
        part = pl.load(x, [0, 0], [R, 16], valid_shape=[5, 11])
        padded = pl.tile.fillpad_inplace(part, pad_value=-math.inf)
        y = pl.assemble(y, padded, [1, 0, 0])
        y = pl.assemble(y, pl.tile.fillpad(part, pad_value=0), [1, 0, 16])  # part's own pad is still undefined
        dst = pl.load(x, [0, 0], [R, C])
        out = pl.tile.scatter_mask(dst, pl.load(x2, [0, 0], [R, 16]), pl.tile.MaskPattern.P1010)
        pl.system.bar_all()
        y = pl.assemble(y, dst, [2, 0, 0])  # written in place
        y = pl.assemble(y, pl.tile.add(out, dst), [3, 0, 0])
        window = pl.tile.extract(dst, 2, 3, [4, 8], target_memory=pl.Mem.Vec)
        y = pl.assemble(y, window, [4, 1, 5])
        return y

    @pl.function(type=pl.FunctionType.InCore)
    def cube(self, a: pl.Tensor[[M, M], pl.BF16], b: pl.Tensor[[M, M], pl.BF16],
             z: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        ta = pl.load(a, [0, 0], [M, M], target_memory=pl.Mem.Mat)
        tb = pl.load(b, [0, 0], [M, M], target_memory=pl.Mem.Mat)
        left = pl.tile.extract(ta, 16, 8, [16, 16], target_memory=pl.Mem.Left)
        right = pl.tile.extract(tb, 0, 16, [16, 16], target_memory=pl.Mem.Right)
        pl.system.bar_m()
        return pl.store(pl.tile.matmul(left, right), [0, 0], z)

    @pl.function(type=pl.FunctionType.InCore)
    def views(self, x: pl.Tensor[[R, C], pl.FP32], w: pl.Out[pl.Tensor[[R, C], pl.FP32]]
              ) -> pl.Tensor[[R, C], pl.FP32]:
        flat = pl.tensor.view(x, [2 * R, C // 2])
        same = pl.tensor.view(flat, layout=pl.ND)
        t = pl.load(same, [1, 0], [R, C // 2])
        wide = pl.tensor.view(w, [R // 2, 2 * C])
        pl.store(pl.tile.muls(t, 2.0), [0, 0], pl.tensor.view(wide, [2 * R, C // 2]))
        pl.store(pl.load(flat, [R, 0], [R, C // 2]), [R, 0], pl.tensor.view(w, [2 * R, C // 2]))
        return w

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[R, C], pl.FP32], x2: pl.Tensor[[R, 16], pl.FP32],
             a: pl.Tensor[[M, M], pl.BF16], b: pl.Tensor[[M, M], pl.BF16],
             y: pl.Out[pl.Tensor[[5, R, C], pl.FP32]], z: pl.Out[pl.Tensor[[16, 16], pl.FP32]],
             w: pl.Out[pl.Tensor[[R, C], pl.FP32]], v: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        pl.tensor.dump_tag(x)
        scratch = pl.tensor.create_tensor([R, C], pl.FP32)
        with pl.scope(mode=pl.ScopeMode.MANUAL):
            nothing = pl.system.task_invalid()
            y, first = pl.submit(self.tiles, pl.tensor.no_dep(x), x2, y, deps=[nothing])
            z, _second = pl.submit(self.cube, a, b, z, deps=[first])
            scratch, third = pl.submit(self.views, pl.tensor.no_dep(x), scratch, deps=[first])
        with pl.at(level=pl.Level.CORE_GROUP, deps=[third],
                   optimizations=[pl.optimizations.Split(pl.SplitMode.NONE),
                                  pl.optimizations.CrossCoreSlot(slot_num=4)]):
            pl.store(pl.load(scratch, [0, 0], [R, C]), [0, 0], v)
        w = self.views(x, w)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], x2: pl.Tensor[[R, 16], pl.FP32],
                  a: pl.Tensor[[M, M], pl.BF16], b: pl.Tensor[[M, M], pl.BF16],
                  y: pl.Out[pl.Tensor[[5, R, C], pl.FP32]], z: pl.Out[pl.Tensor[[16, 16], pl.FP32]],
                  w: pl.Out[pl.Tensor[[R, C], pl.FP32]], v: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        self.orch(x, x2, a, b, y, z, w, v)


def _args() -> tuple[np.ndarray, ...]:
    import ml_dtypes

    rng = np.random.default_rng(11)
    x = rng.uniform(-3, 3, (R, C)).astype(np.float32)
    x2 = rng.uniform(-3, 3, (R, 16)).astype(np.float32)
    a = rng.standard_normal((M, M)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((M, M)).astype(ml_dtypes.bfloat16)
    return (x, x2, a, b, np.zeros((5, R, C), np.float32), np.zeros((16, 16), np.float32),
            np.zeros((R, C), np.float32), np.zeros((R, C), np.float32))


def test_sub_names_translate_onto_the_tile_ops() -> None:
    built, _ = translate(Sub, 1, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert [ops.count(op) for op in (Op.TILE_SCATTER_MASK, Op.TILE_FILLPAD, Op.TILE_SLICE, Op.TILE_MOVE)] == [1, 2, 3, 4]


def _tile_golden(x: np.ndarray, x2: np.ndarray) -> np.ndarray:
    y = np.zeros((5, R, C), np.float32)
    y[0, :4] = x[[R - 1, R - 3, R - 5, R - 7]]
    y[1, :, :16] = -np.inf  # the device pads with -inf
    y[1, :5, :11] = x[:5, :11]
    y[1, :, 16:] = 0
    y[1, :5, 16:27] = x[:5, :11]
    scattered = x.copy()
    scattered[:, 1::2] = x2
    y[2] = scattered
    y[3] = scattered + scattered
    y[4, 1:5, 5:13] = scattered[2:6, 3:11]
    return y


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each cell: the exact dot product rounded once to FP32 (math.fsum)."""
    return np.array([[math.fsum(float(a[i, k]) * float(b[k, j]) for k in range(a.shape[1]))
                      for j in range(b.shape[1])] for i in range(a.shape[0])]).astype(np.float32)


@pytest.mark.launcher
def test_sub_names_compute() -> None:
    args = _args()
    ir.compile(Sub, distributed_config=DistributedConfig(device_ids=[0]))(*args)
    x, x2, a, b, y, z, w, v = args
    np.testing.assert_array_equal(y, _tile_golden(x, x2))
    np.testing.assert_array_equal(z, _dot(a[16:32, 8:24], b[0:16, 16:32]))
    flat = x.reshape(2 * R, C // 2)
    want = np.concatenate([flat[1:R + 1] * np.float32(2), flat[R:]]).reshape(R, C)
    np.testing.assert_array_equal(w, want)
    np.testing.assert_array_equal(v, want)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], u8: pl.Tensor[[R, C], pl.UINT8],
              y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if mistake == "view-dn":
                t = pl.load(pl.tensor.view(x, layout=pl.DN), [0, 0], [R, R])  # MARK-view-dn
            if mistake == "view-valid":
                pl.tensor.view(x, [C, R], [4, 4])  # MARK-view-valid
            if mistake == "view-nothing":
                pl.tensor.view(x)  # MARK-view-nothing
            if mistake == "extract-memory":
                pl.tile.extract(t, 0, 0, [4, 4])  # MARK-extract-memory
            if mistake == "extract-outside":
                pl.tile.extract(t, 6, 0, [4, 4], target_memory=pl.Mem.Vec)  # MARK-extract-outside
            if mistake == "scatter-u8":
                w = pl.load(u8, [0, 0], [R, C])
                pl.tile.scatter_mask(w, w, pl.tile.MaskPattern.P1111)  # MARK-scatter-u8
            pl.store(t, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[R, C], pl.FP32], u8: pl.Tensor[[R, C], pl.UINT8],
                 y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            if mistake == "bar-orch":
                pl.system.bar_v()  # MARK-bar-orch
            self.k(x, u8, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], u8: pl.Tensor[[R, C], pl.UINT8],
                      y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.orch(x, u8, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("view-dn", "pl.tensor.view(layout=DN) is not supported by pldemu: a DN view reads the trailing pair "
                "column-major (the transposed values); pl.tensor.transpose computes them"),
    ("view-valid", "pl.tensor.view(valid_shape=...) is not supported by pldemu"),
    ("view-nothing", "pypto refuses it: tensor.view requires at least one of shape or layout"),
    ("extract-memory", "pypto refuses it: extract() missing 1 required keyword-only argument: 'target_memory'"),
    ("extract-outside", "axis 0 region [6, 10) is outside its 8 elements"),
    ("scatter-u8", "pypto refuses it: The operator tile.scatter_mask requires dst dtype in {I8, I16, I32, FP16, "
                   "FP32, BF16}, but got UINT8"),
    ("bar-orch", "pl.system.bar_v() outside a kernel: it is a barrier of a core's pipes"),
])
def test_what_pldemu_or_pypto_refuses_is_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.uint8), np.zeros((R, C), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _compare() -> None:
    @pl.program
    class Compare:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            pl.tile.gather_compare(t, 0.0, t, out_cols=4)  # MARK-compare


def _event() -> None:
    @pl.program
    class Event:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            pl.system.sync_set(0, pipe=None)  # MARK-event


def _flag() -> None:
    @pl.program
    class Flag:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            pl.system.sync_src(set_pipe=None, wait_pipe=None, event_id=0)  # MARK-flag


def _count() -> None:
    @pl.program
    class Count:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            with pl.spmd(pl.system.available_cluster_count()):  # MARK-count
                pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], x)


def _alloc() -> None:
    @pl.program
    class Alloc:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            pl.tile.alloc(pl.Mem.Vec, 1024)  # MARK-alloc


def _pipe() -> None:
    @pl.program
    class Pipe:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            pl.system.tpush_to_aiv(pl.load(x, [0, 0], [R, C]), split=0)  # MARK-pipe


_REFUSED = {"compare": _compare, "event": _event, "flag": _flag, "count": _count, "alloc": _alloc, "pipe": _pipe}


@pytest.mark.parametrize(("which", "message"), [
    ("compare", "pl.tile.gather_compare is not provided by pldemu's pypto layer (out of scope, pto.tgather's compare "
                "form"),
    ("event", "pl.system.sync_set is not provided by pldemu's pypto layer (out of scope, a hand-written cross-core "
              "event between a cluster's cube (AIC) and vector (AIV) cores"),
    ("flag", "pl.system.sync_src is not provided by pldemu's pypto layer (out of scope, a hand-written flag between "
             "two pipes of one core"),
    ("count", "pl.system.available_cluster_count is not provided by pldemu's pypto layer (out of scope, the core "
              "count of the device the run lands on"),
    ("alloc", "pl.tile.alloc is not provided by pldemu's pypto layer (out of scope, a stub of pypto's printed IR"),
    ("pipe", "pl.system.tpush_to_aiv is not provided by pldemu's pypto layer (out of scope, pypto's cross-core pipe"),
])
def test_a_name_pldemu_does_not_run_is_refused_where_the_body_uses_it(which: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        _REFUSED[which]()
    assert (err.value.file, err.value.line) == (__file__, _line_of(f"MARK-{which}"))


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)
