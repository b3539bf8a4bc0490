"""Rounds at HOST level in pypto's style: a host ``pl.range(ROUNDS)`` loop publishes (one dispatch per
device), allreduces on ONE explicit ``[world_size]`` signal reused by every round, and drains each
round into its own row of the output; a host ``pld.tensor.barrier`` on the same signal ends each round,
so no device republishes while a peer may still read the previous round. The compiled program is
called twice: every call starts from fresh, zeroed windows."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8
ROUNDS = 3


@pl.program
class HostRounds:
    @pl.function(type=pl.FunctionType.InCore)
    def publish(
        self,
        inp: pl.Tensor[[ROUNDS, COLS], pl.FP32],
        data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        rnd: pl.Scalar[pl.INDEX],
    ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return pl.store(pl.load(inp, [rnd, 0], [1, COLS]), [0, 0], data)

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish_orch(
        self,
        inp: pl.Tensor[[ROUNDS, COLS], pl.FP32],
        data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        rnd: pl.Scalar[pl.INDEX],
    ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return self.publish(inp, data, rnd)

    @pl.function(type=pl.FunctionType.InCore)
    def drain(
        self,
        data: pld.DistributedTensor[[1, COLS], pl.FP32],
        out: pl.InOut[pl.Tensor[[ROUNDS, COLS], pl.FP32]],
        rnd: pl.Scalar[pl.INDEX],
    ) -> pl.Tensor[[ROUNDS, COLS], pl.FP32]:
        return pl.store(pl.load(data, [0, 0], [1, COLS]), [rnd, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def drain_orch(
        self,
        data: pld.DistributedTensor[[1, COLS], pl.FP32],
        out: pl.InOut[pl.Tensor[[ROUNDS, COLS], pl.FP32]],
        rnd: pl.Scalar[pl.INDEX],
    ) -> pl.Tensor[[ROUNDS, COLS], pl.FP32]:
        return self.drain(data, out, rnd)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, ROUNDS, COLS], pl.FP32],
        outputs: pl.InOut[pl.Tensor[[NR, ROUNDS, COLS], pl.FP32]],
    ) -> pl.Tensor[[NR, ROUNDS, COLS], pl.FP32]:
        data_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        signal = pld.window(signal_buf, [pld.world_size()], dtype=pl.INT32)
        for rnd in pl.range(ROUNDS):
            for r in pl.range(pld.world_size()):
                self.publish_orch(inputs[r], pld.window(data_buf, [1, COLS], dtype=pl.FP32), rnd, device=r)
            data = pld.window(data_buf, [1, COLS], dtype=pl.FP32)
            data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
            for r in pl.range(pld.world_size()):
                self.drain_orch(data, outputs[r], rnd, device=r)
            signal = pld.tensor.barrier(signal)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_host_rounds_reuse_one_signal(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(HostRounds, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    for call in range(2):
        inputs = torch.stack([torch.arange(ROUNDS * COLS, dtype=torch.float32).reshape(ROUNDS, COLS) * (r + 1) + call
                              for r in range(n_ranks)])
        outputs = torch.full((n_ranks, ROUNDS, COLS), -1.0, dtype=torch.float32)
        compiled(inputs, outputs)
        assert torch.equal(outputs, torch.stack([inputs.sum(dim=0)] * n_ranks)), (call, outputs)
