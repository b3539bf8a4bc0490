"""Put regions in pypto's style, FP16: an Orchestration calls a staging kernel, then
``pld.tensor.barrier`` (a collective in the Orchestration itself) so every device has staged, then a
push kernel: row 0 goes to the successor's row 1 with the positional region form of
``pld.tensor.put`` (``dst, peer, src, dst_offsets, src_offsets, shape``), row 1 to its row 0 with the
keyword form; and the whole successor's staging window comes back with the whole-tensor ``pld.tensor.get``."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
COLS = 16


@pl.program
class PutRegions:
    @pl.function(type=pl.FunctionType.InCore)
    def stage(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP16],
        src: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
    ) -> pld.DistributedTensor[[2, COLS], pl.FP16]:
        return pl.store(pl.load(inp, [0, 0], [2, COLS]), [0, 0], src)

    @pl.function(type=pl.FunctionType.InCore)
    def swap_rows(
        self,
        src: pld.DistributedTensor[[2, COLS], pl.FP16],
        dst: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
        copy: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        out: pl.Out[pl.Tensor[[4, COLS], pl.FP16]],
    ) -> pl.Tensor[[4, COLS], pl.FP16]:
        ctx = pld.get_comm_ctx(dst)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        after = (me + 1) % n
        before = (me + n - 1) % n
        pld.tensor.put(dst, after, src, [1, 0], [0, 0], [1, COLS])
        pld.tensor.put(dst, peer=after, src=src, dst_offsets=[0, 0], src_offsets=[1, 0], shape=[1, COLS],
                       atomic=pld.AtomicType.None_)
        pld.tensor.get(copy, peer=after, src=src)
        pld.system.notify(ready, peer=after, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=ready, offsets=[before, 0], expected=1, cmp=pld.WaitCmp.Ge)
        out = pl.store(pl.load(dst, [0, 0], [2, COLS]), [0, 0], out)
        return pl.store(pl.load(copy, [0, 0], [2, COLS]), [2, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[2, COLS], pl.FP16],
        out: pl.Out[pl.Tensor[[4, COLS], pl.FP16]],
        src: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
        dst: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
        copy: pl.InOut[pld.DistributedTensor[[2, COLS], pl.FP16]],
        ready: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
        staged: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[4, COLS], pl.FP16]:
        src = self.stage(inp, src)
        staged = pld.tensor.barrier(staged)
        return self.swap_rows(src, dst, copy, ready, out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[NR, 2, COLS], pl.FP16],
        outputs: pl.Out[pl.Tensor[[NR, 4, COLS], pl.FP16]],
    ) -> pl.Tensor[[NR, 4, COLS], pl.FP16]:
        nbytes = 2 * COLS * pl.FP16.get_byte()
        src_buf = pld.alloc_window_buffer(nbytes)
        dst_buf = pld.alloc_window_buffer(nbytes)
        copy_buf = pld.alloc_window_buffer(nbytes)
        ready_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        staged_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            src = pld.window(src_buf, [2, COLS], dtype=pl.FP16)
            dst = pld.window(dst_buf, [2, COLS], dtype=pl.FP16)
            copy = pld.window(copy_buf, [2, COLS], dtype=pl.FP16)
            ready = pld.window(ready_buf, [pld.world_size(), 1], dtype=pl.INT32)
            staged = pld.window(staged_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs[r], src, dst, copy, ready, staged, device=r)
        return outputs


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_put_region_forms(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(PutRegions, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([(torch.arange(2 * COLS, dtype=torch.float32).reshape(2, COLS) * 0.5 - 3.0 * r)
                          for r in range(n_ranks)]).to(torch.float16)
    outputs = torch.zeros((n_ranks, 4, COLS), dtype=torch.float16)
    compiled(inputs, outputs)
    for r in range(n_ranks):
        before, after = inputs[(r - 1) % n_ranks], inputs[(r + 1) % n_ranks]
        expected = torch.cat([before[1:2], before[0:1], after], dim=0)
        assert torch.equal(outputs[r], expected), (r, outputs[r], expected)
