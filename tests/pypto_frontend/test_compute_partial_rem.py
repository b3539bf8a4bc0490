"""pypto's partial combines (``pl.part_add`` / ``part_mul`` / ``part_max`` / ``part_min``, unified, ``pl.tensor.*``
and ``pl.tile.*``), the floored remainder (``pl.tile.rem`` / ``rems``, also ``pl.rem`` / ``pl.rems``), ``pl.tile.prelu``
/ ``lrelu`` and ``pl.tile.sels``: they were refused as unknown names. Goldens are written here cell by cell
(Python's ``%``, float64 products rounded once); what pypto refuses is one error at the user's line."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import Const
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

R, C = 4, 16
VC = 9  # the run-time valid columns of the narrower partial operand


@pl.program
class Partial:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], z: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
          d: pl.Tensor[[R, C], pl.INT32], h: pl.Tensor[[R, C], pl.FP16], u: pl.Tensor[[R, C], pl.UINT16],
          v: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[8, R, C], pl.FP32]],
          q: pl.Out[pl.Tensor[[2, R, C], pl.INT32]], hy: pl.Out[pl.Tensor[[2, R, C], pl.FP16]],
          uy: pl.Out[pl.Tensor[[R, C], pl.UINT16]]) -> None:
        vc = pl.read(v, [0, 0])
        a = pl.load(x, [0, 0], [R, C])
        b = pl.load(z, [0, 0], [R, C], valid_shape=[2, vc])
        y = pl.assemble(y, pl.part_add(a, b), [0, 0, 0])
        y = pl.assemble(y, pl.tile.part_max(a, b), [1, 0, 0])
        y = pl.assemble(y, pl.part_mul(x, z), [2, 0, 0])
        y = pl.assemble(y, pl.tensor.part_min(x, pl.slice(z, [R, C], [0, 0], valid_shape=[R, 5])), [3, 0, 0])
        ftmp = pl.tile.create([1, C + 2], pl.FP32)
        y = pl.assemble(y, pl.tile.rem(a, pl.load(z, [0, 0], [R, C]), ftmp), [4, 0, 0])
        y = pl.assemble(y, pl.rems(a, -2.5, ftmp), [5, 0, 0])
        ptmp = pl.tile.create([R + 1, 32], pl.UINT8)
        y = pl.assemble(y, pl.tile.prelu(a, pl.load(z, [0, 0], [R, C]), ptmp), [6, 0, 0])
        y = pl.assemble(y, pl.lrelu(a, 0.1), [7, 0, 0])
        itmp = pl.tile.create([1, C + 2], pl.INT32)
        ni = pl.load(n, [0, 0], [R, C])
        q = pl.assemble(q, pl.rem(ni, pl.load(d, [0, 0], [R, C]), itmp), [0, 0, 0])
        q = pl.assemble(q, pl.tile.rems(ni, 7, itmp), [1, 0, 0])
        ht = pl.load(h, [0, 0], [R, C])
        hy = pl.assemble(hy, pl.tile.lrelu(ht, 0.1), [0, 0, 0])
        hy = pl.assemble(hy, pl.prelu(ht, ht, ptmp), [1, 0, 0])
        ut = pl.load(u, [0, 0], [R, C])
        big = pl.tile.cmps(ut, 100, cmp_type=4)
        uy = pl.assemble(uy, pl.tile.sels(big, ut, pl.tile.create([1, C], pl.UINT16), 65535), [0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], z: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[R, C], pl.INT32],
                  d: pl.Tensor[[R, C], pl.INT32], h: pl.Tensor[[R, C], pl.FP16], u: pl.Tensor[[R, C], pl.UINT16],
                  v: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[8, R, C], pl.FP32]],
                  q: pl.Out[pl.Tensor[[2, R, C], pl.INT32]], hy: pl.Out[pl.Tensor[[2, R, C], pl.FP16]],
                  uy: pl.Out[pl.Tensor[[R, C], pl.UINT16]]) -> None:
        self.k(x, z, n, d, h, u, v, y, q, hy, uy)


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(21)
    x = (rng.integers(-64, 65, (R, C)) / 4).astype(np.float32)  # quarters: the remainders are exact
    z = (rng.integers(1, 33, (R, C)) / 4 * rng.choice([-1, 1], (R, C))).astype(np.float32)
    n = rng.integers(-1000, 1000, (R, C)).astype(np.int32)
    d = (rng.integers(1, 50, (R, C)) * rng.choice([-1, 1], (R, C))).astype(np.int32)
    h = rng.uniform(-8, 8, (R, C)).astype(np.float16)
    u = rng.integers(0, 200, (R, C)).astype(np.uint16)
    v = np.zeros((1, 8), np.int32)
    v[0, 0] = VC
    return (x, z, n, d, h, u, v, np.zeros((8, R, C), np.float32), np.zeros((2, R, C), np.int32),
            np.zeros((2, R, C), np.float16), np.zeros((R, C), np.uint16))


def _floored(a: float, b: float) -> float:
    r = math.fmod(a, b)
    return r + b if r != 0 and (r < 0) != (b < 0) else r


def _partial(fn, a: np.ndarray, b: np.ndarray, rows: int, cols: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The lhs's box (all of it here): ``fn`` inside rhs's ``rows`` x ``cols`` box, the lhs's value outside."""
    return np.array([[fn(a[i, j], b[i, j]) if i < rows and j < cols else a[i, j] for j in range(C)]
                     for i in range(R)], np.float64)


def _leaky(x: np.ndarray, s: np.ndarray, dt: type) -> np.ndarray:
    xs = x.astype(np.float64)
    return np.where(xs > 0, xs, xs * s.astype(np.float64)).astype(dt)


