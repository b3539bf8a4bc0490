"""HOST-level allreduces in pypto's style, between dispatch loops: devices publish into a window, the
host orchestrator calls ``pld.tensor.allreduce(data, op=Sum)`` with NO signal (pypto's
SynthesizeAllReduceSignals gives it one), then a ring ``allreduce(..., op=Sum, mode="ring")`` on an
explicit ``[2 * (NR - 1) + 1, NR]`` signal (pypto's builtin layout, one spare row; the ring builtin takes only
Sum on FP32, of an element count every rank count divides: 120 for 1-5 ranks), and every device drains both
results. Nothing orders the phases but each device's own program order."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 120  # a multiple of every rank count run (pypto's ring builtin partitions it into NR chunks)


@pl.program
class HostAllReduce:
    @pl.function(type=pl.FunctionType.InCore)
    def publish(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP32],
        summed: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        maxed: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
    ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        pl.store(pl.load(inp, [1, 0], [1, COLS]), [0, 0], maxed)
        return pl.store(pl.load(inp, [0, 0], [1, COLS]), [0, 0], summed)

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish_orch(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP32],
        summed: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        maxed: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
    ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return self.publish(inp, summed, maxed)

    @pl.function(type=pl.FunctionType.InCore)
    def drain(
        self,
        summed: pld.DistributedTensor[[1, COLS], pl.FP32],
        maxed: pld.DistributedTensor[[1, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[2, COLS], pl.FP32]],
    ) -> pl.Tensor[[2, COLS], pl.FP32]:
        out = pl.store(pl.load(summed, [0, 0], [1, COLS]), [0, 0], out)
        return pl.store(pl.load(maxed, [0, 0], [1, COLS]), [1, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def drain_orch(
        self,
        summed: pld.DistributedTensor[[1, COLS], pl.FP32],
        maxed: pld.DistributedTensor[[1, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[2, COLS], pl.FP32]],
    ) -> pl.Tensor[[2, COLS], pl.FP32]:
        return self.drain(summed, maxed, out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 2, COLS], pl.FP32],
        outputs: pl.Out[pl.Tensor[[NR, 2, COLS], pl.FP32]],
    ) -> pl.Tensor[[NR, 2, COLS], pl.FP32]:
        rounds = 2 * (pld.world_size() - 1) + 1
        summed_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        maxed_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        ring_buf = pld.alloc_window_buffer(rounds * pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            summed = pld.window(summed_buf, [1, COLS], dtype=pl.FP32)
            maxed = pld.window(maxed_buf, [1, COLS], dtype=pl.FP32)
            self.publish_orch(inputs[r], summed, maxed, device=r)
        summed = pld.window(summed_buf, [1, COLS], dtype=pl.FP32)
        summed = pld.tensor.allreduce(summed, op=pld.ReduceOp.Sum)
        maxed = pld.window(maxed_buf, [1, COLS], dtype=pl.FP32)
        ring = pld.window(ring_buf, [rounds, pld.world_size()], dtype=pl.INT32)
        maxed = pld.tensor.allreduce(maxed, ring, op=pld.ReduceOp.Sum, mode="ring")
        for r in pl.range(pld.world_size()):
            self.drain_orch(summed, maxed, outputs[r], device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_host_allreduce_synthesised_and_ring(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(HostAllReduce, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([torch.stack([torch.arange(COLS, dtype=torch.float32) + 100.0 * r,
                                       (torch.arange(COLS, dtype=torch.float32) * (r + 1)).remainder(7)])
                          for r in range(n_ranks)])
    outputs = torch.zeros((n_ranks, 2, COLS), dtype=torch.float32)
    compiled(inputs, outputs)
    expected = torch.stack([inputs[:, 0].sum(dim=0), inputs[:, 1].sum(dim=0)])
    assert torch.equal(outputs, torch.stack([expected] * n_ranks)), outputs
    for variant in ("allreduce__sum__fp32", "allreduce_ring__sum__fp32"):
        assert (compiled.output_dir / "next_levels" / f"builtin.tensor.{variant}" / "kernel_config.py").is_file()
