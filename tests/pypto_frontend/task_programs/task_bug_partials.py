"""pypto-lib #953's split-K pattern (pldemu's own program in pypto's class form, written here): the K
blocks of one SPMD task each compute an FP32 partial product and accumulate it into one buffer after a
zero seed. With AtomicAdd the partials are summed in task-completion order, which is neither fixed nor
associative: the result changes from run to run. The fix (#953's) writes each partial to its own row
and sums them in one task, in ascending K, after the grid."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
K = 4
NR = pl.dynamic("NR")


def split_k(atomic: bool):
    @pl.program
    class SplitK:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[K, W], pl.FP32], w: pl.Tensor[[K, W], pl.FP32],
                 y: pl.Out[pl.Tensor[[1, W], pl.FP32]], parts: pl.Out[pl.Tensor[[K, W], pl.FP32]],
                 acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            if atomic:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="zero_seed") as seeded:
                    acc = pl.store(pl.mul(pl.load(x, [0, 0], [1, W]), 0.0), [0, 0], acc)
                with pl.spmd(K, deps=[seeded]) as grid:
                    k = pl.tile.get_block_idx()
                    partial = pl.mul(pl.load(x, [k, 0], [1, W]), pl.load(w, [k, 0], [1, W]))
                    me = pld.rank(pld.get_comm_ctx(acc))
                    # BUG: the K partials land in completion order
                    pld.tile.remote_store(partial, target=acc, peer=me, offsets=[0, 0], atomic=pl.AtomicType.Add)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="emit", deps=[grid]):
                    y = pl.store(pl.load(acc, [0, 0], [1, W]), [0, 0], y)
            else:
                with pl.spmd(K) as grid:
                    k = pl.tile.get_block_idx()
                    partial = pl.mul(pl.load(x, [k, 0], [1, W]), pl.load(w, [k, 0], [1, W]))
                    parts = pl.store(partial, [k, 0], parts)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="reduce", deps=[grid]):
                    total = pl.load(parts, [0, 0], [1, W])
                    for k in pl.range(1, K):
                        total = pl.add(total, pl.load(parts, [k, 0], [1, W]))
                    y = pl.store(total, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, K, W], pl.FP32], w: pl.Tensor[[NR, K, W], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 parts: pl.Out[pl.Tensor[[NR, K, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
            cells = pld.alloc_window_buffer(W * 4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], w[r], y[r], parts[r], pld.window(cells, [1, W], dtype=pl.FP32), device=r)
            return y

    return SplitK


def _run(device_ids, devices, atomic):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(split_k(atomic), distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    gen = torch.Generator().manual_seed(953)
    x = (torch.randn((devices, K, W), generator=gen) * 1e4).share_memory_()
    w = torch.randn((devices, K, W), generator=gen).share_memory_()
    y = torch.zeros((devices, 1, W)).share_memory_()
    parts = torch.zeros((devices, K, W)).share_memory_()
    compiled(x, w, y, parts)
    golden = x[:, 0:1] * w[:, 0:1]
    for k in range(1, K):  # ascending K, in FP32: the fixed program's order
        golden = golden + x[:, k:k + 1] * w[:, k:k + 1]
    assert torch.equal(y, golden)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_partials_added_atomically(device_ids, devices):
    _run(device_ids, devices, True)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_partials_reduced_in_ascending_k(device_ids, devices):
    _run(device_ids, devices, False)
