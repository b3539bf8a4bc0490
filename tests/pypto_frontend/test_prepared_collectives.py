"""A prepared worker's dispatches run the program lowered, as a one-shot call's job does: a collective (a HOST
builtin or a kernel's ``pld.tensor.*``) is a composite that pldemu's LowerCompositeOps expands before the ranks
run it (a prepared dispatch used to send the translated program unlowered, and every rank crashed with
``pld.tensor.allreduce is a composite collective: lower the program first``)."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

COLS = 64
NR = pl.dynamic("NR")


@pl.program
class Sums:
    @pl.function(type=pl.FunctionType.InCore)
    def publish(self, x: pl.Tensor[[1, COLS], pl.FP32], data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
                sig: pld.DistributedTensor[[NR, 1], pl.INT32]) -> None:
        data = pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], data)
        pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max)  # a kernel's collective

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_publish(self, x: pl.Tensor[[1, COLS], pl.FP32],
                     data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
                     sig: pld.DistributedTensor[[NR, 1], pl.INT32]) -> None:
        self.publish(x, data, sig)

    @pl.function(type=pl.FunctionType.InCore)
    def drain(self, data: pld.DistributedTensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> None:
        pl.store(pl.load(data, [0, 0], [1, COLS]), [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_drain(self, data: pld.DistributedTensor[[1, COLS], pl.FP32],
                   y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> None:
        self.drain(data, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> None:
        buf = pld.alloc_window_buffer(COLS * 4)
        sbuf = pld.alloc_window_buffer(pld.world_size() * 4)
        hbuf = pld.alloc_window_buffer(pld.world_size() * 4)
        data = pld.window(buf, [1, COLS], dtype=pl.FP32)
        for r in pl.range(pld.world_size()):
            self.chip_publish(x[r], data, pld.window(sbuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
        data = pld.tensor.allreduce(data, pld.window(hbuf, [pld.world_size()], dtype=pl.INT32),
                                    op=pld.ReduceOp.Sum)  # a HOST builtin
        for r2 in pl.range(pld.world_size()):
            self.chip_drain(data, y[r2], device=r2)


@pytest.mark.launcher
@pytest.mark.parametrize("persistent", [False, True])
def test_a_prepared_worker_runs_collectives(persistent: bool) -> None:
    compiled = ir.compile(Sums, distributed_config=DistributedConfig(device_ids=[0, 1]))
    rng = np.random.default_rng(5)
    with compiled.prepare(persistent=persistent) as rt:
        for _ in range(2):  # new data each dispatch
            x = rng.standard_normal((2, 1, COLS)).astype(np.float32)
            y = np.zeros_like(x)
            rt(x, y)
            want = 2 * np.maximum(x[0], x[1])
            np.testing.assert_array_equal(y, np.stack([want, want]))
