"""Two overlapping comm groups at 4 ranks, in pypto's style: group A = devices {0, 1, 2} and group B =
devices {1, 2, 3}. Each group runs a ring shift over its own windows with the rank and rank count its
comm context gives (group-local), so devices 1 and 2 hold one window of each group and run both shifts."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

COLS = 16
NDEV = 4


@pl.program
class OverlapRings:
    @pl.function(type=pl.FunctionType.InCore)
    def ring(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        flag: pl.InOut[pld.DistributedTensor[[8, 1], pl.INT32]],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        ctx = pld.get_comm_ctx(slot)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        succ = (me + 1) % n
        pred = (me + n - 1) % n
        mine = pl.load(row, [0, 0], [1, COLS])
        pl.store(mine, [0, 0], slot)
        pld.system.notify(flag, peer=succ, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        theirs = pld.tile.remote_load(slot, peer=pred, offsets=[0, 0], shape=[1, COLS])
        return pl.store(theirs, [0, 0], got)

    @pl.function(type=pl.FunctionType.Orchestration)
    def step(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        flag: pl.InOut[pld.DistributedTensor[[8, 1], pl.INT32]],
    ) -> pl.Tensor[[1, COLS], pl.FP32]:
        return self.ring(row, got, slot, flag)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        rows: pl.Tensor[[NDEV, 1, COLS], pl.FP32],
        got_a: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
        got_b: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
    ) -> pl.Tensor[[NDEV, 1, COLS], pl.FP32]:
        slot_a = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        flag_a = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
        slot_b = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        flag_b = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
        for r in pl.range(3):
            self.step(rows[r], got_a[r], pld.window(slot_a, [COLS], dtype=pl.FP32),
                      pld.window(flag_a, [8, 1], dtype=pl.INT32), device=r)
        for r in pl.range(1, 4):
            self.step(rows[r], got_b[r], pld.window(slot_b, [COLS], dtype=pl.FP32),
                      pld.window(flag_b, [8, 1], dtype=pl.INT32), device=r)
        return got_a


def test_overlapping_group_rings(test_config, device_ids):
    compiled = ir.compile(OverlapRings, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:NDEV]))
    rows = torch.stack([torch.full((1, COLS), 10.0 + d) for d in range(NDEV)])
    got_a = torch.zeros((NDEV, 1, COLS), dtype=torch.float32)
    got_b = torch.zeros((NDEV, 1, COLS), dtype=torch.float32)
    compiled(rows, got_a, got_b)
    zero = torch.zeros((1, COLS), dtype=torch.float32)
    # Group A {0, 1, 2}: group rank i reads group rank i - 1 (mod 3).
    assert torch.equal(got_a, torch.stack([rows[2], rows[0], rows[1], zero]))
    # Group B {1, 2, 3}: device 1 is group rank 0 and reads group rank 2 = device 3.
    assert torch.equal(got_b, torch.stack([zero, rows[3], rows[1], rows[2]]))
