"""Device-level allgather, reduce_scatter and barrier in pypto's style, on ONE signal reused by all
three inside one kernel call (the collectives retire their cells, so the next may start at zero):
gather every device's row, reduce-scatter an ``[NR, COLS]`` block (each device keeps its reduced row),
then a barrier brackets the drain. The gathered output is ``[1, NR * COLS]`` (``pl.dynamic``
arithmetic in a dim)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8


@pl.program
class GatherScatter:
    @pl.function(type=pl.FunctionType.InCore)
    def exchange(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        block: pl.Tensor[[NR, COLS], pl.FP32],
        gathered_out: pl.Out[pl.Tensor[[1, NR * COLS], pl.FP32]],
        reduced_out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        gathered: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        scatter: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        my_rank: pl.Scalar[pl.INT32],
    ) -> tuple[pl.Tensor[[1, NR * COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        n = pld.world_size()
        gathered = pld.tensor.allgather(row, gathered, signal)
        for j in pl.range(n):
            piece = pl.load(block, [j, 0], [1, COLS])
            pl.store(piece, [j, 0], scatter)
        scatter = pld.tensor.reduce_scatter(scatter, signal, op=pld.ReduceOp.Sum)
        signal = pld.tensor.barrier(signal)
        for j in pl.range(n):
            got = pl.load(gathered, [j, 0], [1, COLS])
            gathered_out = pl.store(got, [0, j * COLS], gathered_out)
        mine = pl.load(scatter, [my_rank, 0], [1, COLS])
        reduced_out = pl.store(mine, [0, 0], reduced_out)
        return gathered_out, reduced_out

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        block: pl.Tensor[[NR, COLS], pl.FP32],
        gathered_out: pl.Out[pl.Tensor[[1, NR * COLS], pl.FP32]],
        reduced_out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        gathered: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        scatter: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        my_rank: pl.Scalar[pl.INT32],
    ) -> tuple[pl.Tensor[[1, NR * COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        return self.exchange(row, block, gathered_out, reduced_out, gathered, scatter, signal, my_rank)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        rows: pl.Tensor[[NR, 1, COLS], pl.FP32],
        blocks: pl.Tensor[[NR, NR, COLS], pl.FP32],
        gathered_outs: pl.Out[pl.Tensor[[NR, 1, NR * COLS], pl.FP32]],
        reduced_outs: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]],
    ) -> tuple[pl.Tensor[[NR, 1, NR * COLS], pl.FP32], pl.Tensor[[NR, 1, COLS], pl.FP32]]:
        nbytes = pld.world_size() * COLS * pl.FP32.get_byte()
        gathered_buf = pld.alloc_window_buffer(nbytes)
        scatter_buf = pld.alloc_window_buffer(nbytes)
        signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            gathered = pld.window(gathered_buf, [pld.world_size(), COLS], dtype=pl.FP32)
            scatter = pld.window(scatter_buf, [pld.world_size(), COLS], dtype=pl.FP32)
            signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.chip_orch(rows[r], blocks[r], gathered_outs[r], reduced_outs[r], gathered, scatter, signal, r,
                           device=r)
        return gathered_outs, reduced_outs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_gather_scatter_one_signal(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(GatherScatter, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    rows = torch.stack([torch.arange(COLS, dtype=torch.float32).reshape(1, COLS) + 10.0 * r for r in range(n_ranks)])
    blocks = torch.stack([torch.arange(n_ranks * COLS, dtype=torch.float32).reshape(n_ranks, COLS) * (r + 1)
                          for r in range(n_ranks)])
    gathered_outs = torch.zeros((n_ranks, 1, n_ranks * COLS), dtype=torch.float32)
    reduced_outs = torch.zeros((n_ranks, 1, COLS), dtype=torch.float32)
    compiled(rows, blocks, gathered_outs, reduced_outs)
    assert torch.equal(gathered_outs, torch.stack([rows.reshape(1, n_ranks * COLS)] * n_ranks)), gathered_outs
    total = blocks.sum(dim=0)
    assert torch.equal(reduced_outs, torch.stack([total[r].reshape(1, COLS) for r in range(n_ranks)])), reduced_outs
