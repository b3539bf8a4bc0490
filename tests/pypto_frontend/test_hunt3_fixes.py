"""Round 3 of the hunt (tests/pypto_frontend/hunt_programs/hunt3_*.py): pypto's tile spellings pldemu refused as
unknown names (``pl.tile.subs``, ``pl.tile.batch_matmul_acc``), run to numpy goldens."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

B, M, K, N = 2, 16, 16, 16


@pl.program
class TileSpellings:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[M, N], pl.FP32], a: pl.Tensor[[B, M, K], pl.FP32], b: pl.Tensor[[B, K, N], pl.FP32],
          y: pl.Out[pl.Tensor[[M, N], pl.FP32]], c: pl.Out[pl.Tensor[[B, M, N], pl.FP32]]) -> None:
        y = pl.store(pl.tile.subs(pl.load(x, [0, 0], [M, N]), 1.5), [0, 0], y)
        lhs = pl.move(pl.load(a, [0, 0, 0], [B, M, K], target_memory=pl.MemorySpace.Mat),
                      target_memory=pl.MemorySpace.Left)
        rhs = pl.move(pl.load(b, [0, 0, 0], [B, K, N], target_memory=pl.MemorySpace.Mat),
                      target_memory=pl.MemorySpace.Right)
        prod = pl.tile.batch_matmul(lhs, rhs)
        c = pl.store(pl.tile.batch_matmul_acc(prod, lhs, rhs), [0, 0, 0], c)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[M, N], pl.FP32], a: pl.Tensor[[B, M, K], pl.FP32],
                  b: pl.Tensor[[B, K, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]],
                  c: pl.Out[pl.Tensor[[B, M, N], pl.FP32]]) -> None:
        self.k(x, a, b, y, c, device=0)


@pytest.mark.launcher
def test_tile_subs_and_batch_matmul_acc() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((M, N)).astype(np.float32)
    a = rng.integers(-4, 5, (B, M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (B, K, N)).astype(np.float32)
    y, c = np.zeros_like(x), np.zeros((B, M, N), np.float32)
    ir.compile(TileSpellings, distributed_config=DistributedConfig(device_ids=[0]))(x, a, b, y, c)
    np.testing.assert_array_equal(y, x - np.float32(1.5))
    np.testing.assert_array_equal(c, 2 * (a @ b))
