"""Chunked ring put in pypto's style: each device pushes its [ROWS, COLS] block to its successor with
``pld.tensor.put`` (keyword whole-tensor form, ``atomic=None_``, ``chunk_rows`` / ``chunk_cols`` smaller
than the block, ``pipeline=True``), then a notify / wait handshake orders the push before the read-back.
The peer is a ``pl.Scalar[pl.INT32]`` computed on the host; the host tensors are ``[NR, ...]``."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
ROWS = 4
COLS = 16


@pl.program
class ChunkedRingPut:
    @pl.function(type=pl.FunctionType.InCore)
    def push(
        self,
        inp: pl.Tensor[[ROWS, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
        src: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
        dst: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        block = pl.load(inp, [0, 0], [ROWS, COLS])
        src = pl.store(block, [0, 0], src)
        pld.tensor.put(dst, peer=peer, src=src, atomic=pld.AtomicType.None_, chunk_rows=2, chunk_cols=8,
                       pipeline=True)
        pld.system.notify(target=ready, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        got = pl.load(dst, [0, 0], [ROWS, COLS])
        return pl.store(got, [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[ROWS, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
        src: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
        dst: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.push(inp, out, src, dst, ready, peer)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
        outputs: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
    ) -> pl.Tensor[[NR, ROWS, COLS], pl.FP32]:
        src_buf = pld.alloc_window_buffer(ROWS * COLS * pl.FP32.get_byte())
        dst_buf = pld.alloc_window_buffer(ROWS * COLS * pl.FP32.get_byte())
        ready_buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            src = pld.window(src_buf, [ROWS, COLS], dtype=pl.FP32)
            dst = pld.window(dst_buf, [ROWS, COLS], dtype=pl.FP32)
            ready = pld.window(ready_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], src, dst, ready, (r + 1) % pld.world_size(), device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_chunked_ring_put(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(ChunkedRingPut, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) + 1000.0 * r
                          for r in range(n_ranks)])
    outputs = torch.zeros((n_ranks, ROWS, COLS), dtype=torch.float32)
    compiled(inputs, outputs)
    expected = torch.stack([inputs[(r - 1) % n_ranks] for r in range(n_ranks)])
    assert torch.equal(outputs, expected), (outputs - expected).abs().max().item()
