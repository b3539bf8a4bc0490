"""pypto's unary math and division (``pl.exp/log/sqrt/rsqrt/recip/neg/abs/div`` in their unified, tensor and
tile spellings) translate onto pldemu's tile ops and run on two ranks to numpy goldens."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pldemu.ir.nodes import Program
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
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


@pl.program
class MathExchange:
    """A sigmoid written as pypto-lib writes it (``recip(add(exp(neg(x)), 1.0))``), pushed to the peer's
    window; tensor-level rsqrt with high_precision, log / sqrt / div of tiles, an INT32 tensor's exp (FP32)
    and integer division by a scalar, an FP16 tile's recip and abs."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[ROWS, COLS], pl.INT32],
          h: pl.Tensor[[ROWS, COLS], pl.FP16], y: pl.Out[pl.Tensor[[5, ROWS, COLS], pl.FP32]],
          q: pl.Out[pl.Tensor[[ROWS, COLS], pl.INT32]], hy: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP16]],
          win: pld.DistributedTensor[[ROWS, COLS], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
          peer: pl.Scalar[pl.INDEX]) -> None:
        t = pl.load(x, [0, 0], [ROWS, COLS])
        s = pl.recip(pl.add(pl.exp(pl.neg(t)), 1.0))
        pld.tile.remote_store(s, win, peer, [0, 0])
        pld.system.notify(sig, peer, [0, 0], 1)
        y = pl.assemble(y, s, [0, 0, 0])
        y = pl.assemble(y, pl.tensor.rsqrt(x, high_precision=True), [1, 0, 0])
        y = pl.assemble(y, pl.div(pl.log(t), pl.tile.sqrt(t), high_precision=True), [2, 0, 0])
        y = pl.assemble(y, pl.exp(n), [3, 0, 0])
        pl.store(pl.tensor.div(n, -3), [0, 0], q)
        pl.store(pl.tile.abs(pl.tile.recip(pl.load(h, [0, 0], [ROWS, COLS]))), [0, 0], hy)
        pld.system.wait(sig, [0, 0], 1)
        y = pl.assemble(y, pl.load(win, [0, 0], [ROWS, COLS]), [4, 0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32], ns: pl.Tensor[[NR, ROWS, COLS], pl.INT32],
                  hs: pl.Tensor[[NR, ROWS, COLS], pl.FP16], ys: pl.Out[pl.Tensor[[NR, 5, ROWS, COLS], pl.FP32]],
                  qs: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.INT32]],
                  hys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP16]]) -> None:
        wbuf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ns[r], hs[r], ys[r], qs[r], hys[r], pld.window(wbuf, [ROWS, COLS], dtype=pl.FP32),
                   pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(11)
    xs = rng.uniform(0.1, 8.0, (n, ROWS, COLS)).astype(np.float32)
    ns = rng.integers(-50, 50, (n, ROWS, COLS)).astype(np.int32)
    hs = rng.uniform(-4.0, 4.0, (n, ROWS, COLS)).astype(np.float16)
    return (xs, ns, hs, np.zeros((n, 5, ROWS, COLS), np.float32), np.zeros((n, ROWS, COLS), np.int32),
            np.zeros((n, ROWS, COLS), np.float16))


def test_names_translate_onto_the_tile_math_ops() -> None:
    built, _ = translate(MathExchange, 2, _args(2))
    p = built.program
    counts = {op: len(_calls(p, op)) for op in (Op.TILE_NEG, Op.TILE_EXP, Op.TILE_RECIP, Op.TILE_RSQRT,
                                                Op.TILE_LOG, Op.TILE_SQRT, Op.TILE_DIV, Op.TILE_DIVS, Op.TILE_ABS)}
    per_rank = {Op.TILE_NEG: 1, Op.TILE_EXP: 2, Op.TILE_RECIP: 2, Op.TILE_RSQRT: 1, Op.TILE_LOG: 1,
                Op.TILE_SQRT: 1, Op.TILE_DIV: 1, Op.TILE_DIVS: 1, Op.TILE_ABS: 1}
    assert counts == {op: 2 * k for op, k in per_rank.items()}  # one kernel per rank
    rsqrt = _calls(p, Op.TILE_RSQRT)[0]
    assert len(rsqrt.args) == 2  # high_precision: pypto's synthesised scratch
    cast = _calls(p, Op.TILE_CAST)[0]  # pl.exp of an INT32 tensor: to FP32 first (pypto's tensor deducer)
    assert len(_calls(p, Op.TILE_CAST)) == 2
    assert cast.type.dtype.value == "fp32" and cast.args[0].type.dtype.value == "int32"
    assert _calls(p, Op.TILE_DIVS)[0].type.dtype.value == "int32"


