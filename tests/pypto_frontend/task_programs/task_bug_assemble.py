"""pypto-lib #953 in its own spelling (pldemu's program in pypto's class form, written here): a split-K
projection. A seed task zeroes the FP32 output on core; an SPMD grid of GROUPS x SPLIT blocks each
multiplies one K slice and adds its partial product into the output's columns with
``pl.assemble(..., atomic=pl.AtomicType.Add)``. The TensorMap orders the seed before every add (the
grid's output is behind a prior writer), but nothing orders the adds themselves: the SPLIT partials of
one element are summed in completion order, which is not fixed. The fix writes each partial to its own
slab and sums the slabs in one task, in ascending K. An INT32 hit count added atomically by such a grid is
exact in any order, and is not reported."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

M = 4
N_TILE = 8
GROUPS = 2
N = GROUPS * N_TILE
SPLIT = 2
K_SLICE = 16
K = SPLIT * K_SLICE
NR = pl.dynamic("NR")


def projection(atomic: bool):
    @pl.program
    class SplitKProjection:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[M, K], pl.FP32], w: pl.Tensor[[K, N], pl.FP32],
                 y: pl.Out[pl.Tensor[[M, N], pl.FP32]],
                 slabs: pl.Out[pl.Tensor[[SPLIT * M, N], pl.FP32]]) -> pl.Tensor[[M, N], pl.FP32]:
            if atomic:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="proj_seed"):
                    for g in pl.range(GROUPS):
                        y = pl.assemble(y, pl.full([M, N_TILE], dtype=pl.FP32, value=0.0), [0, g * N_TILE])
                for b in pl.spmd(GROUPS * SPLIT, name_hint="proj_matmul"):
                    col = (b // SPLIT) * N_TILE
                    k0 = (b % SPLIT) * K_SLICE
                    part = pl.matmul(pl.slice(x, [M, K_SLICE], [0, k0]), pl.slice(w, [K_SLICE, N_TILE], [k0, col]),
                                     out_dtype=pl.FP32)
                    y = pl.assemble(y, part, [0, col], atomic=pl.AtomicType.Add)  # BUG: SPLIT adds, any order
            else:
                with pl.spmd(GROUPS * SPLIT, name_hint="proj_matmul") as grid:
                    b = pl.tile.get_block_idx()
                    col = (b // SPLIT) * N_TILE
                    k0 = (b % SPLIT) * K_SLICE
                    part = pl.matmul(pl.slice(x, [M, K_SLICE], [0, k0]), pl.slice(w, [K_SLICE, N_TILE], [k0, col]),
                                     out_dtype=pl.FP32)
                    slabs = pl.assemble(slabs, part, [(b % SPLIT) * M, col])
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="proj_reduce", deps=[grid]):
                    total = pl.load(slabs, [0, 0], [M, N])
                    for s in pl.range(1, SPLIT):
                        total = pl.add(total, pl.load(slabs, [s * M, 0], [M, N]))
                    y = pl.store(total, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, M, K], pl.FP32], w: pl.Tensor[[NR, K, N], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]],
                 slabs: pl.Out[pl.Tensor[[NR, SPLIT * M, N], pl.FP32]]) -> pl.Tensor[[NR, M, N], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], w[r], y[r], slabs[r], device=r)
            return y

    return SplitKProjection


@pl.program
class HitCount:
    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, hits: pl.Out[pl.Tensor[[1, N], pl.INT32]]) -> pl.Tensor[[1, N], pl.INT32]:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="hits_seed"):
            hits = pl.assemble(hits, pl.full([1, N], dtype=pl.INT32, value=0), [0, 0])
        for b in pl.spmd(GROUPS * SPLIT, name_hint="hits_add"):
            hits = pl.assemble(hits, pl.full([1, N_TILE], dtype=pl.INT32, value=1), [0, (b // SPLIT) * N_TILE],
                               atomic=pl.AtomicType.Add)
        return hits

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, hits: pl.Out[pl.Tensor[[NR, 1, N], pl.INT32]]) -> pl.Tensor[[NR, 1, N], pl.INT32]:
        for r in pl.range(pld.world_size()):
            self.chip(hits[r], device=r)
        return hits


def _compiled(program, device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    return ir.compile(program, distributed_config=DistributedConfig(device_ids=device_ids[:devices]))


def _project(device_ids, devices, atomic):
    compiled = _compiled(projection(atomic), device_ids, devices)
    gen = torch.Generator().manual_seed(953)
    x = (torch.randn((devices, M, K), generator=gen) * 1e4).share_memory_()
    w = torch.randn((devices, K, N), generator=gen).share_memory_()
    y = torch.full((devices, M, N), 7.0).share_memory_()  # not zero: the seed task must clear it
    slabs = torch.zeros((devices, SPLIT * M, N)).share_memory_()
    compiled(x, w, y, slabs)
    golden = x[:, :, 0:K_SLICE] @ w[:, 0:K_SLICE]
    for s in range(1, SPLIT):  # ascending K: the fixed program's order
        golden = golden + x[:, :, s * K_SLICE:(s + 1) * K_SLICE] @ w[:, s * K_SLICE:(s + 1) * K_SLICE]
    assert torch.allclose(y, golden, rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize("devices", [1, 2, 3])
def test_split_k_partials_assembled_atomically(device_ids, devices):
    _project(device_ids, devices, True)


@pytest.mark.parametrize("devices", [1, 2, 3])
def test_split_k_partials_reduced_in_ascending_k(device_ids, devices):
    _project(device_ids, devices, False)


@pytest.mark.parametrize("devices", [1, 2, 3])
def test_an_int32_count_assembled_atomically(device_ids, devices):
    compiled = _compiled(HitCount, device_ids, devices)
    hits = torch.full((devices, 1, N), 5, dtype=torch.int32).share_memory_()
    compiled(hits)
    assert torch.equal(hits, torch.full((devices, 1, N), SPLIT, dtype=torch.int32))
