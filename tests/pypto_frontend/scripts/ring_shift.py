"""A ring shift run as a script, in the style of pypto's distributed tutorials: ``-d 0,1,2`` names the
devices, the golden is checked and ``OK`` printed. ``pldemu python ring_shift.py -d 0,1,2`` runs it
(tests/pypto_frontend/test_script.py); ``--no-check`` prints what the call left instead."""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
WIDTH = 16


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


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift over the given devices")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    parser.add_argument("--tag", default="", help="printed after OK")
    parser.add_argument("--no-check", action="store_true", help="print what the call left, check nothing")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    n = len(device_ids)
    compiled = ir.compile(RingShift, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=device_ids))
    rows = torch.stack([torch.full((1, WIDTH), 10.0 * d + 1) + torch.arange(WIDTH) for d in range(n)])
    gots = torch.zeros((n, 1, WIDTH), dtype=torch.float32)
    compiled(rows, gots)
    if args.no_check:
        untouched = torch.equal(gots, torch.zeros((n, 1, WIDTH), dtype=torch.float32))
        print(f"untouched={untouched} translated={(compiled.output_dir / 'translated.pld').is_file()}")
        return 0
    expected = torch.stack([rows[(d + n - 1) % n] for d in range(n)])
    assert torch.equal(gots, expected), "ring shift mismatch"
    print(f"ring shift on {n} devices: OK {args.tag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
