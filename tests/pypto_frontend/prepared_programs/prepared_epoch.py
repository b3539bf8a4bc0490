"""Signal reuse across the dispatches of a persistent worker (pldemu's own programs in pypto's style).

Each dispatch passes a row to the next device and waits for the row of the previous one. The buggy
version is pypto-lib #960's pattern: its counter restarts at epoch 1 every dispatch, on windows that are
kept (``reset_persistent_windows=False``), so from the second dispatch on the wait is satisfied by what
the first one left and orders nothing. The fixes retire each credit (an AtomicAdd of its negative) or
count on from the previous dispatch (epoch k waits for k). ``submit`` lets the next dispatch start on a
device while the previous one still runs on another: its store into a peer's window then races with the
peer's read of the previous row."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
NR = pl.dynamic("NR")
DISPATCHES = 12


def ring(mode: str):
    """mode: "restart" (the bug), "retire" or "count" (the fixes)."""
    counting = int(mode == "count")  # epoch k waits for k, else for 1
    retiring = int(mode == "retire")  # one retirement, or none

    @pl.program
    class EpochRing:
        @pl.function(type=pl.FunctionType.InCore)
        def step(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[1, W], pl.INT32]],
                 buf: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.INT32]:
            ctx = pld.get_comm_ctx(buf)
            me = pld.rank(ctx)
            nxt = (me + 1) % pld.nranks(ctx)
            pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=buf, peer=nxt, offsets=[0, 0])
            pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            epoch: pl.Scalar[pl.INT32] = pl.read(x, [0, W - 1]) * counting + (1 - counting)
            pld.system.wait(signal=sig, offsets=[0, 0], expected=epoch, cmp=pld.WaitCmp.Ge)
            y = pl.store(pl.load(buf, [0, 0], [1, W]), [0, 0], y)
            for _ in pl.range(retiring):
                back: pl.Scalar[pl.INT32] = pl.const(-1, pl.INT32)
                pld.system.notify(target=sig, peer=me, offsets=[0, 0], value=back, op=pld.NotifyOp.AtomicAdd)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[1, W], pl.INT32]],
                 buf: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.INT32]:
            return self.step(x, y, buf, sig)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.INT32],
                 y: pl.Out[pl.Tensor[[NR, 1, W], pl.INT32]]) -> pl.Tensor[[NR, 1, W], pl.INT32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], pld.window(rows, [1, W], dtype=pl.INT32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return EpochRing


def _run(device_ids, devices, mode, submit=False):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    compiled = ir.compile(ring(mode), distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    x = torch.zeros((devices, 1, W), dtype=torch.int32).share_memory_()
    ys = [torch.zeros((devices, 1, W), dtype=torch.int32).share_memory_() for _ in range(2)]
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for k in range(1, DISPATCHES + 1):
            xk = x if not submit else x.clone().share_memory_()
            for r in range(devices):
                xk[r].fill_(100 * k + r)
                xk[r, 0, W - 1] = k
            y = ys[k % 2]
            if submit:
                rt.submit(compiled, xk, y)
                continue
            rt(xk, y)
            for r in range(devices):
                assert y[r, 0, 0].item() == 100 * k + (r - 1) % devices, (k, r, y[r])


@pytest.mark.parametrize("devices", [2, 3, 4, 5])
def test_epoch_restarting_every_dispatch(device_ids, devices):
    _run(device_ids, devices, "restart")


@pytest.mark.parametrize("devices", [2, 3, 4, 5])
def test_credit_retired_every_dispatch(device_ids, devices):
    _run(device_ids, devices, "retire")


@pytest.mark.parametrize("devices", [2, 3, 4, 5])
def test_epoch_counted_on(device_ids, devices):
    _run(device_ids, devices, "count")


def test_submitted_dispatches_overlap(device_ids):
    _run(device_ids, 2, "retire", submit=True)
