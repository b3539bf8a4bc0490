"""pypto's debugging table, "Signal cell never reaches expected value": every peer counts its arrival
into one shared cell of the root with Set where AtomicAdd was needed, so the root's cell holds 1,
never N - 1. pldemu reports the deadlock with the cell's value and the Set notifies."""

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 3


@pl.jit.incore
def gather_arrivals(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[1, 1], pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(sig))
    if me != 0:
        pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)  # BUG: Set, not AtomicAdd
    if me == 0:
        pld.system.wait(sig, offsets=[0, 0], expected=N - 1, cmp=pld.WaitCmp.Ge)
    return y


@pl.jit
def per_rank(y: pl.Out[pl.Tensor[[1, 8], pl.FP32]], sig: pld.DistributedTensor[[1, 1], pl.INT32]):
    return gather_arrivals(y, sig)


@pl.jit.host
def arrivals(y: pl.Out[pl.Tensor[[N, 1, 8], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        per_rank(y[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)


def test_set_instead_of_atomic_add():
    arrivals(torch.zeros((N, 1, 8)), config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, 2])))
