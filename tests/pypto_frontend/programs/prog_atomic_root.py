"""Atomic accumulate into a root in pypto's style: every device adds its INT32 block into the root's
window with ``pld.tensor.put(..., atomic=pld.AtomicType.Add)`` and credits the root's signal; only the
root waits (``if my_rank == root:`` with an early ``return``) and reads the sum back. The root is a
closure int, so the program is built by a factory, as pypto's tests build theirs."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
SIDE = 8  # an INT32 tile row of 32 bytes (ptoas)


def build_atomic_root(root_rank: int):
    ROOT = root_rank

    @pl.program
    class AtomicRoot:
        @pl.function(type=pl.FunctionType.InCore)
        def contribute(
            self,
            inp: pl.Tensor[[SIDE, SIDE], pl.INT32],
            out: pl.Out[pl.Tensor[[SIDE, SIDE], pl.INT32]],
            src: pl.InOut[pld.DistributedTensor[[SIDE, SIDE], pl.INT32]],
            acc: pl.InOut[pld.DistributedTensor[[SIDE, SIDE], pl.INT32]],
            credit: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[SIDE, SIDE], pl.INT32]:
            ctx = pld.get_comm_ctx(acc)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)
            mine = pl.load(inp, [0, 0], [SIDE, SIDE])
            src = pl.store(mine, [0, 0], src)
            pld.tensor.put(acc, peer=ROOT, src=src, atomic=pld.AtomicType.Add)
            pld.system.notify(credit, peer=ROOT, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            if my_rank == ROOT:
                pld.system.wait(signal=credit, offsets=[0, 0], expected=nranks, cmp=pld.WaitCmp.Ge)
                total = pl.load(acc, [0, 0], [SIDE, SIDE])
                return pl.store(total, [0, 0], out)
            return out

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip_orch(
            self,
            inp: pl.Tensor[[SIDE, SIDE], pl.INT32],
            out: pl.Out[pl.Tensor[[SIDE, SIDE], pl.INT32]],
            src: pl.InOut[pld.DistributedTensor[[SIDE, SIDE], pl.INT32]],
            acc: pl.InOut[pld.DistributedTensor[[SIDE, SIDE], pl.INT32]],
            credit: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[SIDE, SIDE], pl.INT32]:
            return self.contribute(inp, out, src, acc, credit)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[NR, SIDE, SIDE], pl.INT32],
            outputs: pl.Out[pl.Tensor[[NR, SIDE, SIDE], pl.INT32]],
        ) -> pl.Tensor[[NR, SIDE, SIDE], pl.INT32]:
            src_buf = pld.alloc_window_buffer(SIDE * SIDE * pl.INT32.get_byte())
            acc_buf = pld.alloc_window_buffer(SIDE * SIDE * pl.INT32.get_byte())
            credit_buf = pld.alloc_window_buffer(pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                src = pld.window(src_buf, [SIDE, SIDE], dtype=pl.INT32)
                acc = pld.window(acc_buf, [SIDE, SIDE], dtype=pl.INT32)
                credit = pld.window(credit_buf, [1, 1], dtype=pl.INT32)
                self.chip_orch(inputs[r], outputs[r], src, acc, credit, device=r)
            return outputs

    return AtomicRoot


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_atomic_add_into_root(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    root = n_ranks - 1
    compiled = ir.compile(build_atomic_root(root), platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    inputs = torch.stack([torch.arange(SIDE * SIDE, dtype=torch.int32).reshape(SIDE, SIDE) * (r + 1)
                          for r in range(n_ranks)])
    outputs = torch.full((n_ranks, SIDE, SIDE), -7, dtype=torch.int32)
    compiled(inputs, outputs)
    assert torch.equal(outputs[root], inputs.sum(dim=0).to(torch.int32)), outputs[root]
    for r in range(n_ranks):
        if r != root:
            assert torch.equal(outputs[r], torch.full((SIDE, SIDE), -7, dtype=torch.int32)), r
