"""A window reused too early, as a script (the idea of programs/prog_reuse_race.py): round 2 overwrites
the slot the successor may still be reading for round 1. pldemu reports the race unless ``--no-races``;
the script checks nothing, so without the detector it exits 0."""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

WIDTH = 32
NR = 2


@pl.program
class EarlyReuse:
    @pl.function(type=pl.FunctionType.InCore)
    def rounds(
        self,
        row: pl.Tensor[[1, WIDTH], pl.FP32],
        got: pl.Out[pl.Tensor[[1, WIDTH], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, WIDTH], pl.FP32]:
        ctx = pld.get_comm_ctx(slot)
        me = pld.rank(ctx)
        other = (me + 1) % NR
        first = pl.load(row, [0, 0], [1, WIDTH])
        pl.store(first, [0, 0], slot)
        pld.system.notify(ready, peer=other, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=ready, offsets=[other, 0], expected=1, cmp=pld.WaitCmp.Ge)
        theirs = pld.tile.remote_load(slot, peer=other, offsets=[0, 0], shape=[1, WIDTH])
        pl.store(theirs, [0, 0], got)
        second = pl.add(first, first)
        pl.store(second, [0, 0], slot)
        return got

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_device(
        self,
        row: pl.Tensor[[1, WIDTH], pl.FP32],
        got: pl.Out[pl.Tensor[[1, WIDTH], pl.FP32]],
        slot: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, WIDTH], pl.FP32]:
        return self.rounds(row, got, slot, ready)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        rows: pl.Tensor[[NR, 1, WIDTH], pl.FP32],
        gots: pl.Out[pl.Tensor[[NR, 1, WIDTH], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, WIDTH], pl.FP32]:
        slot_mem = pld.alloc_window_buffer(WIDTH * pl.FP32.get_byte())
        ready_mem = pld.alloc_window_buffer(NR * pl.INT32.get_byte())
        for d in pl.range(NR):
            slot = pld.window(slot_mem, [1, WIDTH], dtype=pl.FP32)
            ready = pld.window(ready_mem, [NR, 1], dtype=pl.INT32)
            self.per_device(rows[d], gots[d], slot, ready, device=d)
        return gots


def exchange(device_ids: list[int]) -> None:
    compiled = ir.compile(EarlyReuse, distributed_config=DistributedConfig(device_ids=device_ids))
    rows = torch.arange(NR * WIDTH, dtype=torch.float32).reshape(NR, 1, WIDTH)
    gots = torch.zeros((NR, 1, WIDTH), dtype=torch.float32)
    compiled(rows, gots)


def main() -> int:
    parser = argparse.ArgumentParser(description="a slot reused before the peer's read")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    exchange([int(d) for d in args.device.split(",")])
    print("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
