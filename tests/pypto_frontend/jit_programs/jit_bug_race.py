"""A program with its barrier left out (step 05 of pypto's tutorial without ``pld.tensor.barrier``):
the next rank's remote_load may read the window before its owner stored into it. pldemu reports the
race with both accesses at their lines."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 2
COLS = 32


@pl.jit.incore
def shift(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    data: pld.DistributedTensor[[1, COLS], pl.FP32],
):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    data = pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], data)
    # BUG: no barrier between the store above and the peer's read below
    got = pld.tile.remote_load(data, peer=(me + 1) % pld.nranks(ctx), offsets=[0, 0], shape=[1, COLS])
    return pl.store(got, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    data: pld.DistributedTensor[[1, COLS], pl.FP32],
):
    return shift(x, y, data)


@pl.jit.host
def unsynchronised(x: pl.Tensor[[N, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[N, 1, COLS], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        per_rank(x[r], y[r], pld.window(buf, [1, COLS], dtype=pl.FP32), device=r)


def test_missing_barrier():
    unsynchronised(torch.ones((N, 1, COLS)), torch.zeros((N, 1, COLS)),
                   config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
