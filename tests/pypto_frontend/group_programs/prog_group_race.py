"""A race inside a comm group, in pypto's style, at 3 ranks: devices {1, 2} form a group (``pl.range(1, 3)``,
peer ``2 - r`` group-local) and device 0 only copies its row. Without the wait, a device reads its
group peer's window while the peer may still be storing into it: pldemu must report the race naming the
peer both ways ("peer 1 of group {1, 2} = rank 2"). With the wait (the fixed program) it runs clean."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

COLS = 16
NDEV = 3


def build(with_wait: bool):
    """The program; ``with_wait=False`` leaves the read unordered after the peer's store."""

    @pl.program
    class GroupSwap:
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
            if with_wait:
                pld.system.wait(signal=flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            theirs = pld.tile.remote_load(slot, peer=peer, offsets=[0, 0], shape=[1, COLS])
            return pl.store(theirs, [0, 0], got)

        @pl.function(type=pl.FunctionType.InCore)
        def copy(
            self,
            row: pl.Tensor[[1, COLS], pl.FP32],
            got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        ) -> pl.Tensor[[1, COLS], pl.FP32]:
            mine = pl.load(row, [0, 0], [1, COLS])
            return pl.store(mine, [0, 0], got)

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
        def do_copy(
            self,
            row: pl.Tensor[[1, COLS], pl.FP32],
            got: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        ) -> pl.Tensor[[1, COLS], pl.FP32]:
            return self.copy(row, got)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            rows: pl.Tensor[[NDEV, 1, COLS], pl.FP32],
            gots: pl.Out[pl.Tensor[[NDEV, 1, COLS], pl.FP32]],
        ) -> pl.Tensor[[NDEV, 1, COLS], pl.FP32]:
            slot_mem = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            flag_mem = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
            self.do_copy(rows[0], gots[0], device=0)
            for r in pl.range(1, 3):
                slot = pld.window(slot_mem, [COLS], dtype=pl.FP32)
                flag = pld.window(flag_mem, [8, 1], dtype=pl.INT32)
                self.do_swap(rows[r], gots[r], slot, flag, 2 - r, device=r)
            return gots

    return GroupSwap


def _run(program, test_config, device_ids):
    compiled = ir.compile(program, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:NDEV]))
    rows = torch.stack([torch.full((1, COLS), 10.0 + d) for d in range(NDEV)])
    gots = torch.zeros((NDEV, 1, COLS), dtype=torch.float32)
    compiled(rows, gots)
    assert torch.equal(gots, torch.stack([rows[0], rows[2], rows[1]]))


def test_group_race(test_config, device_ids):
    _run(build(with_wait=False), test_config, device_ids)


def test_group_fixed(test_config, device_ids):
    _run(build(with_wait=True), test_config, device_ids)
