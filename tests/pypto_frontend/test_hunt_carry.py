"""A tile carried through ``pl.range(init_values=)`` and given back by ``pl.yield_`` in another memory space:
a split-K accumulator begun as a Vec ``pl.tile.full`` and yielded from ``pl.matmul_acc`` (in Acc). pypto's
InferTileMemorySpace re-spaces the carry; pldemu moves the yielded tile back to the carry's space, as it does
when the carried name is re-bound. Golden: numpy (float64 products rounded once to FP32 per K chunk)."""

from __future__ import annotations

import ml_dtypes
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
M, K, N, KT = 16, 64, 32, 32
BF16 = np.dtype(ml_dtypes.bfloat16)


@pl.program
class YieldedAcc:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
          c: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        zero = pl.tile.full([M, N], pl.FP32, 0.0)
        for k0, (acc,) in pl.range(0, K, KT, init_values=(zero,)):
            a_l = pl.move(pl.load(a, [0, k0], [M, KT], target_memory=pl.MemorySpace.Mat), pl.MemorySpace.Left)
            b_r = pl.move(pl.load(b, [k0, 0], [KT, N], target_memory=pl.MemorySpace.Mat), pl.MemorySpace.Right)
            total = pl.yield_(pl.matmul_acc(acc, a_l, b_r))
        pl.store(total, [0, 0], c)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[NR, M, K], pl.BF16], b: pl.Tensor[[NR, K, N], pl.BF16],
                  c: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(a[r], b[r], c[r], device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((n, M, K)).astype(BF16)
    b = rng.standard_normal((n, K, N)).astype(BF16)
    return a, b, np.zeros((n, M, N), np.float32)


def test_the_yielded_acc_tile_is_moved_back_to_the_carry() -> None:
    built, _ = translate(YieldedAcc, 2, _args(2))
    moves = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_MOVE]
    assert any(str(c.type.memory.name) == "Vec" for c in moves)


@pytest.mark.launcher
def test_yielded_split_k_runs() -> None:
    a, b, c = _args(2)
    ir.compile(YieldedAcc, distributed_config=DistributedConfig(device_ids=[0, 1]))(a, b, c)
    for r in range(2):
        af, bf = a[r].astype(np.float64), b[r].astype(np.float64)
        want = (af[:, :KT] @ bf[:KT]).astype(np.float32)
        want = (want.astype(np.float64) + af[:, KT:] @ bf[KT:]).astype(np.float32)
        np.testing.assert_array_equal(c[r], want)
