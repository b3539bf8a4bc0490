"""pypto's debugging table, "All ranks hang": every rank waits for its peers before it notifies them.
pldemu ends the call with the deadlock's wait-for graph at the wait's line."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 2


@pl.jit.incore
def rendezvous(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[N, 1], pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(sig))
    for src in pl.range(N):
        if src != me:
            pld.system.wait(sig, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)  # BUG: waits first
    for peer in pl.range(N):
        if peer != me:
            pld.system.notify(sig, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    return y


@pl.jit
def per_rank(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[N, 1], pl.INT32]):
    return rendezvous(y, sig)


@pl.jit.host
def hang(y: pl.Out[pl.Tensor[[N, 1, 8], pl.FP32]]):
    buf = pld.alloc_window_buffer([N, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        per_rank(y[r], pld.window(buf, [N, 1], dtype=pl.INT32), device=r)


def test_hang():
    hang(torch.zeros((N, 1, 8)), config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
