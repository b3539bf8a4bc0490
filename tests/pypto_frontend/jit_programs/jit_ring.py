"""A ring exchange written as pypto's tutorial writes it (an ``@pl.jit.incore`` kernel, an ``@pl.jit``
wrapper, an ``@pl.jit.host`` entry) at any rank count: ``NR`` is dynamic, each rank puts its row into
the next rank's window and signals it; two rounds through one window, a credit ("my inbox is free
again") between them, with an inline handshake imported from another module. Run through ``pldemu pytest`` (not collected by pldemu's own suite)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from jit_helpers import handshake
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

COLS = 64
NR = pl.dynamic("NR")


@pl.jit.incore
def ring_step(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    inbox: pld.DistributedTensor[[1, COLS], pl.FP32],
    ready: pld.DistributedTensor[[2, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prev = (me + n - 1) % n
    row = pl.load(x, [0, 0], [1, COLS])
    pld.tile.remote_store(row, inbox, peer=nxt, offsets=[0, 0])
    ready = handshake(ready, nxt, 0, 1)  # my inbox holds my predecessor's row
    got = pl.load(inbox, [0, 0], [1, COLS])
    ready = handshake(ready, prev, 1, 1)  # my inbox is free again; wait until my successor's is
    pld.tile.remote_store(got, inbox, peer=nxt, offsets=[0, 0])
    ready = handshake(sig=ready, peer=nxt, row=0, expected=2)
    twice = pl.load(inbox, [0, 0], [1, COLS])
    return pl.store(twice, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
    inbox: pld.DistributedTensor[[1, COLS], pl.FP32],
    ready: pld.DistributedTensor[[2, 1], pl.INT32],
):
    return ring_step(x, y, inbox, ready)


@pl.jit.host
def ring_two_steps(
    x: pl.Tensor[[NR, 1, COLS], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer(2 * 4)  # bytes: two INT32 cells
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [1, COLS], dtype=pl.FP32)
        ready = pld.window(ready_buf, [2, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, ready, device=r)


def config(devices: list[int]) -> RunConfig:
    return RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=devices))


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_ring_two_steps(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    x = torch.stack([torch.arange(COLS, dtype=torch.float32).reshape(1, COLS) + 100 * r for r in range(devices)])
    y = torch.zeros((devices, 1, COLS), dtype=torch.float32)
    ring_two_steps(x, y, config=config(device_ids[:devices]))
    expected = torch.stack([x[(r - 2) % devices] for r in range(devices)])
    assert torch.equal(y, expected)


def test_the_cache_gives_one_program_per_key(device_ids):
    if len(device_ids) < 3:
        pytest.skip("needs 3 devices")
    two = [torch.zeros((2, 1, COLS)), torch.zeros((2, 1, COLS))]
    three = [torch.zeros((3, 1, COLS)), torch.zeros((3, 1, COLS))]
    first = ring_two_steps.compile(*two, config=config(device_ids[:2]))
    assert ring_two_steps.compile(*two, config=config(device_ids[:2])) is first
    # NR is dynamic: another extent on the same devices is the same artifact ...
    assert ring_two_steps.compile(*three, config=config(device_ids[:2])) is first
    # ... other devices are another.
    assert ring_two_steps.compile(*three, config=config(device_ids[:3])) is not first
    assert first.output_dir.name.startswith("_jit_ring_two_steps_")
