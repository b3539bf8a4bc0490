"""Cross-rank happens-before per task (pldemu's own program in pypto's class form, written here): each
rank publishes a row into the next rank's window and counts it on that rank's arrival cell; on each rank
a ``consume`` task waits for the row and reads it, and an ``audit`` task reads the same row too.

In the buggy version ``audit`` has no path from ``consume`` (a manual scope: only ``deps`` make edges):
nothing orders its read after the previous rank's publish, whichever order the rank ran its tasks in,
though some orders run it after ``consume``'s wait (one clock per rank then took it as ordered, issue 40
item 4). The fixed version gives ``audit`` ``deps=[consume]``: the wait that observed the previous
rank's count orders it."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
NR = pl.dynamic("NR")


def audited_exchange(ordered: bool):
    @pl.program
    class AuditedExchange:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                 z: pl.Out[pl.Tensor[[1, W], pl.FP32]], recv: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                 arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.FP32]:
            with pl.manual_scope():
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish"):
                    ctx = pld.get_comm_ctx(arrived)
                    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                    pld.tile.remote_store(pl.add(pl.load(x, [0, 0], [1, W]), 1.0), target=recv, peer=nxt,
                                          offsets=[0, 0])
                    pld.system.notify(target=arrived, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume") as consume:
                    pld.system.wait(signal=arrived, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
                    y = pl.store(pl.load(recv, [0, 0], [1, W]), [0, 0], y)
                if not ordered:
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="audit"):  # BUG: no path from consume
                        z = pl.store(pl.load(recv, [0, 0], [1, W]), [0, 0], z)
                else:
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="audit", deps=[consume]):
                        z = pl.store(pl.load(recv, [0, 0], [1, W]), [0, 0], z)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 z: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], z[r], pld.window(rows, [1, W], dtype=pl.FP32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return AuditedExchange


def _run(device_ids, devices, ordered):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(audited_exchange(ordered),
                          distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    x = torch.arange(devices * W, dtype=torch.float32).reshape(devices, 1, W).share_memory_()
    y = torch.zeros_like(x).share_memory_()
    z = torch.zeros_like(x).share_memory_()
    compiled(x, y, z)
    for r in range(devices):
        assert torch.equal(y[r], x[(r - 1) % devices] + 1.0), (r, y[r])


@pytest.mark.parametrize("devices", [2, 3, 4])
def test_an_audit_beside_the_consumer(device_ids, devices):
    _run(device_ids, devices, False)


@pytest.mark.parametrize("devices", [2, 3, 4])
def test_an_audit_after_the_consumer(device_ids, devices):
    _run(device_ids, devices, True)
