"""Ring shift in pypto's style: every device publishes a row in its window, signals its successor, and
reads its predecessor's row. Run through ``pldemu pytest`` (not collected by pldemu's own suite)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

WIDTH = 48


def ring_shift_program(devices: int):
    NR = devices

    @pl.program
    class RingShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift(
            self,
            row: pl.Tensor[[1, WIDTH], pl.FP32],
            got: pl.Out[pl.Tensor[[1, WIDTH], pl.FP32]],
            slot: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
            ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[1, WIDTH], pl.FP32]:
            ctx = pld.get_comm_ctx(slot)
            me = pld.rank(ctx)
            n = pld.nranks(ctx)
            before = (me + n - 1) % n
            staged = pl.load(row, [0, 0], [1, WIDTH])
            pl.store(staged, [0, 0], slot)
            pld.system.notify(ready, peer=(me + 1) % n, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(signal=ready, offsets=[before, 0], expected=1, cmp=pld.WaitCmp.Ge)
            theirs = pld.tile.remote_load(slot, peer=before, offsets=[0, 0], shape=[1, WIDTH])
            pl.store(theirs, [0, 0], got)
            return got

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_device(
            self,
            row: pl.Tensor[[1, WIDTH], pl.FP32],
            got: pl.Out[pl.Tensor[[1, WIDTH], pl.FP32]],
            slot: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
            ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[1, WIDTH], pl.FP32]:
            return self.shift(row, got, slot, ready)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            rows: pl.Tensor[[NR, 1, WIDTH], pl.FP32],
            gots: pl.Out[pl.Tensor[[NR, 1, WIDTH], pl.FP32]],
        ) -> pl.Tensor[[NR, 1, WIDTH], pl.FP32]:
            slot_mem = pld.alloc_window_buffer(WIDTH * pl.FP32.get_byte())
            ready_mem = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
            for d in pl.range(pld.world_size()):
                slot = pld.window(slot_mem, [1, WIDTH], dtype=pl.FP32)
                ready = pld.window(ready_mem, [pld.world_size(), 1], dtype=pl.INT32)
                self.per_device(rows[d], gots[d], slot, ready, device=d)
            return gots

    return RingShift


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_ring_shift(test_config, device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(ring_shift_program(devices), platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    rows = torch.stack([torch.full((1, WIDTH), 10.0 * d + 1) + torch.arange(WIDTH) for d in range(devices)])
    gots = torch.zeros((devices, 1, WIDTH), dtype=torch.float32)
    compiled(rows, gots)
    expected = torch.stack([rows[(d + devices - 1) % devices] for d in range(devices)])
    assert torch.equal(gots, expected), (gots - expected).abs().max().item()
