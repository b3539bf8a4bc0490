"""pypto's bitwise ops and shifts (``pl.and_`` / ``or_`` / ``xor`` / ``not_`` / ``shl`` / ``shr`` and the scalar
``ands`` / ``ors`` / ``xors`` / ``shls`` / ``shrs``, unified, ``pl.tensor.*`` and ``pl.tile.*``): they were refused
as unknown names. Golden: Python's integers on the two's complement bits, written out here (not numpy's
bitwise ufuncs the handlers use)."""

from __future__ import annotations

import inspect
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

R, C = 4, 16
K = 11  # result planes of y


@pl.program
class Bits:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[R, C], pl.INT32], b: pl.Tensor[[R, C], pl.INT32], h: pl.Tensor[[R, C], pl.INT16],
          n: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[K, R, C], pl.INT32]],
          hy: pl.Out[pl.Tensor[[2, R, C], pl.INT16]]) -> None:
        vc = pl.read(n, [0, 0])
        ta = pl.load(a, [0, 0], [R, C])
        tb = pl.load(b, [0, 0], [R, C])
        counts = pl.ands(tb, 31)  # shift counts 0..31
        tmp = pl.create_tile([R, C], pl.INT32)
        y = pl.assemble(y, pl.and_(ta, tb), [0, 0, 0])
        y = pl.assemble(y, pl.or_(a, b), [1, 0, 0])
        y = pl.assemble(y, pl.xor(ta, tb, tmp), [2, 0, 0])
        y = pl.assemble(y, pl.tensor.xor(a, b), [3, 0, 0])
        y = pl.assemble(y, pl.tile.shl(ta, counts), [4, 0, 0])
        y = pl.assemble(y, pl.shr(ta, counts), [5, 0, 0])
        y = pl.assemble(y, pl.tile.ors(ta, -256), [6, 0, 0])
        y = pl.assemble(y, pl.xors(ta, 0x5A5A, tmp), [7, 0, 0])
        y = pl.assemble(y, pl.shls(a, 3), [8, 0, 0])
        y = pl.assemble(y, pl.tensor.shrs(a, 2), [9, 0, 0])
        # a narrowed operand: the op keeps its valid box, the assemble writes only that
        y = pl.assemble(y, pl.shl(pl.slice(a, [R, C], [0, 0], valid_shape=[R, vc]), 1), [10, 0, 0])
        hy = pl.assemble(hy, pl.not_(h), [0, 0, 0])
        hy = pl.assemble(hy, pl.tile.not_(pl.load(h, [0, 0], [R, C])), [1, 0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[R, C], pl.INT32], b: pl.Tensor[[R, C], pl.INT32],
                  h: pl.Tensor[[R, C], pl.INT16], n: pl.Tensor[[1, 8], pl.INT32],
                  y: pl.Out[pl.Tensor[[K, R, C], pl.INT32]], hy: pl.Out[pl.Tensor[[2, R, C], pl.INT16]]) -> None:
        self.k(a, b, h, n, y, hy)


VC = 5


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    a = rng.integers(-2**31, 2**31, (R, C), dtype=np.int64).astype(np.int32)
    a[0, :4] = [-1, -2**31, 2**31 - 1, 0]
    b = rng.integers(-2**31, 2**31, (R, C), dtype=np.int64).astype(np.int32)
    h = rng.integers(-2**15, 2**15, (R, C), dtype=np.int64).astype(np.int16)
    n = np.zeros((1, 8), np.int32)
    n[0, 0] = VC
    return a, b, h, n, np.zeros((K, R, C), np.int32), np.zeros((2, R, C), np.int16)


def _wrap(v: int, bits: int) -> int:
    """``v``'s low ``bits`` bits as a signed integer (two's complement)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _golden(a: np.ndarray, b: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    def each(fn, *xs: np.ndarray, bits: int = 32) -> np.ndarray:  # type: ignore[no-untyped-def]
        return np.array([_wrap(fn(*(int(x[i]) for x in xs)), bits) for i in np.ndindex(xs[0].shape)],
                        np.int64).reshape(xs[0].shape)

    counts = each(lambda v: v & 31, b)
    planes = [each(lambda x, y: x & y, a, b), each(lambda x, y: x | y, a, b), each(lambda x, y: x ^ y, a, b),
              each(lambda x, y: x ^ y, a, b), each(lambda x, s: x << s, a, counts),
              each(lambda x, s: x >> s, a, counts),  # Python's >> of a negative int is arithmetic
              each(lambda x: x | -256, a), each(lambda x: x ^ 0x5A5A, a), each(lambda x: x << 3, a),
              each(lambda x: x >> 2, a), each(lambda x: x << 1, a)]
    planes[10][:, VC:] = 0  # outside the valid box: y's own zeros
    y = np.stack(planes).astype(np.int32)
    inv = each(lambda x: ~x, h, bits=16).astype(np.int16)
    return y, np.stack([inv, inv])


def test_names_translate_onto_the_bitwise_ops() -> None:
    built, _ = translate(Bits, 1, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    for op, k in ((Op.TILE_AND, 1), (Op.TILE_ANDS, 1), (Op.TILE_OR, 1), (Op.TILE_ORS, 1), (Op.TILE_XOR, 2),
                  (Op.TILE_XORS, 1), (Op.TILE_SHL, 1), (Op.TILE_SHLS, 2), (Op.TILE_SHR, 1), (Op.TILE_SHRS, 1),
                  (Op.TILE_NOT, 2)):
        assert ops.count(op) == k, op
    xors = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_XORS]
    assert len(xors[0].args) == 3  # pypto's scratch is carried


@pytest.mark.launcher
def test_bitwise_ops_compute() -> None:
    a, b, h, n, y, hy = _args()
    ir.compile(Bits, distributed_config=DistributedConfig(device_ids=[0]))(a, b, h, n, y, hy)
    want_y, want_hy = _golden(a, b, h)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(hy, want_hy)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], a: pl.Tensor[[R, C], pl.INT32],
              y: pl.Out[pl.Tensor[[R, C], pl.INT32]]) -> None:
            t = pl.load(a, [0, 0], [R, C])
            if mistake == "and-float":
                t = pl.and_(x, x)  # MARK-and-float
            if mistake == "shls-float":
                t = pl.shls(t, 1.5)  # MARK-shls-float
            if mistake == "not-int32":
                t = pl.not_(t)  # MARK-not-int32
            if mistake == "xor-no-tmp":
                t = pl.xor(t, t)  # MARK-xor-no-tmp
            if mistake == "xor-tensor-tmp":
                t = pl.xor(a, a, t)  # MARK-xor-tensor-tmp
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], a: pl.Tensor[[R, C], pl.INT32],
                      y: pl.Out[pl.Tensor[[R, C], pl.INT32]]) -> None:
            self.k(x, a, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("and-float", "tile.and requires integer tile dtype, but got FP32"),
    ("shls-float", "tile.shls requires the scalar to be an integer type, but got scalar fp32"),
    ("not-int32", "tile.not requires int16 or uint16 tile dtype, but got INT32"),
    ("xor-no-tmp", "pypto refuses it: pl.xor of a tile needs tmp"),
    ("xor-tensor-tmp", "pypto refuses it: pl.xor: tmp is only for a Tile operand"),
])
def test_what_pypto_refuses_is_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.int32), np.zeros((R, C), np.int32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)
