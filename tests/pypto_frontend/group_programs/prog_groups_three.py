"""Three comm groups at 5 ranks, in pypto's style: X = {0, 4} (two constant-device dispatches, so its
group-local peer 1 is device 4), Y = {1, 2, 3} (``pl.range(1, 4)``) running a device-level allreduce
over its own [3, 1] signal, and Z = {2, 3} (``pl.range(2, 4)``) swapping with peer ``3 - r``."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

COLS = 16
NDEV = 5


@pl.program
class ThreeGroups:
    @pl.function(type=pl.FunctionType.InCore)
    def swap(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        flag: pl.InOut[pld.DistributedTensor[[8, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        mine = pl.load(row, [0, 0], [1, COLS])
        pl.store(mine, [0, 0], slot)
        pld.system.notify(flag, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        theirs = pld.tile.remote_load(slot, peer=peer, offsets=[0, 0], shape=[1, COLS])
        return pl.store(theirs, [0, 0], got)

    @pl.function(type=pl.FunctionType.InCore)
    def summed(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[3, 1], pl.INT32]],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        mine = pl.load(row, [0, 0], [1, COLS])
        pl.store(mine, [0, 0], data)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
        total = pl.load(data, [0, 0], [1, COLS])
        return pl.store(total, [0, 0], got)

    @pl.function(type=pl.FunctionType.Orchestration)
    def do_swap(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        flag: pl.InOut[pld.DistributedTensor[[8, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        return self.swap(row, got, slot, flag, peer)

    @pl.function(type=pl.FunctionType.Orchestration)
    def do_sum(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[3, 1], pl.INT32]],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        return self.summed(row, got, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        rows: pl.Tensor[[NDEV, 1, COLS], pl.FP32],
        got_x: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
        got_y: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
        got_z: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
    ) -> pl.Tensor[[NDEV, 1, COLS], pl.FP32]:
        slot_x = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        flag_x = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
        data_y = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        signal_y = pld.alloc_window_buffer(3 * pl.INT32.get_byte())
        slot_z = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        flag_z = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
        # X = {0, 4}: device 0 is group rank 0, device 4 group rank 1.
        self.do_swap(rows[0], got_x[0], pld.window(slot_x, [1, COLS], dtype=pl.FP32),
                     pld.window(flag_x, [8, 1], dtype=pl.INT32), 1, device=0)
        self.do_swap(rows[4], got_x[4], pld.window(slot_x, [1, COLS], dtype=pl.FP32),
                     pld.window(flag_x, [8, 1], dtype=pl.INT32), 0, device=4)
        for r in pl.range(1, 4):
            self.do_sum(rows[r], got_y[r], pld.window(data_y, [1, COLS], dtype=pl.FP32),
                        pld.window(signal_y, [3, 1], dtype=pl.INT32), device=r)
        for r in pl.range(2, 4):
            self.do_swap(rows[r], got_z[r], pld.window(slot_z, [1, COLS], dtype=pl.FP32),
                         pld.window(flag_z, [8, 1], dtype=pl.INT32), 3 - r, device=r)
        return got_x


def test_three_groups(test_config, device_ids):
    compiled = ir.compile(ThreeGroups, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:NDEV]))
    rows = torch.stack([torch.full((1, COLS), 2.0 ** d) for d in range(NDEV)])
    outs = [torch.zeros((NDEV, 1, COLS), dtype=torch.float32) for _ in range(3)]
    compiled(rows, *outs)
    got_x, got_y, got_z = outs
    zero = torch.zeros((1, COLS), dtype=torch.float32)
    assert torch.equal(got_x, torch.stack([rows[4], zero, zero, zero, rows[0]]))
    total = rows[1] + rows[2] + rows[3]
    assert torch.equal(got_y, torch.stack([zero, total, total, total, zero]))
    assert torch.equal(got_z, torch.stack([zero, zero, rows[3], rows[2], zero]))
