"""pypto's ``pl.relu`` (tile), ``pl.fmod`` / ``pl.fmods``, ``pl.expands``, ``pl.tile.max`` / ``pl.tile.min``
(pypto's scalar min / max), ``pl.row_prod`` / ``pl.col_prod`` and ``pl.col_argmax`` / ``pl.col_argmin``: they were
refused as unknown names. Goldens: math.fmod / float64 products rounded once (exact here: small integers) /
Python loops for the first extreme, written out here."""

from __future__ import annotations

import inspect
import math
import re

import ml_dtypes
import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

R, C = 4, 16
VC = 6  # valid columns of the narrowed operands


@pl.program
class Elementwise:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], d: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
          g: pl.Tensor[[R, C], pl.BF16], v: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[6, R, C], pl.FP32]],
          q: pl.Out[pl.Tensor[[2, R, C], pl.INT32]], gy: pl.Out[pl.Tensor[[R, C], pl.BF16]]) -> None:
        vc = pl.read(v, [0, 0])
        t = pl.load(x, [0, 0], [R, C])
        y = pl.assemble(y, pl.relu(t), [0, 0, 0])
        y = pl.assemble(y, pl.fmod(x, d), [1, 0, 0])
        y = pl.assemble(y, pl.tile.fmods(t, 0.75), [2, 0, 0])
        y = pl.assemble(y, pl.expands(t, pl.tile.max(vc, 2)), [3, 0, 0])
        y = pl.assemble(y, pl.tile.relu(pl.slice(x, [R, C], [0, 0], valid_shape=[R, vc])), [4, 0, 0])
        y = pl.assemble(y, pl.fmods(pl.slice(x, [R, C], [0, 0], valid_shape=[R, pl.tile.min(vc, 4)]), 1.0),
                        [5, 0, 0])
        q = pl.assemble(q, pl.fmod(n, pl.tensor.expands(n, -7)), [0, 0, 0])
        q = pl.assemble(q, pl.fmods(pl.load(n, [0, 0], [R, C]), 5), [1, 0, 0])
        gy = pl.assemble(gy, pl.relu(pl.load(g, [0, 0], [R, C])), [0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], d: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
                  g: pl.Tensor[[R, C], pl.BF16], v: pl.Tensor[[1, 8], pl.INT32],
                  y: pl.Out[pl.Tensor[[6, R, C], pl.FP32]], q: pl.Out[pl.Tensor[[2, R, C], pl.INT32]],
                  gy: pl.Out[pl.Tensor[[R, C], pl.BF16]]) -> None:
        self.k(x, d, n, g, v, y, q, gy)


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)
    x = rng.uniform(-9.0, 9.0, (R, C)).astype(np.float32)
    x[0, :3] = [-0.0, 1e30, -1e-30]
    d = rng.uniform(-3.0, 3.0, (R, C)).astype(np.float32)
    d[0, 0] = 0.0  # NaN
    n = rng.integers(-1000, 1000, (R, C)).astype(np.int32)
    g = rng.uniform(-4.0, 4.0, (R, C)).astype(ml_dtypes.bfloat16)
    v = np.zeros((1, 8), np.int32)
    v[0, 0] = VC
    return (x, d, n, g, v, np.zeros((6, R, C), np.float32), np.zeros((2, R, C), np.int32),
            np.zeros((R, C), ml_dtypes.bfloat16))


def _fmod_f32(a: float, b: float) -> float:
    return math.nan if b == 0 else math.fmod(a, b)  # exact: representable in FP32


def _golden(x: np.ndarray, d: np.ndarray, n: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, ...]:
    xs, ds = x.astype(np.float64), d.astype(np.float64)
    relu = np.where(xs > 0, xs, 0.0)
    fm = np.vectorize(_fmod_f32)(xs, ds)
    fms = np.vectorize(lambda a: math.fmod(a, 0.75))(xs)
    narrowed = np.zeros((R, C))
    narrowed[:, :VC] = relu[:, :VC]
    fm1 = np.zeros((R, C))
    fm1[:, :4] = np.vectorize(lambda a: math.fmod(a, 1.0))(xs[:, :4])
    y = np.stack([relu, fm, fms, np.full((R, C), float(VC)), narrowed, fm1]).astype(np.float32)
    c_rem = np.vectorize(lambda a, b: int(math.fmod(a, b)))  # C's %: the dividend's sign
    q = np.stack([c_rem(n, -7), c_rem(n, 5)]).astype(np.int32)
    gs = g.astype(np.float64)
    return y, q, np.where(gs > 0, gs, 0.0).astype(ml_dtypes.bfloat16)


