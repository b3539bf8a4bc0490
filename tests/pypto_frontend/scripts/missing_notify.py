"""A wait nobody notifies, as a script (the idea of programs/prog_missing_notify.py): pldemu reports the
deadlock's wait-for graph at the wait's line."""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = 2


@pl.program
class MissingNotify:
    @pl.function(type=pl.FunctionType.InCore)
    def stuck(
        self,
        out: pl.Out[pl.Tensor[[1, 8], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, 8], pl.FP32]:
        ctx = pld.get_comm_ctx(ready)
        me = pld.rank(ctx)
        pld.system.wait(signal=ready, offsets=[(me + 1) % NR, 0], expected=1, cmp=pld.WaitCmp.Ge)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_device(
        self,
        out: pl.Out[pl.Tensor[[1, 8], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, 8], pl.FP32]:
        return self.stuck(out, ready)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, outs: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]]) -> pl.Tensor[[NR, 1, 8], pl.FP32]:
        ready_mem = pld.alloc_window_buffer(NR * pl.INT32.get_byte())
        for d in pl.range(NR):
            ready = pld.window(ready_mem, [NR, 1], dtype=pl.INT32)
            self.per_device(outs[d], ready, device=d)
        return outs


def main() -> int:
    parser = argparse.ArgumentParser(description="a wait nobody notifies")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    compiled = ir.compile(MissingNotify,
                          distributed_config=DistributedConfig(device_ids=[int(d) for d in args.device.split(",")]))
    compiled(torch.zeros((NR, 1, 8), dtype=torch.float32))
    print("never printed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
