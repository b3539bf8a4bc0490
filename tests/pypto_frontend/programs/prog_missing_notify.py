"""A wait no notify ever satisfies, in pypto's style: pldemu reports the deadlock's wait-for graph."""

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


def test_missing_notify(test_config, device_ids):
    compiled = ir.compile(MissingNotify, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:NR]))
    compiled(torch.zeros((NR, 1, 8), dtype=torch.float32))
