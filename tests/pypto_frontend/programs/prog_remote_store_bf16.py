"""Pushes in pypto's style on BF16 data: each device writes its row into its successor's window, the two
halves with ``pld.tile.remote_store`` and, into a second window, the doubled row computed with the
tensor-level ``pl.tensor.add`` and pushed by ``pld.tensor.remote_store`` (no global-memory round trip).
Two InCore calls in one Orchestration; the handshake sits in the second, which doubles the pushed row
again in FP32 (``pl.cast`` of a tile there and back, ``mode="rint"``)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 32  # each half a 32-byte BF16 tile row (ptoas)
HALF = COLS // 2


@pl.program
class RemoteStoreBf16:
    @pl.function(type=pl.FunctionType.InCore)
    def push(
        self,
        inp: pl.Tensor[[1, COLS], pl.BF16],
        halves: pl.InOut[pld.DistributedTensor[[1, COLS], pl.BF16]],
        doubled: pl.InOut[pld.DistributedTensor[[1, COLS], pl.BF16]],
        peer: pl.Scalar[pl.INT32],
    ) -> pld.DistributedTensor[[1, COLS], pl.BF16]:
        low = pl.load(inp, [0, 0], [1, HALF])
        high = pl.load(inp, [0, HALF], [1, HALF])
        pld.tile.remote_store(low, target=halves, peer=peer, offsets=[0, 0])
        pld.tile.remote_store(high, target=halves, peer=peer, offsets=[0, HALF])
        twice = pl.tensor.add(inp, inp)
        pld.tensor.remote_store(twice, doubled, peer, [0, 0])
        return halves

    @pl.function(type=pl.FunctionType.InCore)
    def settle(
        self,
        halves: pld.DistributedTensor[[1, COLS], pl.BF16],
        doubled: pld.DistributedTensor[[1, COLS], pl.BF16],
        ready: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        out: pl.Out[pl.Tensor[[2, COLS], pl.BF16]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[2, COLS], pl.BF16]:
        pld.system.notify(target=ready, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        got = pl.load(halves, [0, 0], [1, COLS])
        out = pl.store(got, [0, 0], out)
        twice = pl.load(doubled, [0, 0], [1, COLS])
        wide = pl.cast(twice, pl.FP32)  # accumulate in FP32, back to BF16 with an explicit round mode
        back = pl.cast(pl.add(wide, wide), target_type=pl.BF16, mode="rint")
        return pl.store(back, [1, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[1, COLS], pl.BF16],
        out: pl.Out[pl.Tensor[[2, COLS], pl.BF16]],
        halves: pl.InOut[pld.DistributedTensor[[1, COLS], pl.BF16]],
        doubled: pl.InOut[pld.DistributedTensor[[1, COLS], pl.BF16]],
        ready: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[2, COLS], pl.BF16]:
        halves = self.push(inp, halves, doubled, peer)
        return self.settle(halves, doubled, ready, out, peer)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 1, COLS], pl.BF16],
        outputs: pl.Out[pl.Tensor[[NR, 2, COLS], pl.BF16]],
    ) -> pl.Tensor[[NR, 2, COLS], pl.BF16]:
        halves_buf = pld.alloc_window_buffer(COLS * pl.BF16.get_byte())
        doubled_buf = pld.alloc_window_buffer(COLS * pl.BF16.get_byte())
        ready_buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            halves = pld.window(halves_buf, [1, COLS], dtype=pl.BF16)
            doubled = pld.window(doubled_buf, [1, COLS], dtype=pl.BF16)
            ready = pld.window(ready_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], halves, doubled, ready, (r + 1) % pld.world_size(), device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_remote_store_bf16(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(RemoteStoreBf16, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    # Small integers and halves: exact in BF16, and so are their doubles.
    inputs = torch.stack([(torch.arange(COLS, dtype=torch.float32) * 0.5 + 8.0 * r).reshape(1, COLS)
                          for r in range(n_ranks)]).to(torch.bfloat16)
    outputs = torch.zeros((n_ranks, 2, COLS), dtype=torch.bfloat16)
    compiled(inputs, outputs)
    for r in range(n_ranks):
        before = inputs[(r - 1) % n_ranks]
        expected = torch.cat([before, before * 4], dim=0)
        assert torch.equal(outputs[r], expected), (r, outputs[r], expected)
