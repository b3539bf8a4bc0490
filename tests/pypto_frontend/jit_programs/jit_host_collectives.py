"""HOST-level collectives in a pl.jit entry, as pypto's distributed chapter shows them: an allreduce
whose signal pypto synthesises, spread over two cores per rank (``core_num=2``), then an allgather of
the reduced rows with a ``[NR]`` signal in the byte form of ``alloc_window_buffer``; the rows are
staged by a per-device wrapper. Run through ``pldemu pytest`` at every rank count."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SIZE = 512
NR = pl.dynamic("NR")


@pl.jit.incore
def stage_row(x: pl.Tensor[[1, SIZE], pl.FP32], data: pld.DistributedTensor[[1, SIZE], pl.FP32]):
    return pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)


@pl.jit
def stage(x: pl.Tensor[[1, SIZE], pl.FP32], data: pld.DistributedTensor[[1, SIZE], pl.FP32]):
    return stage_row(x, data)


@pl.jit.incore
def unstage_rows(rows: pld.DistributedTensor[[NR, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]):
    n = pl.tensor.dim(rows, 0)
    for i in pl.range(n):
        pl.store(pl.load(rows, [i, 0], [1, SIZE]), [i, 0], y)
    return y


@pl.jit
def unstage(rows: pld.DistributedTensor[[NR, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]):
    return unstage_rows(rows, y)


@pl.jit.host
def reduce_then_gather(x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]]):
    data_buf = pld.alloc_window_buffer(SIZE * pl.FP32.get_byte())
    rows_buf = pld.alloc_window_buffer(pld.world_size() * SIZE * pl.FP32.get_byte())
    sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
    data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
    rows = pld.window(rows_buf, [pld.world_size(), SIZE], dtype=pl.FP32)
    sig = pld.window(sig_buf, [pld.world_size()], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stage(x[r], data, device=r)
    data = pld.tensor.allreduce(data, op=pld.ReduceOp.Sum, core_num=2)
    rows = pld.tensor.allgather(data, rows, sig)
    for r in pl.range(pld.world_size()):
        unstage(rows, y[r], device=r)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_reduce_then_gather(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    x = torch.stack([torch.arange(SIZE, dtype=torch.float32).reshape(1, SIZE) * (r + 1) for r in range(devices)])
    y = torch.zeros((devices, devices, SIZE))
    reduce_then_gather(x, y, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:devices])))
    total = x.sum(dim=0)
    assert torch.equal(y, total.expand(devices, devices, SIZE))
