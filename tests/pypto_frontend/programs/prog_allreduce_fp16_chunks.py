"""A device-level mesh allreduce in pypto's style on FP16 data of an awkward length: staged into the
window chunk by chunk with ``pl.range(0, SZ, STAGE, init_values=(data,))`` and ``pl.yield_``, each
chunk a ``[1, STAGE]`` tile trimmed by ``valid_shape=[1, pl.min(STAGE, SZ - col)]``; drained through
one tile wider than the whole tensor (``[1, WIDE]`` over ``[1, SZ]``). A scalar carried through a second
loop counts the chunks."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
SZ = 35
STAGE = 16  # a 32-byte row of FP16 (ptoas aligns tile rows to 32 bytes)
WIDE = 48


@pl.program
class AllReduceFp16Chunks:
    @pl.function(type=pl.FunctionType.InCore)
    def reduce_step(
        self,
        inp: pl.Tensor[[1, SZ], pl.FP16],
        out: pl.Out[pl.Tensor[[1, SZ], pl.FP16]],
        chunks: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
        data: pl.InOut[pld.DistributedTensor[[1, SZ], pl.FP16]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[1, SZ], pl.FP16], pl.Tensor[[1, 1], pl.INT32]]:
        for col, (data_iter,) in pl.range(0, SZ, STAGE, init_values=(data,)):
            valid = pl.min(STAGE, SZ - col)
            piece = pl.load(inp, [0, col], [1, STAGE], valid_shape=[1, valid])
            data_iter = pl.store(piece, [0, col], data_iter)
            staged = pl.yield_(data_iter)
        data = pld.tensor.allreduce(staged, signal, op=pld.ReduceOp.Sum)
        whole = pl.load(data, [0, 0], [1, WIDE], valid_shape=[1, SZ])
        out = pl.store(whole, [0, 0], out)
        for _, (count,) in pl.range(0, SZ, STAGE, init_values=(0,)):
            counted = pl.yield_(count + 1)
        pl.write(chunks, [0, 0], counted)
        return out, chunks

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[1, SZ], pl.FP16],
        out: pl.Out[pl.Tensor[[1, SZ], pl.FP16]],
        chunks: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
        data: pl.InOut[pld.DistributedTensor[[1, SZ], pl.FP16]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[1, SZ], pl.FP16], pl.Tensor[[1, 1], pl.INT32]]:
        out, chunks = self.reduce_step(inp, out, chunks, data, signal)
        return out, chunks

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 1, SZ], pl.FP16],
        outputs: pl.Out[pl.Tensor[[NR, 1, SZ], pl.FP16]],
        counts: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[NR, 1, SZ], pl.FP16], pl.Tensor[[NR, 1, 1], pl.INT32]]:
        data_buf = pld.alloc_window_buffer(SZ * pl.FP16.get_byte())
        signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SZ], dtype=pl.FP16)
            signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], counts[r], data, signal, device=r)
        return outputs, counts


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_allreduce_fp16_chunks(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(AllReduceFp16Chunks, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([(1.0 + r * 0.125 + torch.arange(SZ, dtype=torch.float32).remainder(5) * 0.25).reshape(1, SZ)
                          for r in range(n_ranks)]).to(torch.float16)
    outputs = torch.zeros((n_ranks, 1, SZ), dtype=torch.float16)
    counts = torch.zeros((n_ranks, 1, 1), dtype=torch.int32)
    compiled(inputs, outputs, counts)
    expected = torch.stack([inputs.to(torch.float32).sum(dim=0)] * n_ranks).to(torch.float16)
    assert torch.allclose(outputs.to(torch.float32), expected.to(torch.float32), rtol=1e-3, atol=1e-3), outputs
    assert torch.equal(counts, torch.full((n_ranks, 1, 1), 3, dtype=torch.int32)), counts
