"""pypto's debugging table, "Shape mismatch at compile time": the rank count written as a constant in the
host annotations instead of ``pl.dynamic("NR")``, run on more devices than it says. pldemu names the
host parameter, the dim and both extents at the host function's line."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = 2  # BUG: the world size, fixed; pl.dynamic("NR") binds it from the tensors
COLS = 16


@pl.jit.incore
def copy_row(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)


@pl.jit
def per_rank(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return copy_row(x, y)


@pl.jit.host
def copy_all(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        per_rank(x[r], y[r], device=r)


def test_static_rank_count():
    copy_all(torch.ones((3, 1, COLS)), torch.zeros((3, 1, COLS)),
             config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, 2])))
