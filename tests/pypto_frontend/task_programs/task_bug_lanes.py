"""pypto #1981's pattern (pldemu's own program in pypto's class form, written here): the two AIV lanes of a
``pl.split_aiv`` region exchange halves through GM. Each lane stages its scaled half in a scratch tensor
and then reads the other lane's half back. The lanes run at once with no order between them, so without a
barrier a lane may read the other's rows before they are written. The fix puts pypto's cross-lane
sequence between the store and the load: publish the cache lines, fence, a soft ``syncall`` of the two
AIV lanes, invalidate before reading (docs/en/user/language/04-scopes.md, "Cross-lane ordering")."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

H = 4
W = 8
NR = pl.dynamic("NR")


def lane_swap(barrier: bool):
    @pl.program
    class LaneSwap:
        @pl.function(type=pl.FunctionType.InCore)
        def swap(self, x: pl.Tensor[[2 * H, W], pl.FP32], stage: pl.InOut[pl.Tensor[[2 * H, W], pl.FP32]],
                 ws: pl.InOut[pl.Tensor[[1, 16], pl.INT32]],
                 y: pl.Out[pl.Tensor[[2 * H, W], pl.FP32]]) -> pl.Tensor[[2 * H, W], pl.FP32]:
            for lane in pl.split_aiv(2, mode=pl.SplitMode.NONE):
                mine = pl.load(x, [lane * H, 0], [H, W])
                stage = pl.store(pl.mul(mine, 2.0), [lane * H, 0], stage)
                if barrier:
                    pl.system.cacheinvalid()
                    pl.system.fence()
                    pl.system.syncall(mode="soft", core_type="aiv_only", gm_workspace=ws, used_cores=2)
                    pl.system.cacheinvalid()
                # BUG without the barrier: the other lane's rows may not be staged yet
                theirs = pl.load(stage, [(1 - lane) * H, 0], [H, W])
                y = pl.store(pl.add(mine, theirs), [lane * H, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[2 * H, W], pl.FP32],
                 y: pl.Out[pl.Tensor[[2 * H, W], pl.FP32]]) -> pl.Tensor[[2 * H, W], pl.FP32]:
            stage = pl.create_tensor([2 * H, W], dtype=pl.FP32)
            ws = pl.create_tensor([1, 16], dtype=pl.INT32, init_value=0)
            y = self.swap(x, stage, ws, y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 2 * H, W], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, 2 * H, W], pl.FP32]]) -> pl.Tensor[[NR, 2 * H, W], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], device=r)
            return y

    return LaneSwap


def _run(device_ids, devices, barrier):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(lane_swap(barrier), distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    x = torch.randn((devices, 2 * H, W), generator=torch.Generator().manual_seed(1981)).share_memory_()
    y = torch.zeros((devices, 2 * H, W)).share_memory_()
    compiled(x, y)
    swapped = torch.cat([x[:, H:], x[:, :H]], dim=1)
    assert torch.equal(y, x + swapped * 2.0)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_lanes_exchange_without_a_barrier(device_ids, devices):
    _run(device_ids, devices, False)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_lanes_exchange_after_the_barrier(device_ids, devices):
    _run(device_ids, devices, True)
