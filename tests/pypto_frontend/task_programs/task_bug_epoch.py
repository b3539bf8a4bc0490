"""pypto-lib #975's pattern (reverted by #978; pldemu's own program in pypto's class form, written here):
a layered exchange whose pushes are fused into expert tasks nested in ``pl.parallel`` loops, so no single
TaskId covers them, and a row-count handshake stands in for the barrier: each expert task pushes its row
to the next rank and counts one on that rank's arrival cell; a ``combine_wait`` task waits for the rows
and the ``combine`` task after it reads them.

In the buggy version the count has no epoch dimension (the cell is cleared once per program, the wait
expects ROWS every layer): from the second layer on, the wait is satisfied by the first layer's rows, so
``combine`` reads rows the previous rank may not have pushed yet. The fixed version counts on across
layers (layer l waits for ROWS * (l + 1)), so only this layer's rows can complete the count."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
ROWS = 4
LAYERS = 3
NR = pl.dynamic("NR")


def layered_exchange(epoch_counted: bool):
    per_layer = int(epoch_counted)  # the fix: expected = ROWS * (layer + 1), else ROWS

    @pl.program
    class LayeredExchange:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[LAYERS * ROWS, W], pl.FP32], y: pl.Out[pl.Tensor[[LAYERS * ROWS, W], pl.FP32]],
                 recv: pl.InOut[pld.DistributedTensor[[LAYERS * ROWS, W], pl.FP32]],
                 arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[LAYERS * ROWS, W], pl.FP32]:
            for layer in pl.range(LAYERS):
                for r in pl.parallel(ROWS):
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="expert"):
                        ctx = pld.get_comm_ctx(arrived)
                        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                        row = pl.add(pl.load(x, [layer * ROWS + r, 0], [1, W]), 1.0)
                        pld.tile.remote_store(row, target=recv, peer=nxt, offsets=[layer * ROWS + r, 0])
                        pld.system.notify(target=arrived, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_wait") as arrival:
                    expect: pl.Scalar[pl.INT32] = ROWS * (layer * per_layer + 1)  # BUG when per_layer is 0
                    pld.system.wait(signal=arrived, offsets=[0, 0], expected=expect, cmp=pld.WaitCmp.Ge)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine", deps=[arrival]):
                    y = pl.store(pl.load(recv, [layer * ROWS, 0], [ROWS, W]), [layer * ROWS, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, LAYERS * ROWS, W], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, LAYERS * ROWS, W], pl.FP32]]) -> pl.Tensor[[NR, LAYERS * ROWS, W], pl.FP32]:
            rows = pld.alloc_window_buffer(LAYERS * ROWS * W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], pld.window(rows, [LAYERS * ROWS, W], dtype=pl.FP32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return LayeredExchange


def _run(device_ids, devices, epoch_counted):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(layered_exchange(epoch_counted),
                          distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    x = torch.arange(devices * LAYERS * ROWS * W, dtype=torch.float32).reshape(devices, LAYERS * ROWS, W)
    x = x.share_memory_()
    y = torch.zeros_like(x).share_memory_()
    compiled(x, y)
    for r in range(devices):
        assert torch.equal(y[r], x[(r - 1) % devices] + 1.0), (r, y[r])


@pytest.mark.parametrize("devices", [2, 3, 4, 5])
def test_a_row_count_without_an_epoch(device_ids, devices):
    _run(device_ids, devices, False)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_a_row_count_per_epoch(device_ids, devices):
    _run(device_ids, devices, True)
