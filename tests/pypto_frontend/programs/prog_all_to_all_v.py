"""Device-level all_to_all and all_to_all_v in pypto's style: device s sends block d of its input to
device d (``pld.tensor.all_to_all``), then a variable number of rows per peer (``all_to_all_v`` with
``[NR, 1]`` INT32 send counts); the receiver reads each sender's published count with ``pl.read``,
``pl.cast``s it to INDEX and drains that many rows in a loop bounded by the value read at run time."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8
MAX_RECV = 2


@pl.program
class AllToAllV:
    @pl.function(type=pl.FunctionType.InCore)
    def exchange(
        self,
        blocks: pl.Tensor[[NR, COLS], pl.FP32],
        rows: pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32],
        counts: pl.Tensor[[NR, 1], pl.INT32],
        swapped: pl.Out[pl.Tensor[[NR, COLS], pl.FP32]],
        out: pl.Out[pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]],
        recv_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
        a2a: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        recv_counts: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[NR, COLS], pl.FP32], pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]]:
        n = pld.world_size()
        a2a = pld.tensor.all_to_all(blocks, a2a, signal)
        whole = pl.load(a2a, [0, 0], [n, COLS])
        swapped = pl.store(whole, [0, 0], swapped)
        result = pld.tensor.all_to_all_v(rows, data, signal, counts, recv_counts)
        for src in pl.range(n):
            got_i32 = pl.read(recv_counts, [src, 0])
            pl.write(recv_out, [src, 0], got_i32)
            got = pl.cast(got_i32, pl.INDEX)
            for i in pl.range(got):
                row = pl.load(result, [src * MAX_RECV + i, 0], [1, COLS])
                pl.store(row, [src * MAX_RECV + i, 0], out)
        return swapped, out

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        blocks: pl.Tensor[[NR, COLS], pl.FP32],
        rows: pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32],
        counts: pl.Tensor[[NR, 1], pl.INT32],
        swapped: pl.Out[pl.Tensor[[NR, COLS], pl.FP32]],
        out: pl.Out[pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]],
        recv_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
        a2a: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        recv_counts: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[NR, COLS], pl.FP32], pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]]:
        return self.exchange(blocks, rows, counts, swapped, out, recv_out, a2a, data, signal, recv_counts)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        blocks: pl.Tensor[[NR, NR, COLS], pl.FP32],
        rows: pl.Tensor[[NR, NR * MAX_RECV, COLS], pl.FP32],
        counts: pl.Tensor[[NR, NR, 1], pl.INT32],
        swapped: pl.Out[pl.Tensor[[NR, NR, COLS], pl.FP32]],
        outputs: pl.Out[pl.Tensor[[NR, NR * MAX_RECV, COLS], pl.FP32]],
        recv_outputs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]],
    ) -> tuple[pl.Tensor[[NR, NR, COLS], pl.FP32], pl.Tensor[[NR, NR * MAX_RECV, COLS], pl.FP32]]:
        n = pld.world_size()
        a2a_buf = pld.alloc_window_buffer(n * COLS * pl.FP32.get_byte())
        data_buf = pld.alloc_window_buffer(n * MAX_RECV * COLS * pl.FP32.get_byte())
        signal_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
        recv_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
        for r in pl.range(n):
            a2a = pld.window(a2a_buf, [n, COLS], dtype=pl.FP32)
            data = pld.window(data_buf, [n * MAX_RECV, COLS], dtype=pl.FP32)
            signal = pld.window(signal_buf, [n, 1], dtype=pl.INT32)
            recv = pld.window(recv_buf, [n, 1], dtype=pl.INT32)
            self.chip_orch(blocks[r], rows[r], counts[r], swapped[r], outputs[r], recv_outputs[r], a2a, data, signal,
                           recv, device=r)
        return swapped, outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_all_to_all_and_v(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    n, m = n_ranks, MAX_RECV
    compiled = ir.compile(AllToAllV, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n]))
    blocks = torch.arange(n * n * COLS, dtype=torch.float32).reshape(n, n, COLS)
    rows = torch.arange(n * n * m * COLS, dtype=torch.float32).reshape(n, n * m, COLS) * 0.5
    counts = torch.tensor([[[(s + d) % (m + 1)] for d in range(n)] for s in range(n)], dtype=torch.int32)
    swapped = torch.zeros((n, n, COLS), dtype=torch.float32)
    outputs = torch.full((n, n * m, COLS), -1.0, dtype=torch.float32)
    recv_outputs = torch.full((n, n, 1), -1, dtype=torch.int32)
    compiled(blocks, rows, counts, swapped, outputs, recv_outputs)
    assert torch.equal(swapped, blocks.permute(1, 0, 2)), swapped
    for d in range(n):
        for s in range(n):
            k = int(counts[s, d, 0].item())
            assert int(recv_outputs[d, s, 0].item()) == k, (d, s)
            assert torch.equal(outputs[d, s * m:s * m + k], rows[s, d * m:d * m + k]), (d, s)
            assert torch.all(outputs[d, s * m + k:(s + 1) * m] == -1.0), (d, s)
