"""pypto's cube: ``pl.matmul`` / ``pl.matmul_acc`` (unified, tensor and tile spellings), ``pl.move``,
``pl.load(..., target_memory=)``, ``pl.MemorySpace`` / ``pl.Mem`` and ``pl.Tile[...]`` translate onto
pldemu's tile.move / tile.matmul / tile.batch_matmul / tile.matmul_acc and run on two ranks to goldens
computed here (float64, rounded once to FP32; exact integers wrapped to INT32)."""

from __future__ import annotations

import inspect
import re

import ml_dtypes
import numpy as np
import pytest

from pldemu.ir.enums import MemorySpace
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
M, K, N, KT = 16, 64, 32, 32
BF16 = np.dtype(ml_dtypes.bfloat16)


def _calls(program: Program, op: Op) -> list:  # type: ignore[type-arg]
    return [c for f in program.functions for c in function_calls(f) if c.op is op]


@pl.program
class Cube:
    """Tile level: a split-K GEMM of BF16 (Mat loads, explicit Left / Right moves, matmul_acc with init_cond),
    its result added to the peer's; tensor level: ``b_trans`` with ``out_dtype=FP32``, an INT8 product in INT32,
    and pypto-lib's MoE shape (a 2-D activation times a 3-D weight slice, ``b_trans``)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16], bt: pl.Tensor[[N, K], pl.BF16],
          qa: pl.Tensor[[M, K], pl.INT8], qb: pl.Tensor[[K, N], pl.INT8], w: pl.Tensor[[1, N, K], pl.BF16],
          c: pl.Out[pl.Tensor[[4, M, N], pl.FP32]], qc: pl.Out[pl.Tensor[[M, N], pl.INT32]],
          win: pld.DistributedTensor[[M, N], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
          peer: pl.Scalar[pl.INDEX]) -> None:
        acc = pl.tile.full([M, N], dtype=pl.FP32, value=0.0)
        for k0 in pl.range(0, K, KT):
            a_l1 = pl.load(a, [0, k0], [M, KT], target_memory=pl.MemorySpace.Mat)
            b_l1 = pl.load(b, [k0, 0], [KT, N], target_memory=pl.Mem.Mat)
            acc = pl.matmul_acc(acc, pl.move(a_l1, target_memory=pl.MemorySpace.Left),
                                pl.tile.move(b_l1, pl.MemorySpace.Right), init_cond=(k0 == 0))
        pld.tile.remote_store(acc, win, peer, [0, 0])
        pld.system.notify(sig, peer, [0, 0], 1)
        c = pl.assemble(c, acc, [0, 0, 0])
        c = pl.assemble(c, pl.matmul(a, bt, out_dtype=pl.FP32, b_trans=True), [1, 0, 0])
        pl.store(pl.tensor.matmul(qa, qb), [0, 0], qc)  # INT8 x INT8: the INT32 accumulator
        moe = pl.matmul(a, w, out_dtype=pl.FP32, b_trans=True)
        c = pl.assemble(c, moe, [2, 0, 0])
        pld.system.wait(sig, [0, 0], 1)
        c = pl.assemble(c, pl.add(pl.load(win, [0, 0], [M, N]), acc), [3, 0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[NR, M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
                  bt: pl.Tensor[[N, K], pl.BF16], qa: pl.Tensor[[NR, M, K], pl.INT8], qb: pl.Tensor[[K, N], pl.INT8],
                  w: pl.Tensor[[1, N, K], pl.BF16], c: pl.Out[pl.Tensor[[NR, 4, M, N], pl.FP32]],
                  qc: pl.Out[pl.Tensor[[NR, M, N], pl.INT32]]) -> None:
        wbuf = pld.alloc_window_buffer([M, N], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.k(a[r], b, bt, qa[r], qb, w, c[r], qc[r], pld.window(wbuf, [M, N], dtype=pl.FP32),
                   pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(41)
    a = rng.standard_normal((n, M, K)).astype(BF16)
    b = rng.standard_normal((K, N)).astype(BF16)
    bt = rng.standard_normal((N, K)).astype(BF16)
    qa = rng.integers(-128, 128, (n, M, K)).astype(np.int8)
    qb = rng.integers(-128, 128, (K, N)).astype(np.int8)
    w = rng.standard_normal((1, N, K)).astype(BF16)
    return a, b, bt, qa, qb, w, np.zeros((n, 4, M, N), np.float32), np.zeros((n, M, N), np.int32)


def _golden(a: np.ndarray, b: np.ndarray, bt: np.ndarray, qa: np.ndarray, qb: np.ndarray, w: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """float64 products (exact for BF16) summed, rounded once to FP32 per pldemu's K-chunk; INT8 in Python ints."""
    f = [x.astype(np.float64) for x in (a, b, bt, w)]
    a64, b64, bt64, w64 = f
    split = (a64[:, :, :KT] @ b64[:KT]).astype(np.float32)  # the first chunk overwrites (init_cond)
    split = (split.astype(np.float64) + a64[:, :, KT:] @ b64[KT:]).astype(np.float32)
    trans = (a64 @ bt64.T).astype(np.float32)
    moe = (a64 @ w64[0].T).astype(np.float32)
    peer = np.roll(split, 1, axis=0)
    c = np.stack([split, trans, moe, (peer + split).astype(np.float32)], axis=1)
    q = np.einsum("rmk,kn->rmn", qa.astype(object), qb.astype(object))
    return c, np.vectorize(lambda v: (v + 2**31) % 2**32 - 2**31)(q).astype(np.int32)


