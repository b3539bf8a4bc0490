"""HOST-level broadcast, all_to_all and all_to_all_v in pypto's style, between a publish loop and a
drain loop: the root's row is broadcast (``root=`` a closure int of the factory), each device's
``[NR, COLS]`` block is exchanged block by block, and a variable number of rows per peer moves with
send counts that the devices wrote into a window (pypto's host builtin takes them so). Separate
signals per collective, each an ``[NR, 1]`` INT32 window; receive counts drained with ``pl.read``."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8
MAX_RECV = 2


def build_host_exchange(root_rank: int):
    ROOT = root_rank

    @pl.program
    class HostExchange:
        @pl.function(type=pl.FunctionType.InCore)
        def publish(
            self,
            row: pl.Tensor[[1, COLS], pl.FP32],
            block: pl.Tensor[[NR, COLS], pl.FP32],
            vrows: pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32],
            counts: pl.Tensor[[NR, 1], pl.INT32],
            bcast: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
            blocks_in: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
            vrows_in: pl.InOut[pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32]],
            send_counts: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pld.DistributedTensor[[NR, COLS], pl.FP32]:
            pl.store(pl.load(row, [0, 0], [1, COLS]), [0, 0], bcast)
            pl.store(pl.load(vrows, [0, 0], [NR * MAX_RECV, COLS]), [0, 0], vrows_in)
            for d in pl.range(pld.world_size()):
                pl.write(send_counts, [d, 0], pl.read(counts, [d, 0]))
            return pl.store(pl.load(block, [0, 0], [NR, COLS]), [0, 0], blocks_in)

        @pl.function(type=pl.FunctionType.Orchestration)
        def publish_orch(
            self,
            row: pl.Tensor[[1, COLS], pl.FP32],
            block: pl.Tensor[[NR, COLS], pl.FP32],
            vrows: pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32],
            counts: pl.Tensor[[NR, 1], pl.INT32],
            bcast: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
            blocks_in: pl.InOut[pld.DistributedTensor[[NR, COLS], pl.FP32]],
            vrows_in: pl.InOut[pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32]],
            send_counts: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        ) -> pld.DistributedTensor[[NR, COLS], pl.FP32]:
            return self.publish(row, block, vrows, counts, bcast, blocks_in, vrows_in, send_counts)

        @pl.function(type=pl.FunctionType.InCore)
        def drain(
            self,
            bcast: pld.DistributedTensor[[1, COLS], pl.FP32],
            blocks_out: pld.DistributedTensor[[NR, COLS], pl.FP32],
            vrows_out: pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32],
            recv_counts: pld.DistributedTensor[[NR, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[NR + 1, COLS], pl.FP32]],
            vout: pl.Out[pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]],
            got_counts: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[NR + 1, COLS], pl.FP32]:
            pl.store(pl.load(vrows_out, [0, 0], [NR * MAX_RECV, COLS]), [0, 0], vout)
            for s in pl.range(pld.world_size()):
                pl.write(got_counts, [s, 0], pl.read(recv_counts, [s, 0]))
            out = pl.store(pl.load(bcast, [0, 0], [1, COLS]), [0, 0], out)
            return pl.store(pl.load(blocks_out, [0, 0], [NR, COLS]), [1, 0], out)

        @pl.function(type=pl.FunctionType.Orchestration)
        def drain_orch(
            self,
            bcast: pld.DistributedTensor[[1, COLS], pl.FP32],
            blocks_out: pld.DistributedTensor[[NR, COLS], pl.FP32],
            vrows_out: pld.DistributedTensor[[NR * MAX_RECV, COLS], pl.FP32],
            recv_counts: pld.DistributedTensor[[NR, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[NR + 1, COLS], pl.FP32]],
            vout: pl.Out[pl.Tensor[[NR * MAX_RECV, COLS], pl.FP32]],
            got_counts: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
        ) -> pl.Tensor[[NR + 1, COLS], pl.FP32]:
            return self.drain(bcast, blocks_out, vrows_out, recv_counts, out, vout, got_counts)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            rows: pl.Tensor[[NR, 1, COLS], pl.FP32],
            blocks: pl.Tensor[[NR, NR, COLS], pl.FP32],
            vrows: pl.Tensor[[NR, NR * MAX_RECV, COLS], pl.FP32],
            counts: pl.Tensor[[NR, NR, 1], pl.INT32],
            outs: pl.Out[pl.Tensor[[NR, NR + 1, COLS], pl.FP32]],
            vouts: pl.Out[pl.Tensor[[NR, NR * MAX_RECV, COLS], pl.FP32]],
            got_counts: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]],
        ) -> pl.Tensor[[NR, NR + 1, COLS], pl.FP32]:
            n = pld.world_size()
            f32 = pl.FP32.get_byte()
            bcast_buf = pld.alloc_window_buffer(COLS * f32)
            blocks_in_buf = pld.alloc_window_buffer(n * COLS * f32)
            blocks_out_buf = pld.alloc_window_buffer(n * COLS * f32)
            vrows_in_buf = pld.alloc_window_buffer(n * MAX_RECV * COLS * f32)
            vrows_out_buf = pld.alloc_window_buffer(n * MAX_RECV * COLS * f32)
            send_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            recv_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            bsig_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            asig_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            vsig_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            bcast = pld.window(bcast_buf, [1, COLS], dtype=pl.FP32)
            blocks_in = pld.window(blocks_in_buf, [n, COLS], dtype=pl.FP32)
            vrows_in = pld.window(vrows_in_buf, [n * MAX_RECV, COLS], dtype=pl.FP32)
            send_counts = pld.window(send_buf, [n, 1], dtype=pl.INT32)
            for r in pl.range(n):
                self.publish_orch(rows[r], blocks[r], vrows[r], counts[r], bcast, blocks_in, vrows_in, send_counts,
                                  device=r)
            bcast = pld.tensor.broadcast(bcast, pld.window(bsig_buf, [n, 1], dtype=pl.INT32), root=ROOT)
            blocks_out = pld.window(blocks_out_buf, [n, COLS], dtype=pl.FP32)
            blocks_out = pld.tensor.all_to_all(blocks_in, blocks_out, pld.window(asig_buf, [n, 1], dtype=pl.INT32))
            vrows_out = pld.window(vrows_out_buf, [n * MAX_RECV, COLS], dtype=pl.FP32)
            recv_counts = pld.window(recv_buf, [n, 1], dtype=pl.INT32)
            vrows_out = pld.tensor.all_to_all_v(vrows_in, vrows_out, pld.window(vsig_buf, [n, 1], dtype=pl.INT32),
                                                send_counts, recv_counts)
            for r in pl.range(n):
                self.drain_orch(bcast, blocks_out, vrows_out, recv_counts, outs[r], vouts[r], got_counts[r], device=r)
            return outs

    return HostExchange


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_host_broadcast_and_exchanges(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    n, m, root = n_ranks, MAX_RECV, n_ranks - 1
    compiled = ir.compile(build_host_exchange(root), platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n]))
    rows = torch.stack([torch.arange(COLS, dtype=torch.float32).reshape(1, COLS) * (r + 2) for r in range(n)])
    blocks = torch.arange(n * n * COLS, dtype=torch.float32).reshape(n, n, COLS)
    vrows = torch.arange(n * n * m * COLS, dtype=torch.float32).reshape(n, n * m, COLS) + 0.5
    counts = torch.tensor([[[(2 * s + d) % (m + 1)] for d in range(n)] for s in range(n)], dtype=torch.int32)
    outs = torch.zeros((n, n + 1, COLS), dtype=torch.float32)
    vouts = torch.zeros((n, n * m, COLS), dtype=torch.float32)
    got_counts = torch.full((n, n, 1), -1, dtype=torch.int32)
    compiled(rows, blocks, vrows, counts, outs, vouts, got_counts)
    for d in range(n):
        assert torch.equal(outs[d, 0:1], rows[root]), d
        assert torch.equal(outs[d, 1:], blocks[:, d]), d
        for s in range(n):
            k = int(counts[s, d, 0].item())
            assert int(got_counts[d, s, 0].item()) == k, (d, s)
            assert torch.equal(vouts[d, s * m:s * m + k], vrows[s, d * m:d * m + k]), (d, s)
    assert (compiled.output_dir / "next_levels" / f"builtin.tensor.broadcast__root{root}__fp32").is_dir()