def _golden(xs: np.ndarray, ns: np.ndarray, hs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 math rounded to the output dtype (the test's tolerance covers the per-step FP32 rounding)."""
    x = xs.astype(np.float64)
    sig = 1.0 / (np.exp(-x) + 1.0)
    y = np.stack([sig, 1.0 / np.sqrt(x), np.log(x) / np.sqrt(x), np.exp(ns.astype(np.float64)),
                  np.roll(sig, 1, axis=0)], axis=1)
    q = np.trunc(ns / -3.0).astype(np.int32)  # integer division truncates toward zero
    hy = np.abs(1.0 / hs.astype(np.float64)).astype(np.float16)
    return y, q, hy


@pytest.mark.launcher
def test_math_exchange_runs_on_two_ranks() -> None:
    xs, ns, hs, ys, qs, hys = _args(2)
    ir.compile(MathExchange, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ns, hs, ys, qs, hys)
    y, q, hy = _golden(xs, ns, hs)
    np.testing.assert_allclose(ys, y, rtol=4e-7)
    np.testing.assert_array_equal(qs, q)
    np.testing.assert_array_equal(hys, hy)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[ROWS, COLS], pl.INT32],
              y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [ROWS, COLS])
            if mistake == "recip-int":
                pl.recip(pl.load(n, [0, 0], [ROWS, COLS]), high_precision=True)  # MARK-recip-int
            if mistake == "div-int":
                pl.div(n, n, high_precision=True)  # MARK-div-int
            if mistake == "rsqrt-tile":
                pl.rsqrt(t, high_precision=True)  # MARK-rsqrt-tile
            if mistake == "rsqrt-tile-full":
                pl.rsqrt(pl.tile.full([ROWS, COLS], pl.FP32, 1.0), high_precision=True)  # MARK-rsqrt-tile-full
            if mistake == "div-tile-scalar":
                pl.div(t, 2.0, high_precision=True)  # MARK-div-tile-scalar
            if mistake == "div-tensor-scalar":
                pl.div(x, 2.0, high_precision=True)  # MARK-div-tensor-scalar
            if mistake == "div-row-broadcast":
                pl.div(x, pl.row_sum(x), high_precision=True)  # MARK-div-row-broadcast
            if mistake == "log-int":
                pl.log(n)  # MARK-log-int
            if mistake == "div-dtypes":
                pl.div(t, pl.load(n, [0, 0], [ROWS, COLS]))  # MARK-div-dtypes
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Tensor[[ROWS, COLS], pl.INT32],
                      y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            self.k(x, n, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("recip-int", "pl.recip supports high_precision only for FP16 or FP32, got INT32"),
    ("div-int", "pl.div supports high_precision only for FP16 or FP32"),
    ("rsqrt-tile", "pl.rsqrt: 'high_precision' is not supported for Tile operands. The tile form selects "
                   "precision by taking a scratch tile: pl.tile.rsqrt(tile, tmp)."),
    ("rsqrt-tile-full", "pl.rsqrt: 'high_precision' is not supported for Tile operands"),
    ("div-tile-scalar", "pl.div: high_precision requires a Tile rhs"),
    ("div-tensor-scalar", "tensor.div(high_precision=True) requires a Tensor rhs"),
    ("div-row-broadcast", "tensor.div(high_precision=True) does not support row broadcasting"),
    ("log-int", "tile.log: argument 'tile' must be a tile of fp16, fp32, got tile int32[4, 16]"),
    ("div-dtypes", "tile.div: argument 'rhs' must be a tile fp32[4, 16] valid [4, 16] like lhs"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.int32), np.zeros((ROWS, COLS), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


@pl.program
class SoftmaxExchange:
    """A row softmax (tensor-level ``row_max``, whose scratch pypto synthesises; ``row_expand_sub``, ``exp``,
    a tile-level ``row_sum`` with its ``tmp_tile``, ``row_expand_div``), its column sums sent to the peer,
    and the peer's sums broadcast back over the rows (``col_expand_mul``)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          z: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], win: pld.DistributedTensor[[1, COLS], pl.FP32],
          sig: pld.DistributedTensor[[1, 1], pl.INT32], peer: pl.Scalar[pl.INDEX]) -> None:
        t = pl.load(x, [0, 0], [ROWS, COLS])
        e = pl.exp(pl.row_expand_sub(t, pl.row_max(x)))
        p = pl.row_expand_div(e, pl.tile.row_sum(e, t))
        pl.store(p, [0, 0], y)
        pld.tile.remote_store(pl.col_sum(p), win, peer, [0, 0])
        pld.system.notify(sig, peer, [0, 0], 1)
        pld.system.wait(sig, [0, 0], 1)
        pl.store(pl.tile.col_expand_mul(t, pl.load(win, [0, 0], [1, COLS])), [0, 0], z)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
                  zs: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
        wbuf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ys[r], zs[r], pld.window(wbuf, [1, COLS], dtype=pl.FP32),
                   pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)


def _softmax_args(n: int) -> tuple[np.ndarray, ...]:
    xs = np.random.default_rng(12).normal(0.0, 2.0, (n, ROWS, COLS)).astype(np.float32)
    return xs, np.zeros_like(xs), np.zeros_like(xs)


def test_reductions_translate_with_pyptos_scratch() -> None:
    built, _ = translate(SoftmaxExchange, 2, _softmax_args(2))
    p = built.program
    row_max, row_sum, col_sum = (_calls(p, op)[0] for op in (Op.TILE_ROW_MAX, Op.TILE_ROW_SUM, Op.TILE_COL_SUM))
    assert len(row_max.args) == 2 and len(row_sum.args) == 2  # binary-tree sums: a scratch each
    assert len(col_sum.args) == 1  # a tensor-level col_sum maps 1:1: sequential
    assert row_max.type.shape == (ROWS, 1) and col_sum.type.shape == (1, COLS)
    assert [len(_calls(p, op)) for op in (Op.TILE_ROW_EXPAND_SUB, Op.TILE_ROW_EXPAND_DIV,
                                          Op.TILE_COL_EXPAND_MUL)] == [2, 2, 2]


@pytest.mark.launcher
def test_softmax_exchange_runs_on_two_ranks() -> None:
    xs, ys, zs = _softmax_args(2)
    ir.compile(SoftmaxExchange, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys, zs)
    x = xs.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(ys, p, rtol=2e-6)
    np.testing.assert_allclose(zs, x * np.roll(p.sum(axis=1, keepdims=True), 1, axis=0), rtol=4e-6)


def test_a_tile_row_sum_needs_its_scratch() -> None:
    @pl.program
    class NoTmp:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, 1], pl.FP32]]) -> None:
            pl.store(pl.row_sum(pl.load(x, [0, 0], [ROWS, COLS])), [0, 0], y)  # MARK-no-tmp

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, 1], pl.FP32]]) -> None:
            self.k(x, y)

    with pytest.raises(FrontendError, match=re.escape("pl.row_sum of a tile needs tmp_tile")) as err:
        translate(NoTmp, 1, (np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, 1), np.float32)))
    assert err.value.line == _line_of("MARK-no-tmp")


FP32_NEG_INF = -3.4028234663852886e38  # pypto-lib's name for the most negative finite FP32


@pl.program
class Fills:
    """``pl.full`` as pypto-lib uses it: a clamp floor (``maximum(x, full(-inf))``), a reduction's scratch,
    an INT32 ``-1`` (``pl.tile.full``), a BF16 epsilon (``pl.tensor.full``)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          i: pl.Out[pl.Tensor[[ROWS, COLS], pl.INT32]], b: pl.Out[pl.Tensor[[ROWS, COLS], pl.BF16]]) -> None:
        t = pl.maximum(pl.load(x, [0, 0], [ROWS, COLS]), pl.full([ROWS, COLS], pl.FP32, FP32_NEG_INF))
        total = pl.row_sum(t, pl.full([ROWS, COLS], dtype=pl.FP32, value=0.0))
        pl.store(pl.row_expand_sub(t, total), [0, 0], y)
        pl.store(pl.tile.full([ROWS, COLS], pl.INT32, -1), [0, 0], i)
        pl.store(pl.tensor.full([ROWS, COLS], pl.BF16, 1e-4), [0, 0], b)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
                  is_: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.INT32]],
                  bs: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.BF16]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ys[r], is_[r], bs[r], device=r)