def test_names_translate_onto_the_cube_ops_with_pyptos_moves() -> None:
    built, _ = translate(Cube, 2, _args(2))
    p = built.program
    mm, acc, bmm = (_calls(p, op) for op in (Op.TILE_MATMUL, Op.TILE_MATMUL_ACC, Op.TILE_BATCH_MATMUL))
    assert (len(mm), len(acc), len(bmm)) == (4, 2, 2)  # per rank: two tensor-level matmuls, one acc, one batch
    for call in [*mm, *acc, *bmm]:
        operands = call.args[-2:] if call.op is not Op.TILE_MATMUL_ACC else call.args[1:3]
        assert [o.type.memory for o in operands] == [MemorySpace.Left, MemorySpace.Right]
        assert call.type.memory is MemorySpace.Acc
    assert bmm[0].type.shape == (1, M, N)  # [M, K] x [1, K, N] (w transposed): pypto-lib's MoE shape
    assert len(acc[0].args) == 4  # init_cond
    moves = {c.attrs[0][1] for c in _calls(p, Op.TILE_MOVE)}
    # Mat loads, the operands' and accumulator's spaces, and the loop's carry back in the space it began in (Vec)
    assert moves == {MemorySpace.Mat, MemorySpace.Left, MemorySpace.Right, MemorySpace.Acc, MemorySpace.Vec}
    assert _calls(p, Op.TILE_TRANSPOSE)  # b_trans


@pytest.mark.launcher
def test_cube_runs_on_two_ranks() -> None:
    args = _args(2)
    ir.compile(Cube, distributed_config=DistributedConfig(device_ids=[0, 1]))(*args)
    c, q = _golden(*args[:6])
    np.testing.assert_array_equal(args[6], c)
    np.testing.assert_array_equal(args[7], q)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
              y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
            ta = pl.load(a, [0, 0], [M, K], target_memory=pl.MemorySpace.Mat)
            tb = pl.load(b, [0, 0], [K, N], target_memory=pl.MemorySpace.Mat)
            if mistake == "load-left":
                pl.load(a, [0, 0], [M, K], target_memory=pl.MemorySpace.Left)  # MARK-load-left
            if mistake == "tile-trans":
                pl.matmul(ta, tb, b_trans=True)  # MARK-tile-trans
            if mistake == "tile-out-dtype":
                pl.matmul(ta, tb, out_dtype=pl.BF16)  # MARK-tile-out-dtype
            if mistake == "acc-dtype":
                pl.matmul_acc(pl.tile.full([M, N], dtype=pl.BF16, value=0.0), ta, tb)  # MARK-acc-dtype
            if mistake == "mixed-dtypes":
                pl.matmul(ta, pl.cast(tb, pl.FP32))  # MARK-mixed-dtypes
            if mistake == "move-ddr":
                pl.move(ta, target_memory=pl.MemorySpace.DDR)  # MARK-move-ddr
            pl.store(pl.matmul(ta, tb), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
                      y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
            self.k(a, b, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("load-left", "pl.load: a load from DDR reaches only Vec or Mat, got Left"),
    ("tile-trans", "pl.matmul: a_trans / b_trans / c_matrix_nz are Tensor-only"),
    ("tile-out-dtype", "pl.matmul: out_dtype bf16 on tiles must be the accumulator dtype fp32"),
    ("acc-dtype", "pl.matmul_acc: acc must be fp32 (the accumulator dtype of bf16 operands), got bf16"),
    ("mixed-dtypes", "pl.matmul requires identical lhs and rhs data types, but got bf16 and fp32"),
    ("move-ddr", "tile.move moves between on-chip spaces"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((M, K), BF16), np.zeros((K, N), BF16), np.zeros((M, N), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


def test_tile_annotation_is_pyptos_subscript() -> None:
    ann = pl.Tile[[M, N], pl.FP32, pl.MemorySpace.Acc]
    assert (ann.dims, ann.dtype, ann.memory) == ((M, N), pl.FP32, MemorySpace.Acc)
    assert pl.Tile[[4, 8], pl.INT8].memory is None and pl.Mem is pl.MemorySpace
    with pytest.raises(Exception, match=r"pl.Tile\[\[dims\], dtype\]"):
        pl.Tile[[4, 8]]
