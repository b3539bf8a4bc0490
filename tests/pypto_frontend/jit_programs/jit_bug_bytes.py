"""pypto's pitfall "alloc_window_buffer given a count instead of bytes": ``alloc_window_buffer(N)``
allocates N bytes, too few for the N-cell INT32 window viewed on it. pldemu says how many bytes the
view needs and the buffer has, at the view's line."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")


@pl.jit.incore
def touch(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[NR, 1], pl.INT32]):
    sig = pld.tensor.barrier(sig)
    return y


@pl.jit
def per_rank(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[NR, 1], pl.INT32]):
    return touch(y, sig)


@pl.jit.host
def barrier_all(y: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]]):
    sig_buf = pld.alloc_window_buffer(pld.world_size())  # BUG: bytes, not cells
    for r in pl.range(pld.world_size()):
        per_rank(y[r], pld.window(sig_buf, [pld.world_size(), 1], dtype=pl.INT32), device=r)


def test_count_instead_of_bytes():
    barrier_all(torch.zeros((2, 1, 8)), config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
