"""Single-chip op forms pypto's own tests (tests/st/runtime/ops) run, written here from scratch: split-K into
column windows of one Acc tile (``pl.tile.slice`` is pypto's ``pto.subview``, which shares the parent's buffer,
so ``pl.matmul_acc`` on the window writes the parent), run against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

M, K, KT, NT, TILES = 16, 64, 32, 32, 2
N = NT * TILES


@pl.program
class AccWindows:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[M, K], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
          c: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        acc = pl.tile.create([M, N], pl.FP32, target_memory=pl.MemorySpace.Acc)
        for t in pl.range(TILES):
            for k0 in pl.range(0, K, KT):
                lhs = pl.move(pl.load(a, [0, k0], [M, KT], target_memory=pl.MemorySpace.Mat),
                              target_memory=pl.MemorySpace.Left)
                rhs = pl.move(pl.load(b, [k0, t * NT], [KT, NT], target_memory=pl.MemorySpace.Mat),
                              target_memory=pl.MemorySpace.Right)
                win = pl.tile.slice(acc, [M, NT], [0, t * NT])
                win = pl.matmul_acc(win, lhs, rhs, init_cond=(k0 == 0))
        c = pl.store(acc, [0, 0], c)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[M, K], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
                  c: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        self.k(a, b, c, device=0)


@pytest.mark.launcher
def test_matmul_acc_into_a_column_window_writes_the_parent_acc_tile() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)  # small integers: the product is exact in FP32
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    c = np.full((M, N), 99.0, np.float32)
    ir.compile(AccWindows, distributed_config=DistributedConfig(device_ids=[0]))(a, b, c)
    np.testing.assert_array_equal(c, a @ b)