def _fill_args(n: int) -> tuple[np.ndarray, ...]:
    xs = np.random.default_rng(13).normal(0.0, 1.0, (n, ROWS, COLS)).astype(np.float32)
    xs[0, 0, 0] = -np.inf  # the clamp makes it the finite floor
    return xs, np.zeros_like(xs), np.zeros((n, ROWS, COLS), np.int32), np.zeros((n, ROWS, COLS), ml_dtypes.bfloat16)


def test_fills_translate_onto_tile_full() -> None:
    built, _ = translate(Fills, 1, _fill_args(1))
    fills = _calls(built.program, Op.TILE_FULL)
    assert sorted((f.type.dtype.value, f.args[1].value) for f in fills) == sorted(
        [("fp32", FP32_NEG_INF), ("fp32", 0.0), ("int32", -1), ("bf16", 1e-4)])


@pytest.mark.launcher
def test_fills_run_on_two_ranks() -> None:
    xs, ys, is_, bs = _fill_args(2)
    ir.compile(Fills, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys, is_, bs)
    t = np.maximum(xs, np.float32(FP32_NEG_INF))
    assert t[0, 0, 0] == np.float32(FP32_NEG_INF)
    sums = t[..., :8] + t[..., 8:]  # the binary tree of 16 columns, in FP32
    for w in (4, 2, 1):
        sums = sums[..., :w] + sums[..., w:]
    np.testing.assert_array_equal(ys, t - sums)
    np.testing.assert_array_equal(is_, np.full_like(is_, -1))
    np.testing.assert_array_equal(bs, np.full(bs.shape, np.float64(1e-4)).astype(ml_dtypes.bfloat16))