def test_names_translate_onto_the_tile_ops() -> None:
    built, _ = translate(Elementwise, 1, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert [ops.count(op) for op in (Op.TILE_RELU, Op.TILE_FMOD, Op.TILE_FMODS, Op.TILE_EXPANDS)] == [3, 2, 3, 2]


@pytest.mark.launcher
def test_elementwise_compute() -> None:
    x, d, n, g, v, y, q, gy = _args()
    ir.compile(Elementwise, distributed_config=DistributedConfig(device_ids=[0]))(x, d, n, g, v, y, q, gy)
    want_y, want_q, want_gy = _golden(x, d, n, g)
    np.testing.assert_array_equal(y, want_y)
    real = ~np.isnan(want_y[1])  # a NaN's sign is not a value
    np.testing.assert_array_equal(np.signbit(y[1][real]), np.signbit(want_y[1][real]))  # the dividend's sign
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(gy.astype(np.float32), want_gy.astype(np.float32))


@pl.program
class Reductions:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32], v: pl.Tensor[[1, 8], pl.INT32],
          rp: pl.Out[pl.Tensor[[2, R], pl.FP32]], cp: pl.Out[pl.Tensor[[1, C], pl.INT32]],
          am: pl.Out[pl.Tensor[[3, C], pl.INT32]]) -> None:
        vc = pl.read(v, [0, 0])
        t = pl.load(x, [0, 0], [R, C])
        rp[0:1, :] = pl.reshape(pl.row_prod(x), [1, R])
        narrow = pl.load(x, [0, 0], [R, C], valid_shape=[R, vc])
        rp[1:2, :] = pl.reshape(pl.tile.row_prod(narrow, pl.create_tile([R, C], pl.FP32)), [1, R])
        cp[0:1, :] = pl.col_prod(n)
        am[0:1, :] = pl.col_argmax(x)
        am[1:2, :] = pl.tile.col_argmin(t, pl.create_tile([R, C], pl.FP32))
        am[2:3, :] = pl.tensor.col_argmax(pl.slice(x, [R, C], [0, 0], valid_shape=[2, C]))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32], v: pl.Tensor[[1, 8], pl.INT32],
                  rp: pl.Out[pl.Tensor[[2, R], pl.FP32]], cp: pl.Out[pl.Tensor[[1, C], pl.INT32]],
                  am: pl.Out[pl.Tensor[[3, C], pl.INT32]]) -> None:
        self.k(x, n, v, rp, cp, am)


def _reduction_args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(9)
    x = rng.integers(-3, 4, (R, C)).astype(np.float32)  # small integers: every product is exact
    x[1, 2] = x[3, 2] = 50.0  # a tie in column 2: the first row wins
    n = rng.integers(-9, 10, (R, C)).astype(np.int32)
    n[:, 0] = 1 << 10  # 2^40 wraps to 0 in INT32
    n[:, 1] = [65537, 65537, 3, 1]  # wraps, not saturates
    v = np.zeros((1, 8), np.int32)
    v[0, 0] = VC
    return x, n, v, np.zeros((2, R), np.float32), np.zeros((1, C), np.int32), np.zeros((3, C), np.int32)


def _first(col: list[float], better) -> int:  # type: ignore[no-untyped-def]
    best = 0
    for i, value in enumerate(col):
        if better(value, col[best]):
            best = i
    return best


def _reduction_golden(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    rows = [[float(v) for v in row] for row in x]
    rp = np.array([[math.prod(r) for r in rows], [math.prod(r[:VC]) for r in rows]], np.float32)
    wrapped = [((math.prod(int(v) for v in n[:, j]) + 2**31) % 2**32) - 2**31 for j in range(C)]
    cols = [[rows[i][j] for i in range(R)] for j in range(C)]
    am = np.array([[_first(c, lambda a, b: a > b) for c in cols], [_first(c, lambda a, b: a < b) for c in cols],
                   [_first(c[:2], lambda a, b: a > b) for c in cols]], np.int32)
    return rp, np.array([wrapped], np.int32), am


def test_reductions_translate_onto_the_tile_ops() -> None:
    built, _ = translate(Reductions, 1, _reduction_args())
    calls = [c for f in built.program.functions for c in function_calls(f)]
    ops = [c.op for c in calls]
    assert [ops.count(op) for op in (Op.TILE_ROW_PROD, Op.TILE_COL_PROD, Op.TILE_COL_ARGMAX, Op.TILE_COL_ARGMIN)] \
        == [2, 1, 2, 1]
    assert all(c.type.dtype.value == "int32" and c.type.shape[0] == 1 for c in calls
               if c.op in (Op.TILE_COL_ARGMAX, Op.TILE_COL_ARGMIN))


@pytest.mark.launcher
def test_reductions_compute() -> None:
    x, n, v, rp, cp, am = _reduction_args()
    ir.compile(Reductions, distributed_config=DistributedConfig(device_ids=[0]))(x, n, v, rp, cp, am)
    want_rp, want_cp, want_am = _reduction_golden(x, n)
    np.testing.assert_array_equal(rp, want_rp)
    np.testing.assert_array_equal(cp, want_cp)
    np.testing.assert_array_equal(am, want_am)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
              y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if mistake == "fmod-dtypes":
                t = pl.fmod(t, pl.load(n, [0, 0], [R, C]))  # MARK-fmod-dtypes
            if mistake == "row-prod-no-tmp":
                pl.row_prod(t)  # MARK-row-prod-no-tmp
            if mistake == "col-argmax-no-tmp":
                pl.tile.col_argmax(t)  # MARK-col-argmax-no-tmp
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
                      y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, n, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("fmod-dtypes", "tile.fmod: argument 'rhs' must be a tile fp32[4, 16] like lhs"),
    ("row-prod-no-tmp", "pypto refuses it: pl.row_prod of a tile needs tmp_tile"),
    ("col-argmax-no-tmp", "pypto refuses it: pl.tile.col_argmax of a tile needs tmp_tile"),
])
def test_what_pypto_refuses_is_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.int32), np.zeros((R, C), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)
