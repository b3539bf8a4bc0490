"""Pulls in pypto's style: each device publishes two rows, and after a notify / wait handshake pulls
its predecessor's rows with ``pld.tensor.get``, once in the positional region form
(``dst, peer, src, dst_offsets, src_offsets, shape``) and once in the keyword form. The predecessor is
``(me + n - 1) % n``, never a negative dividend: the device's ``%`` truncates as C's does, so
``(me - 1) % n`` would give rank 0 the peer -1 (pldemu reports it: tests/pypto_frontend/test_truncation.py)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 8


@pl.program
class GetRegions:
    @pl.function(type=pl.FunctionType.InCore)
    def pull(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[2, COLS], pl.FP32]],
        pub: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP32]],
        landing: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[2, COLS], pl.FP32]:
        ctx = pld.get_comm_ctx(pub)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        before = (me + n - 1) % n
        after = (me + 1) % n
        rows = pl.load(inp, [0, 0], [2, COLS])
        pub = pl.store(rows, [0, 0], pub)
        pld.system.notify(ready, peer=after, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=ready, offsets=[before, 0], expected=1, cmp=pld.WaitCmp.Ge)
        # Row 0 of the predecessor lands in row 1, row 1 in row 0: the two region forms.
        pld.tensor.get(landing, before, pub, [1, 0], [0, 0], [1, COLS])
        pld.tensor.get(landing, peer=before, src=pub, dst_offsets=[0, 0], src_offsets=[1, 0], shape=[1, COLS])
        got = pl.load(landing, [0, 0], [2, COLS])
        return pl.store(got, [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP32],
        out: pl.Out[pl.Tensor[[2, COLS], pl.FP32]],
        pub: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP32]],
        landing: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP32]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[2, COLS], pl.FP32]:
        return self.pull(inp, out, pub, landing, ready)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 2, COLS], pl.FP32],
        outputs: pl.Out[pl.Tensor[[NR, 2, COLS], pl.FP32]],
    ) -> pl.Tensor[[NR, 2, COLS], pl.FP32]:
        pub_buf = pld.alloc_window_buffer(2 * COLS * pl.FP32.get_byte())
        landing_buf = pld.alloc_window_buffer(2 * COLS * pl.FP32.get_byte())
        ready_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            pub = pld.window(pub_buf, [2, COLS], dtype=pl.FP32)
            landing = pld.window(landing_buf, [2, COLS], dtype=pl.FP32)
            ready = pld.window(ready_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], pub, landing, ready, device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_get_both_region_forms(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(GetRegions, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([torch.arange(2 * COLS, dtype=torch.float32).reshape(2, COLS) + 100.0 * r
                          for r in range(n_ranks)])
    outputs = torch.zeros((n_ranks, 2, COLS), dtype=torch.float32)
    compiled(inputs, outputs)
    expected = torch.stack([torch.stack([inputs[(r - 1) % n_ranks][1], inputs[(r - 1) % n_ranks][0]])
                            for r in range(n_ranks)])
    assert torch.equal(outputs, expected), (outputs - expected).abs().max().item()
