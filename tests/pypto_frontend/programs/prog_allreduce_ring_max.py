"""A device-level ring allreduce in pypto's style, FP16 with ``op=pld.ReduceOp.Max``: the ring signal is
``[2 * (NR - 1), NR]`` (rounds x ranks), written with ``pl.dynamic`` arithmetic in the annotation. A
ring needs a neighbour, so one device is skipped, as pypto's ring tests do. (Collectives take FP16 or
FP32 only, in pypto as in pldemu: a BF16 target is refused at its line.)"""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
SZ = 32  # FP16 tile rows are 32-byte multiples (ptoas)


@pl.program
class RingMaxFp16:
    @pl.function(type=pl.FunctionType.InCore)
    def reduce_step(
        self,
        inp: pl.Tensor[[1, SZ], pl.FP16],
        out: pl.Out[pl.Tensor[[1, SZ], pl.FP16]],
        data: pl.InOut[pld.DistributedTensor[[1, SZ], pl.FP16]],
        signal: pl.InOut[pld.DistributedTensor[[2 * (NR - 1), NR], pl.INT32]],
    ) -> pl.Tensor[[1, SZ], pl.FP16]:
        mine = pl.load(inp, [0, 0], [1, SZ])
        data = pl.store(mine, [0, 0], data)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Max, mode="ring")
        top = pl.load(data, [0, 0], [1, SZ])
        return pl.store(top, [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[1, SZ], pl.FP16],
        out: pl.Out[pl.Tensor[[1, SZ], pl.FP16]],
        data: pl.InOut[pld.DistributedTensor[[1, SZ], pl.FP16]],
        signal: pl.InOut[pld.DistributedTensor[[2 * (NR - 1), NR], pl.INT32]],
    ) -> pl.Tensor[[1, SZ], pl.FP16]:
        return self.reduce_step(inp, out, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 1, SZ], pl.FP16],
        outputs: pl.Out[pl.Tensor[[NR, 1, SZ], pl.FP16]],
    ) -> pl.Tensor[[NR, 1, SZ], pl.FP16]:
        rounds = 2 * (pld.world_size() - 1)
        data_buf = pld.alloc_window_buffer(SZ * pl.FP16.get_byte())
        signal_buf = pld.alloc_window_buffer(rounds * pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SZ], dtype=pl.FP16)
            signal = pld.window(signal_buf, [rounds, pld.world_size()], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], data, signal, device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_ring_allreduce_max_fp16(test_config, device_ids, n_ranks):
    if n_ranks < 2:
        pytest.skip("a ring allreduce needs 2 devices (its signal has 2 * (NR - 1) rounds)")
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(RingMaxFp16, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    # Each position's maximum sits on a different rank.
    inputs = torch.stack([((torch.arange(SZ, dtype=torch.float32) + r * 5).remainder(n_ranks * 3) - 4.0).reshape(1, SZ)
                          for r in range(n_ranks)]).to(torch.float16)
    outputs = torch.zeros((n_ranks, 1, SZ), dtype=torch.float16)
    compiled(inputs, outputs)
    expected = torch.stack([inputs.max(dim=0).values] * n_ranks)
    assert torch.equal(outputs, expected), (outputs, expected)
