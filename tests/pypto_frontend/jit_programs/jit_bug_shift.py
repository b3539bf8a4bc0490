"""pypto's debugging table, "Silent data corruption": a remote_load whose offsets do not match what the
peer stored, shifted by one row past the end of the peer's window. pldemu refuses the access at its
line (the device reads whatever lies beyond the window)."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 2
ROWS = 2
COLS = 16


@pl.jit.incore
def exchange(
    x: pl.Tensor[[ROWS, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
    data: pld.DistributedTensor[[ROWS, COLS], pl.FP32],
    sig: pld.DistributedTensor[[N, 1], pl.INT32],
):
    me = pld.rank(pld.get_comm_ctx(data))
    data = pl.store(pl.load(x, [0, 0], [ROWS, COLS]), [0, 0], data)
    sig = pld.tensor.barrier(sig)
    got = pld.tile.remote_load(data, peer=(me + 1) % N, offsets=[1, 0], shape=[ROWS, COLS])  # BUG: row 1
    return pl.store(got, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[ROWS, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
    data: pld.DistributedTensor[[ROWS, COLS], pl.FP32],
    sig: pld.DistributedTensor[[N, 1], pl.INT32],
):
    return exchange(x, y, data, sig)


@pl.jit.host
def shifted(x: pl.Tensor[[N, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[N, ROWS, COLS], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([N, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        data = pld.window(data_buf, [ROWS, COLS], dtype=pl.FP32)
        sig = pld.window(sig_buf, [N, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], data, sig, device=r)


def test_shifted_remote_load():
    shifted(torch.ones((N, ROWS, COLS)), torch.zeros((N, ROWS, COLS)),
            config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
