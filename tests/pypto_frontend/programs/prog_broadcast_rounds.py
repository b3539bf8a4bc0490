"""Broadcast rounds in pypto's style: inside one kernel, ``pl.range(ROUNDS)`` rounds each restage the
root's window (``if my_rank == ROOT``), ``pld.tensor.broadcast(..., root=ROOT)`` it and read it back,
all on ONE signal reused across the loop. A ``pld.tensor.barrier`` on the same signal ends each round:
without it the root could restage while a peer still pulls the previous round (pypto #2175). The root
is a closure int of the factory."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8
ROUNDS = 3


def build_broadcast_rounds(root_rank: int):
    ROOT = root_rank

    @pl.program
    class BroadcastRounds:
        @pl.function(type=pl.FunctionType.InCore)
        def rounds(
            self,
            inp: pl.Tensor[[ROUNDS, COLS], pl.FP32],
            out: pl.Out[pl.Tensor[[ROUNDS, COLS], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[ROUNDS, COLS], pl.FP32]:
            my_rank = pld.rank(pld.get_comm_ctx(data))
            for rnd in pl.range(ROUNDS):
                if my_rank == ROOT:
                    staged = pl.load(inp, [rnd, 0], [1, COLS])
                    pl.store(staged, [0, 0], data)
                data = pld.tensor.broadcast(data, signal, root=ROOT)
                got = pl.load(data, [0, 0], [1, COLS])
                out = pl.store(got, [rnd, 0], out)
                signal = pld.tensor.barrier(signal)
            return out

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip_orch(
            self,
            inp: pl.Tensor[[ROUNDS, COLS], pl.FP32],
            out: pl.Out[pl.Tensor[[ROUNDS, COLS], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[ROUNDS, COLS], pl.FP32]:
            return self.rounds(inp, out, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[NR, ROUNDS, COLS], pl.FP32],
            outputs: pl.Out[pl.Tensor[[NR, ROUNDS, COLS], pl.FP32]],
        ) -> pl.Tensor[[NR, ROUNDS, COLS], pl.FP32]:
            data_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, COLS], dtype=pl.FP32)
                signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
                self.chip_orch(inputs[r], outputs[r], data, signal, device=r)
            return outputs

    return BroadcastRounds


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_broadcast_rounds_one_signal(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    root = n_ranks // 2
    compiled = ir.compile(build_broadcast_rounds(root), platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([torch.arange(ROUNDS * COLS, dtype=torch.float32).reshape(ROUNDS, COLS) + 100.0 * r
                          for r in range(n_ranks)])
    outputs = torch.zeros((n_ranks, ROUNDS, COLS), dtype=torch.float32)
    compiled(inputs, outputs)
    assert torch.equal(outputs, torch.stack([inputs[root]] * n_ranks)), outputs
