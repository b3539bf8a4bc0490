"""pypto's pitfall "dispatch loop trip count disagreeing with device_ids": a dispatch loop over a fixed
two devices, run on three. pypto's MaterializeCommDomainScopes needs the loop to cover every device;
pldemu refuses the program, naming the device left without a dispatch."""

import pypto.language as pl
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
COLS = 16


@pl.jit.incore
def copy_row(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)


@pl.jit
def per_rank(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return copy_row(x, y)


@pl.jit.host
def copy_two(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(2):  # BUG: two devices, whatever device_ids says
        per_rank(x[r], y[r], device=r)


def test_trip_count_below_the_devices():
    copy_two(torch.ones((3, 1, COLS)), torch.zeros((3, 1, COLS)),
             config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, 2])))
