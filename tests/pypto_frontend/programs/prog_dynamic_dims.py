"""Dynamic dims and tuple returns in pypto's style: ``M = pl.dynamic("M")`` is bound from a host tensor
shaped ``[M * 2, COLS]`` and ``NR`` from ``[NR, ...]``; two Orchestrations each return a tuple; the
first dispatch has no ``device=`` (it runs on device 0), the second runs on every device and pulls
device 0's result with ``pld.tile.remote_load`` after a notify / wait. Each device also adds its rank
(``pl.Scalar[pl.INDEX]`` from the host) with ``pl.tile.adds`` and subtracts a scalar with ``pl.sub``
(the ``pl.tile.*`` spellings of pypto's tile-op module)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
M = pl.dynamic("M")
COLS = 8


@pl.program
class DynamicDims:
    @pl.function(type=pl.FunctionType.InCore)
    def split(
        self,
        x: pl.Tensor[[M * 2, COLS], pl.FP32],
        top: pl.Out[pl.Tensor[[M, COLS], pl.FP32]],
        shared: pl.InOut[pld.DistributedTensor[[M, COLS], pl.FP32]],
    ) -> tuple[pl.Tensor[[M, COLS], pl.FP32], pld.DistributedTensor[[M, COLS], pl.FP32]]:
        upper = pl.load(x, [0, 0], [M, COLS])
        lower = pl.load(x, [M, 0], [M, COLS])
        top = pl.store(upper, [0, 0], top)
        shared = pl.store(pl.add(upper, lower), [0, 0], shared)
        return top, shared

    @pl.function(type=pl.FunctionType.Orchestration)
    def split_orch(
        self,
        x: pl.Tensor[[M * 2, COLS], pl.FP32],
        top: pl.Out[pl.Tensor[[M, COLS], pl.FP32]],
        shared: pl.InOut[pld.DistributedTensor[[M, COLS], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[M, COLS], pl.FP32], pld.DistributedTensor[[M, COLS], pl.FP32]]:
        top, shared = self.split(x, top, shared)
        for d in pl.range(pld.world_size()):
            pld.system.notify(ready, peer=d, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        return top, shared

    @pl.function(type=pl.FunctionType.InCore)
    def fetch(
        self,
        shared: pld.DistributedTensor[[M, COLS], pl.FP32],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        out: pl.Out[pl.Tensor[[M, COLS], pl.FP32]],
        shift: pl.Scalar[pl.INDEX],
    ) -> pl.Tensor[[M, COLS], pl.FP32]:
        pld.system.wait(signal=ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        got = pld.tile.remote_load(shared, peer=0, offsets=[0, 0], shape=[M, COLS])
        shifted = pl.tile.adds(got, pl.cast(shift, pl.INT32))
        return pl.tile.store(pl.sub(shifted, 0.5), [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def fetch_orch(
        self,
        shared: pld.DistributedTensor[[M, COLS], pl.FP32],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        out: pl.Out[pl.Tensor[[M, COLS], pl.FP32]],
        shift: pl.Scalar[pl.INDEX],
    ) -> tuple[pl.Tensor[[M, COLS], pl.FP32], pld.DistributedTensor[[NR, 1], pl.INT32]]:
        out = self.fetch(shared, ready, out, shift)
        return out, ready

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        x: pl.Tensor[[M * 2, COLS], pl.FP32],
        top: pl.Out[pl.Tensor[[M, COLS], pl.FP32]],
        outs: pl.Out[pl.Tensor[[NR, M, COLS], pl.FP32]],
    ) -> tuple[pl.Tensor[[M, COLS], pl.FP32], pl.Tensor[[NR, M, COLS], pl.FP32]]:
        shared_buf = pld.alloc_window_buffer(M * COLS * pl.FP32.get_byte())
        ready_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        shared = pld.window(shared_buf, [M, COLS], dtype=pl.FP32)
        ready = pld.window(ready_buf, [pld.world_size(), 1], dtype=pl.INT32)
        top, shared = self.split_orch(x, top, shared, ready, device=0)
        for r in pl.range(pld.world_size()):
            _, _ = self.fetch_orch(shared, ready, outs[r], r, device=r)
        return top, outs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_dynamic_dims_and_tuples(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    m = n_ranks + 1
    compiled = ir.compile(DynamicDims, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    x = torch.arange(2 * m * COLS, dtype=torch.float32).reshape(2 * m, COLS)
    top = torch.zeros((m, COLS), dtype=torch.float32)
    outs = torch.zeros((n_ranks, m, COLS), dtype=torch.float32)
    compiled(x, top, outs)
    assert torch.equal(top, x[:m]), top
    summed = x[:m] + x[m:]
    assert torch.equal(outs, torch.stack([summed + r - 0.5 for r in range(n_ranks)])), outs
