"""pypto #2391's pattern (pldemu's own program in pypto's class form, written here): notify and wait in
separate chip tasks on one signal. Each rank submits as many waiters as the simulator has AIV cores
(16), each waiting for its signal and then copying the payload the previous rank published; the
publisher (remote_store + notify to the next rank) is submitted after them.

In the buggy version nothing orders a rank's own waiters after its publisher, so the waiters may take
every core, spinning, before the publisher gets one: on the device the card deadlocks (whether it does
in one run depends on which tasks the schedulers start first, so pldemu decides it from the graph). The
fix is #2391's: notify's target counts as a write, so a waiter submitted after the notifier takes a RAW
edge on it and cannot hold a core before the notifier has run."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
WAITERS = 16
NR = pl.dynamic("NR")


def waiters_and_publisher(publisher_first: bool):
    @pl.program
    class WaitersAndPublisher:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[WAITERS, W], pl.INT32]],
                 payload: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[WAITERS, W], pl.INT32]:
            if publisher_first:
                self.publish(x, payload, sig)
            for i in pl.parallel(WAITERS):
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter"):
                    pld.system.wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # holds its core
                    y = pl.store(pl.load(payload, [0, 0], [1, W]), [i, 0], y)
            if not publisher_first:
                self.publish(x, payload, sig)  # BUG: may find every core held by a spinning waiter
            return y

        @pl.function(type=pl.FunctionType.InCore)
        def publish(self, x: pl.Tensor[[1, W], pl.INT32], payload: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                    sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
            ctx = pld.get_comm_ctx(sig)
            nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
            pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
            pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.INT32],
                 y: pl.Out[pl.Tensor[[NR, WAITERS, W], pl.INT32]]) -> pl.Tensor[[NR, WAITERS, W], pl.INT32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], pld.window(rows, [1, W], dtype=pl.INT32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return WaitersAndPublisher


def _run(device_ids, devices, publisher_first):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(waiters_and_publisher(publisher_first),
                          distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    x = torch.arange(devices * W, dtype=torch.int32).reshape(devices, 1, W).share_memory_()
    y = torch.full((devices, WAITERS, W), -1, dtype=torch.int32).share_memory_()
    compiled(x, y)
    for r in range(devices):
        assert torch.equal(y[r], x[(r - 1) % devices].expand(WAITERS, W)), (r, y[r])


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_waiters_submitted_before_their_publisher(device_ids, devices):
    _run(device_ids, devices, False)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_the_publisher_submitted_first_orders_the_waiters(device_ids, devices):
    _run(device_ids, devices, True)
