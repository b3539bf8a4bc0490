"""Tensor regions in pl.jit kernels, as pypto-lib's fixtures write them: a peer's rows copied out of a
window by slice assignment, a scalar read `order[i]` of an INT32 table choosing the rows, and
`pl.tensor.dim` of a dynamic dim. Each rank publishes ROWS rows; every rank gathers all of them in the
order its table says. Run through ``pldemu pytest``."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

ROWS = 2
COLS = 16
NR = pl.dynamic("NR")
ALL = pl.dynamic("ALL")


@pl.jit.incore
def gather_rows(
    mine: pl.Tensor[[ROWS, COLS], pl.FP32],
    order: pl.Tensor[[8], pl.INT32],
    out: pl.Out[pl.Tensor[[ALL, COLS], pl.FP32]],
    box: pld.DistributedTensor[[ROWS, COLS], pl.FP32],
    sig: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(box)
    n = pld.nranks(ctx)
    box[0:ROWS, 0:COLS] = mine[0:ROWS, 0:COLS]  # slice assignment into the own window
    for p in pl.range(n):
        pld.system.notify(sig, peer=p, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, offsets=[0, 0], expected=n, cmp=pld.WaitCmp.Ge)
    total = pl.tensor.dim(out, 0)
    for i in pl.range(total // ROWS):
        src = order[i]  # a scalar read of the table
        got = pld.tile.remote_load(box, peer=src, offsets=[0, 0], shape=[ROWS, COLS])
        out[i * ROWS:i * ROWS + ROWS, 0:COLS] = got
    return out


@pl.jit
def per_rank(mine: pl.Tensor[[ROWS, COLS], pl.FP32], order: pl.Tensor[[8], pl.INT32],
             out: pl.Out[pl.Tensor[[ALL, COLS], pl.FP32]], box: pld.DistributedTensor[[ROWS, COLS], pl.FP32],
             sig: pld.DistributedTensor[[1, 1], pl.INT32]):
    return gather_rows(mine, order, out, box, sig)


@pl.jit.host
def gather_all(mine: pl.Tensor[[NR, ROWS, COLS], pl.FP32], order: pl.Tensor[[NR, 8], pl.INT32],
               out: pl.Out[pl.Tensor[[NR, ALL, COLS], pl.FP32]]):
    box_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        box = pld.window(box_buf, [ROWS, COLS], dtype=pl.FP32)
        sig = pld.window(sig_buf, [1, 1], dtype=pl.INT32)
        per_rank(mine[r], order[r], out[r], box, sig, device=r)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_gather_in_table_order(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    mine = torch.stack([torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) + 100 * r
                        for r in range(devices)])
    order = torch.zeros((devices, 8), dtype=torch.int32)
    for r in range(devices):  # rank r reads the ranks from r + 1 on, round the ring
        for i in range(devices):
            order[r, i] = (r + 1 + i) % devices
    out = torch.zeros((devices, ROWS * devices, COLS))
    gather_all(mine, order, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:devices])))
    for r in range(devices):
        expected = torch.cat([mine[(r + 1 + i) % devices] for i in range(devices)])
        assert torch.equal(out[r], expected), r
