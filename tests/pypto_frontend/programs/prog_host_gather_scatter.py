"""HOST-level allgather, reduce_scatter and barrier in pypto's style, all three on ONE ``[world_size]``
INT32 signal (each call retires its cells, so the next starts from zero): devices publish a row into a
staging window and an ``[NR, COLS]`` block into a second window; the host gathers the rows into a third
window, reduce-scatters the blocks and ends with a barrier; each device drains the gathered rows as
rank-2 ``[1, COLS]`` tiles into a rank-3 ``[1, NR, COLS]`` tensor (offsets ``[0, j, 0]``) and keeps its
own reduced row."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8


@pl.program
class HostGatherScatter:
    @pl.function(type=pl.FunctionType.InCore)
    def publish(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        block: pl.Tensor[[NR, COLS], pl.FP32],
        stage: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        scatter: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
    ) -> pld.DistributedTensor[[NR, COLS], pl.FP32]:
        pl.store(pl.load(row, [0, 0], [1, COLS]), [0, 0], stage)
        return pl.store(pl.load(block, [0, 0], [NR, COLS]), [0, 0], scatter)

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish_orch(
        self,
        row: pl.Tensor[[1, COLS], pl.FP32],
        block: pl.Tensor[[NR, COLS], pl.FP32],
        stage: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
        scatter: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
    ) -> pld.DistributedTensor[[NR, COLS], pl.FP32]:
        return self.publish(row, block, stage, scatter)

    @pl.function(type=pl.FunctionType.InCore)
    def drain(
        self,
        gathered: pld.DistributedTensor[[NR, COLS], pl.FP32],
        scatter: pld.DistributedTensor[[NR, COLS], pl.FP32],
        rows_out: pl.Out[pl.Tensor[[1, NR, COLS], pl.FP32]],
        mine_out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        my_rank: pl.Scalar[pl.INT32],
    ) -> tuple[pl.Tensor[[1, NR, COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        for j in pl.range(pld.world_size()):
            got = pl.load(gathered, [j, 0], [1, COLS])
            rows_out = pl.store(got, [0, j, 0], rows_out)
        mine = pl.load(scatter, [my_rank, 0], [1, COLS])
        mine_out = pl.store(mine, [0, 0], mine_out)
        return rows_out, mine_out

    @pl.function(type=pl.FunctionType.Orchestration)
    def drain_orch(
        self,
        gathered: pld.DistributedTensor[[NR, COLS], pl.FP32],
        scatter: pld.DistributedTensor[[NR, COLS], pl.FP32],
        rows_out: pl.Out[pl.Tensor[[1, NR, COLS], pl.FP32]],
        mine_out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
        my_rank: pl.Scalar[pl.INT32],
    ) -> tuple[pl.Tensor[[1, NR, COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        rows_out, mine_out = self.drain(gathered, scatter, rows_out, mine_out, my_rank)
        return rows_out, mine_out

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        rows: pl.Tensor[[NR, 1, COLS], pl.FP32],
        blocks: pl.Tensor[[NR, NR, COLS], pl.FP32],
        gathered_outs: pl.Out[pl.Tensor[[NR, 1, NR, COLS], pl.FP32]],
        mine_outs: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]],
    ) -> tuple[pl.Tensor[[NR, 1, NR, COLS], pl.FP32], pl.Tensor[[NR, 1, COLS], pl.FP32]]:
        stage_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        gathered_buf = pld.alloc_window_buffer(NR * COLS * pl.FP32.get_byte())
        scatter_buf = pld.alloc_window_buffer(NR * COLS * pl.FP32.get_byte())
        signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            stage = pld.window(stage_buf, [1, COLS], dtype=pl.FP32)
            scatter = pld.window(scatter_buf, [NR, COLS], dtype=pl.FP32)
            self.publish_orch(rows[r], blocks[r], stage, scatter, device=r)
        signal = pld.window(signal_buf, [pld.world_size()], dtype=pl.INT32)
        stage = pld.window(stage_buf, [1, COLS], dtype=pl.FP32)
        gathered = pld.window(gathered_buf, [NR, COLS], dtype=pl.FP32)
        gathered = pld.tensor.allgather(stage, gathered, signal)
        scatter = pld.window(scatter_buf, [NR, COLS], dtype=pl.FP32)
        scatter = pld.tensor.reduce_scatter(scatter, signal, op=pld.ReduceOp.Sum)
        signal = pld.tensor.barrier(signal)
        for r in pl.range(pld.world_size()):
            self.drain_orch(gathered, scatter, gathered_outs[r], mine_outs[r], r, device=r)
        return gathered_outs, mine_outs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_host_gather_scatter_barrier(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    n = n_ranks
    compiled = ir.compile(HostGatherScatter, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n]))
    rows = torch.stack([torch.full((1, COLS), float(r)) + torch.arange(COLS) * 0.25 for r in range(n)])
    blocks = torch.stack([torch.arange(n * COLS, dtype=torch.float32).reshape(n, COLS) - r for r in range(n)])
    gathered_outs = torch.zeros((n, 1, n, COLS), dtype=torch.float32)
    mine_outs = torch.zeros((n, 1, COLS), dtype=torch.float32)
    compiled(rows, blocks, gathered_outs, mine_outs)
    assert torch.equal(gathered_outs, torch.stack([rows.permute(1, 0, 2)] * n)), gathered_outs
    total = blocks.sum(dim=0)
    assert torch.equal(mine_outs, torch.stack([total[r].reshape(1, COLS) for r in range(n)])), mine_outs
    names = {p.name for p in (compiled.output_dir / "next_levels").iterdir()}
    assert {"builtin.tensor.allgather__fp32", "builtin.tensor.reduce_scatter__sum__fp32",
            "builtin.tensor.barrier__fp32"} <= names, names
