"""``pl.create_tensor`` inside a kernel, a ``pl.spmd`` body or a ``pl.at`` region is a tile of the core that
runs it (pypto's ConvertTensorToTileOps makes it a Vec ``tile.create``): each SPMD block has its own, so the
blocks of a task never share it. The split-K idiom on one (``pl.matmul`` at the first K step, ``pl.matmul_acc``
of itself after, through an if/else in a ``pl.pipeline`` / ``pl.range`` loop) is carried like any tile. Run on
one and two ranks against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS, KDIM, COLS = 32, 64, 16
"""x is ROWS x KDIM, w is COLS x KDIM (b_trans), y = x @ w.T is ROWS x COLS."""
RT, KT, SPLITS = 16, 16, 2
"""A block's row tile, the K chunk, and the K splits (each block sums KDIM / SPLITS of K)."""
BLOCKS = (ROWS // RT) * SPLITS
CHUNKS = KDIM // SPLITS // KT
VALID = 24
"""The rows of x that hold tokens: the last row tile is valid for VALID - RT rows (a valid-shaped slice)."""


@pl.program
class SplitK:
    """Split-K in an SPMD task: block ``task`` takes row tile ``task // SPLITS`` and K split ``task % SPLITS``,
    accumulates its chunks in a created tensor (its own, per block), and writes its partial; a second task
    adds the partials. Rows from VALID on are a valid-shaped slice's padding (the first step's product has a
    narrower valid box than the carry: the carry keeps its own, as pypto's loop-carried value keeps its type). ``scaled`` does it in a ``pl.at`` region with ``pl.range`` and a scalar carried too."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, KDIM], pl.FP32], w: pl.Tensor[[COLS, KDIM], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             scaled: pl.Out[pl.Tensor[[RT, COLS], pl.FP32]]) -> None:
        partials = pl.create_tensor([SPLITS * ROWS, COLS], dtype=pl.FP32)
        for task in pl.spmd(BLOCKS, name_hint="split_k"):
            r0 = (task // SPLITS) * RT
            split = task % SPLITS
            rows = pl.min(RT, VALID - r0)
            acc = pl.create_tensor([RT, COLS], dtype=pl.FP32)
            for kb in pl.pipeline(0, CHUNKS, stage=2):
                k0 = (split * CHUNKS + kb) * KT
                xs = pl.slice(x, [RT, KT], [r0, k0], valid_shape=[rows, KT])
                ws = pl.slice(w, [COLS, KT], [0, k0])
                if kb == 0:
                    acc = pl.matmul(xs, ws, b_trans=True, out_dtype=pl.FP32)
                else:
                    acc = pl.matmul_acc(acc, xs, ws, b_trans=True)
            partials = pl.assemble(partials, acc, [split * ROWS + r0, 0])
        for blk in pl.spmd(ROWS // RT, name_hint="reduce"):
            total = partials[blk * RT:blk * RT + RT, 0:COLS]
            for s in pl.range(1, SPLITS):
                total = pl.add(total, partials[s * ROWS + blk * RT:s * ROWS + blk * RT + RT, 0:COLS])
            y = pl.assemble(y, total, [blk * RT, 0])
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="scaled"):
            cacc = pl.create_tensor([RT, COLS], dtype=pl.FP32)
            for k0 in pl.range(0, KDIM, KT):
                if k0 == 0:
                    cacc = pl.matmul(x[0:RT, k0:k0 + KT], w[:, k0:k0 + KT], b_trans=True, out_dtype=pl.FP32)
                else:
                    cacc = pl.matmul_acc(cacc, x[0:RT, k0:k0 + KT], w[:, k0:k0 + KT], b_trans=True)
            scaled = pl.assemble(scaled, pl.mul(cacc, 2.0), [0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, KDIM], pl.FP32], w: pl.Tensor[[NR, COLS, KDIM], pl.FP32],
                  y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
                  scaled: pl.Out[pl.Tensor[[NR, RT, COLS], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], w[r], y[r], scaled[r], device=r)


@pl.program
class OwnScratch:
    """Each block fills a created tensor with its own values in two steps (assemble, then read back and
    assembled again) and writes it out: a scratch shared by the blocks would mix them (and race)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        for blk in pl.spmd(ROWS // RT, name_hint="own"):
            scratch = pl.create_tensor([RT, COLS], dtype=pl.FP32)
            scratch = pl.assemble(scratch, pl.slice(x, [RT, COLS], [blk * RT, 0]), [0, 0])
            scratch[0:RT, 0:COLS] = pl.add(scratch[0:RT, 0:COLS], scratch)
            pl.tensor.write(scratch, [0, 0], pl.tensor.read(scratch, [0, 0]) * 2.0)  # tile.write / tile.read
            y = pl.assemble(y, scratch, [blk * RT, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


def _split_k_args(nranks: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(41)
    x = rng.integers(-4, 5, (nranks, ROWS, KDIM)).astype(np.float32)  # small integers: every sum is exact
    w = rng.integers(-4, 5, (nranks, COLS, KDIM)).astype(np.float32)
    return x, w, np.zeros((nranks, ROWS, COLS), np.float32), np.zeros((nranks, RT, COLS), np.float32)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_split_k_in_a_created_tensor_per_block(nranks: int) -> None:
    x, w, y, scaled = _split_k_args(nranks)
    ir.compile(SplitK, distributed_config=DistributedConfig(device_ids=list(range(nranks))))(x, w, y, scaled)
    want = x @ w.transpose(0, 2, 1)
    np.testing.assert_array_equal(y[:, :VALID], want[:, :VALID])  # past VALID: the padding's undefined rows
    np.testing.assert_array_equal(scaled, 2 * want[:, :RT])


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_blocks_each_have_their_own_created_tensor(nranks: int) -> None:
    x = np.random.default_rng(42).integers(-8, 9, (nranks, ROWS, COLS)).astype(np.float32)
    y = np.zeros_like(x)
    ir.compile(OwnScratch, distributed_config=DistributedConfig(device_ids=list(range(nranks))))(x, y)
    want = 2 * x
    want[:, ::RT, 0] *= 2
    np.testing.assert_array_equal(y, want)


def test_a_kernels_created_tensor_is_a_tile_an_orchestrations_a_buffer() -> None:
    built, _ = translate(SplitK, 1, _split_k_args(1))
    calls = [c for f in built.program.functions for c in function_calls(f)]
    assert [c.op for c in calls].count(Op.TILE_CREATE) == 2  # acc (once per block) and cacc
    local = [d.var.name for d in built.program.buffers if d.var.name.startswith(("partials", "acc", "cacc"))]
    assert local == [n for n in local if n.startswith("partials")] and local