@pl.program
class MeanScale:
    """pypto-lib's RMS norm scales a sum of squares by ``1.0 / D``: a true division of Python numbers,
    folded to a float constant where it is written."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        pl.store(pl.mul(pl.load(x, [0, 0], [ROWS, COLS]), 1.0 / COLS), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(x, y)


@pytest.mark.launcher
def test_a_true_division_of_python_numbers_is_a_constant() -> None:
    x = np.random.default_rng(3).normal(0.0, 1.0, (ROWS, COLS)).astype(np.float32)
    y = np.zeros_like(x)
    ir.compile(MeanScale, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    np.testing.assert_array_equal(y, x * np.float32(1.0 / COLS))


@pl.program
class HostCast:
    """pypto-lib's HOST orchestrators pass ``pl.cast(0, pl.INT32)`` and ``pl.const(1, pl.INT32)`` as a device's
    scalar arguments."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          scale: pl.Scalar[pl.FP32], shift: pl.Scalar[pl.FP32]) -> None:
        pl.store(pl.mul(pl.add(pl.load(x, [0, 0], [ROWS, COLS]), shift), scale), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(x, y, pl.cast(3, pl.FP32), pl.const(1, pl.FP32))


@pytest.mark.launcher
def test_a_host_cast_of_a_number_is_the_number() -> None:
    x = np.random.default_rng(2).normal(0.0, 1.0, (ROWS, COLS)).astype(np.float32)
    y = np.zeros_like(x)
    ir.compile(HostCast, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    np.testing.assert_array_equal(y, (x + np.float32(1.0)) * np.float32(3.0))


def test_a_fill_value_must_be_a_constant() -> None:
    @pl.program
    class Dynamic:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            pl.store(pl.full([ROWS, COLS], pl.FP32, pl.read(x, [0, 0])), [0, 0], y)  # MARK-dynamic-fill

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            self.k(x, y)

    with pytest.raises(FrontendError, match=re.escape("pl.full: value must be a constant int or float")) as err:
        translate(Dynamic, 1, (np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.float32)))
    assert err.value.line == _line_of("MARK-dynamic-fill")


@pl.program
class Broadcasts:
    """pypto's tensor broadcasting ``[M, N] op [M, 1]`` (its conversion's row_expand ops) and the scalar
    right operands of maximum / minimum (``tile.maximums`` / ``minimums``: pypto-lib's SwiGLU clamp)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [ROWS, COLS])
        m = pl.row_max(x)
        centred = pl.div(pl.sub(t, m), pl.add(pl.mul(t, 0.0), 2.0))
        pl.store(pl.minimum(pl.maximum(pl.mul(centred, m), -1.5), 1.5), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
                  ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ys[r], device=r)


def test_broadcasts_and_scalar_extremes_translate_to_row_expands() -> None:
    xs = np.zeros((1, ROWS, COLS), np.float32)
    built, _ = translate(Broadcasts, 1, (xs, xs.copy()))
    p = built.program
    assert [len(_calls(p, op)) for op in (Op.TILE_ROW_EXPAND_SUB, Op.TILE_ROW_EXPAND_MUL, Op.TILE_MAXIMUMS,
                                          Op.TILE_MINIMUMS, Op.TILE_DIV)] == [1, 1, 1, 1, 1]


@pytest.mark.launcher
def test_broadcasts_run_on_two_ranks() -> None:
    xs = np.random.default_rng(14).normal(0.0, 2.0, (2, ROWS, COLS)).astype(np.float32)
    ys = np.zeros_like(xs)
    ir.compile(Broadcasts, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys)
    m = xs.max(axis=-1, keepdims=True)
    want = np.clip(((xs - m) / np.float32(2.0)) * m, np.float32(-1.5), np.float32(1.5))  # FP32 throughout
    np.testing.assert_array_equal(ys, want)


def test_a_narrow_first_operand_is_refused() -> None:
    @pl.program
    class Swapped:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            pl.store(pl.sub(pl.row_max(x), x), [0, 0], y)  # MARK-swapped

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            self.k(x, y)

    with pytest.raises(FrontendError, match=re.escape("pl.sub: the [M, 1] operand comes first")) as err:
        translate(Swapped, 1, (np.zeros((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.float32)))
    assert err.value.line == _line_of("MARK-swapped")


@pl.program
class TileSpellings:
    """pypto's tile-module names with their own parameter names (``tmp``, ``tmp_tile``, ``row_vec``,
    ``col_vec``, ``target``) and the tensor-module expands."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        t = pl.load(x, [0, 0], [ROWS, COLS])
        r = pl.tile.rsqrt(t, tmp=pl.tile.full([ROWS, COLS], pl.FP32, 0.0))
        rows = pl.tile.row_min(tile=r, tmp_tile=t)
        cols = pl.tile.col_sum(r, t)
        spread = pl.tile.row_expand(target=r, row_vec=rows)
        both = pl.tile.col_expand_add(tile=spread, col_vec=cols)
        widest = pl.tile.col_max(pl.tensor.col_expand(both, cols))
        pl.store(pl.tensor.row_expand_max(pl.col_expand_mul(both, widest), rows), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(xs, ys)


def test_tile_module_spellings_bind_pyptos_parameter_names() -> None:
    xs = np.zeros((ROWS, COLS), np.float32)
    built, _ = translate(TileSpellings, 1, (xs, xs.copy()))
    p = built.program
    (rsqrt,) = _calls(p, Op.TILE_RSQRT)
    assert len(rsqrt.args) == 2
    assert len(_calls(p, Op.TILE_COL_SUM)[0].args) == 2  # the scratch: a binary tree
    assert [len(_calls(p, op)) for op in (Op.TILE_ROW_MIN, Op.TILE_ROW_EXPAND, Op.TILE_COL_EXPAND_ADD,
                                          Op.TILE_ROW_EXPAND_MAX, Op.TILE_COL_EXPAND, Op.TILE_COL_MAX,
                                          Op.TILE_COL_EXPAND_MUL)] == [1] * 7


T_ROWS = 8  # an FP32 [1, 8] row and [8, 1] column are 32 bytes: ptoas's tile alignment
INV_K = 1.0 / (2 * COLS)  # pypto-lib's HC_DIM_INV


@pl.program
class InverseRms:
    """pypto-lib's hc_pre inverse RMS: a ``pl.full`` accumulator (a tensor to pypto) carried through a K loop
    whose branch re-binds it, then a tensor-level ``rsqrt(..., high_precision=True)`` of the carry."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[T_ROWS, 2 * COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, T_ROWS], pl.FP32]]) -> None:
        sq = pl.full([1, T_ROWS], dtype=pl.FP32, value=0.0)
        for kb in pl.range(2):
            if kb == 0:
                head = x[0:T_ROWS, 0:COLS]
                sq = pl.add(sq, pl.reshape(pl.row_sum(pl.mul(head, head)), [1, T_ROWS]))
            else:
                tail = pl.slice(x, [T_ROWS, COLS], [0, kb * COLS])
                sq = pl.add(sq, pl.reshape(pl.row_sum(pl.mul(tail, tail)), [1, T_ROWS]))
        inv = pl.rsqrt(pl.add(pl.mul(sq, INV_K), 1e-6), high_precision=True)
        y = pl.assemble(y, inv, [0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, T_ROWS, 2 * COLS], pl.FP32],
                  ys: pl.Out[pl.Tensor[[NR, 1, T_ROWS], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ys[r], device=r)


def _rms_args(n: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.random.default_rng(14).normal(0.0, 3.0, (n, T_ROWS, 2 * COLS)).astype(np.float32)
    return xs, np.zeros((n, 1, T_ROWS), np.float32)


def test_a_full_accumulator_is_a_tensor_through_its_loop() -> None:
    built, _ = translate(InverseRms, 1, _rms_args(1))
    (rsqrt,) = _calls(built.program, Op.TILE_RSQRT)
    assert len(rsqrt.args) == 2  # tensor-level high_precision: pypto's synthesised scratch


@pytest.mark.launcher
def test_inverse_rms_runs_on_two_ranks() -> None:
    xs, ys = _rms_args(2)
    ir.compile(InverseRms, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys)
    mean_sq = (xs.astype(np.float64) ** 2).mean(axis=-1)
    np.testing.assert_allclose(ys[:, 0, :], 1.0 / np.sqrt(mean_sq + 1e-6), rtol=2e-6)


@pl.jit.incore
def jit_inverse_rms(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    sq = pl.full([1, T_ROWS], dtype=pl.FP32, value=0.0)
    for kb in pl.range(2):
        part = x[0:T_ROWS, kb * COLS:kb * COLS + COLS]
        sq = pl.add(sq, pl.reshape(pl.row_sum(pl.mul(part, part)), [1, T_ROWS]))
    return pl.assemble(y, pl.rsqrt(pl.add(pl.mul(sq, INV_K), 1e-6), high_precision=True), [0, 0])


@pl.jit
def jit_rms_entry(x: pl.Tensor[[T_ROWS, 2 * COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, T_ROWS], pl.FP32]]):
    return jit_inverse_rms(x, y)


def test_a_jit_kernel_takes_the_tensor_form_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path))  # pypto's build folder, not the working one
    xs, ys = (a[0] for a in _rms_args(1))
    built, _ = translate(jit_rms_entry.compile(xs, ys).program, 1, [xs, ys])
    (rsqrt,) = _calls(built.program, Op.TILE_RSQRT)
    assert len(rsqrt.args) == 2
