"""pypto's class form (tests/st's): a @pl.program with two InCore @pl.function kernels and an Orchestration
function calling them in a pl.range over row tiles (the kernels' pl.Tile annotations, pl.InOut accumulation
across calls), compiled by ir.compile for one device and run by the HOST function's dispatch: a tiled
softmax (row_max / row_expand_sub / exp / row_sum / row_expand_div with tmp tiles) then a residual matmul
whose K loop is a pl.range with matmul_acc(init_cond=(k == 0))."""
import numpy as np
import pypto.language as pl
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

R, C, TR = 32, 32, 16


@pl.program
class SoftmaxMM:
    @pl.function(type=pl.FunctionType.InCore)
    def softmax(self, x: pl.Tensor[[R, C], pl.FP32], r0: pl.Scalar[pl.INDEX],
                p: pl.InOut[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        t: pl.Tile[[TR, C], pl.FP32] = pl.load(x, [r0, 0], [TR, C])
        tmp: pl.Tile[[TR, C], pl.FP32] = pl.create_tile([TR, C], pl.FP32)
        e = pl.exp(pl.row_expand_sub(t, pl.row_max(t, tmp)))
        out = pl.store(pl.row_expand_div(e, pl.row_sum(e, tmp)), [r0, 0], p)
        return out

    @pl.function(type=pl.FunctionType.InCore)
    def proj(self, p: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[C, C], pl.FP32], r0: pl.Scalar[pl.INDEX],
             y: pl.InOut[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        acc = pl.create_tile([TR, C], pl.FP32, target_memory=pl.MemorySpace.Acc)
        for k in pl.range(0, C, 8):
            a = pl.move(pl.load(p, [r0, k], [TR, 8], target_memory=pl.MemorySpace.Mat),
                        target_memory=pl.MemorySpace.Left)
            b = pl.move(pl.load(w, [k, 0], [8, C], target_memory=pl.MemorySpace.Mat),
                        target_memory=pl.MemorySpace.Right)
            acc = pl.matmul_acc(acc, a, b, init_cond=(k == 0))
        res = pl.add(pl.load(p, [r0, 0], [TR, C]), acc)
        out = pl.store(res, [r0, 0], y)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[C, C], pl.FP32],
             p: pl.InOut[pl.Tensor[[R, C], pl.FP32]], y: pl.InOut[pl.Tensor[[R, C], pl.FP32]]) -> None:
        for r in pl.range(0, R, TR):
            p = self.softmax(x, r, p)
            y = self.proj(p, w, r, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[C, C], pl.FP32],
             p: pl.InOut[pl.Tensor[[R, C], pl.FP32]], y: pl.InOut[pl.Tensor[[R, C], pl.FP32]]) -> None:
        self.orch(x, w, p, y, device=0)


def test_program_class_softmax_matmul():
    rng = np.random.default_rng(53)
    x = (rng.standard_normal((R, C)) * 3).astype(np.float32)
    w = rng.standard_normal((C, C)).astype(np.float32)
    p, y = np.zeros((R, C), np.float32), np.zeros((R, C), np.float32)
    ir.compile(SoftmaxMM, distributed_config=DistributedConfig(device_ids=[0]))(x, w, p, y)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(p, sm, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y, p + p.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