def _golden(x: np.ndarray, z: np.ndarray, n: np.ndarray, d: np.ndarray, h: np.ndarray,
            u: np.ndarray) -> tuple[np.ndarray, ...]:
    xs, zs = x.astype(np.float64), z.astype(np.float64)
    y = np.stack([
        _partial(lambda p, r: p + r, xs, zs, 2, VC), _partial(max, xs, zs, 2, VC), xs * zs,
        _partial(min, xs, zs, R, 5), np.vectorize(_floored)(xs, zs), np.vectorize(lambda p: _floored(p, -2.5))(xs),
        _leaky(x, z, np.float64), _leaky(x, np.full((R, C), np.float32(0.1)), np.float64),
    ]).astype(np.float32)
    q = np.stack([n.astype(np.int64) % d, n.astype(np.int64) % 7]).astype(np.int32)
    slope16 = np.full((R, C), np.float16(np.float32(0.1)))  # pypto's FP32 coefficient, then TLRELU's half
    hy = np.stack([_leaky(h, slope16, np.float16), _leaky(h, h, np.float16)])
    return y, q, hy, np.where(u > 100, u, np.uint16(65535))


def test_names_translate_onto_the_tile_ops() -> None:
    built, _ = translate(Partial, 1, _args())
    calls = [c for f in built.program.functions for c in function_calls(f)]
    ops = [c.op for c in calls]
    assert [ops.count(op) for op in (Op.TILE_PART_ADD, Op.TILE_PART_MUL, Op.TILE_PART_MAX, Op.TILE_PART_MIN,
                                     Op.TILE_REM, Op.TILE_REMS, Op.TILE_PRELU, Op.TILE_LRELU, Op.TILE_SELS)] \
        == [1, 1, 1, 1, 2, 2, 2, 2, 1]
    sels = next(c for c in calls if c.op is Op.TILE_SELS)
    assert sels.args[3] == Const(-1, DType.INT16)  # pypto's TSELS scalar of a UINT16 source: INT16, bits kept
    lrelu = [c.args[1] for c in calls if c.op is Op.TILE_LRELU]
    assert lrelu == [Const(float(np.float32(0.1)), DType.FP32)] * 2  # pypto's FP32 coefficient


@pytest.mark.launcher
def test_partial_rem_prelu_sels_compute() -> None:
    args = _args()
    ir.compile(Partial, distributed_config=DistributedConfig(device_ids=[0]))(*args)
    want_y, want_q, want_hy, want_uy = _golden(*args[:6])
    y, q, hy, uy = args[7:]
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(hy, want_hy)
    np.testing.assert_array_equal(uy, want_uy)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], i: pl.Tensor[[R, C], pl.INT32],
              y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            ti = pl.load(i, [0, 0], [R, C])
            tmp = pl.tile.create([1, 32], pl.FP32)
            if mistake == "rem-scalar":
                t = pl.tile.rem(t, 3.0, tmp)  # MARK-rem-scalar
            if mistake == "rems-tile":
                t = pl.rems(t, t, tmp)  # MARK-rems-tile
            if mistake == "rem-fp16":
                h = pl.cast(t, pl.FP16)
                pl.tile.rem(h, h, tmp)  # MARK-rem-fp16
            if mistake == "rems-float-on-int":
                pl.tile.rems(ti, 2.5, pl.tile.create([1, 32], pl.INT32))  # MARK-rems-float-on-int
            if mistake == "lrelu-tile-slope":
                t = pl.tile.lrelu(t, t)  # MARK-lrelu-tile-slope
            if mistake == "prelu-int":
                pl.prelu(ti, ti, pl.tile.create([R + 1, 32], pl.UINT8))  # MARK-prelu-int
            if mistake == "part-rhs-wider":
                narrow = pl.load(x, [0, 0], [R, C], valid_shape=[2, C])
                t = pl.part_add(narrow, t)  # MARK-part-rhs-wider
            if mistake == "part-dtypes":
                t = pl.tile.part_mul(t, ti)  # MARK-part-dtypes
            if mistake == "sels-fraction":
                m = pl.tile.cmps(ti, 0, cmp_type=4)
                pl.tile.sels(m, ti, pl.tile.create([1, C], pl.INT32), 0.5)  # MARK-sels-fraction
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], i: pl.Tensor[[R, C], pl.INT32],
                      y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, i, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("rem-scalar", "pypto refuses it: pl.tile.rem: rhs must be a tile (pl.tile.rems takes a scalar)"),
    ("rems-tile", "pypto refuses it: pl.rems: rhs must be a scalar (pl.tile.rem takes a tile)"),
    ("rem-fp16", "tile.rem requires an FP32 or INT32 tile (pto-isa's REM on A2/A3 supports only float and int32), "
                 "but got FP16"),
    ("rems-float-on-int", "tile.rems of an INT32 tile requires an integer scalar, but got FP32"),
    ("lrelu-tile-slope", "pypto refuses it: pl.tile.lrelu: slope must be a scalar"),
    ("prelu-int", "tile.prelu requires src dtype in {FP16, FP32}, but got INT32"),
    ("part-rhs-wider", "tile.part_add requires rhs's valid_shape [4, 16] within lhs's [2, 16], but axis 0 is larger"),
    ("part-dtypes", "tile.part_mul: argument 'rhs' must be a tile fp32 of lhs's rank"),
    ("sels-fraction", "pypto refuses it: pl.tile.sels: Cannot retype non-integral floating-point constant 0.5 to "
                      "integer dtype INT32"),
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
