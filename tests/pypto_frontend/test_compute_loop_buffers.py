"""A buffer made where it runs more than once at a time is made again each time, as pypto allocates it: an
Orchestration ``pl.create_tensor`` of static shape inside a ``pl.parallel`` loop (pypto's orchestration
allocates it at every iteration, and an iteration's tasks may still read their scratch while the next
iteration's tasks write theirs: pypto-lib's routed expert, ``gate_tile_i32`` / ``h_tile_fp32``), and a
``pl.array`` made in a ``pl.spmd`` body (each block's core has its own: pypto-lib dspark moe's ``slot_ctr``).
One buffer per create site shared by the iterations or blocks computed wrong results in concurrent
schedules (pypto-lib ``mtp/moe.py``'s ``x_next`` 71 % off) and a race report where there is none.
Our own program, in pypto-lib's pattern, against numpy, in several schedules with the race detector on."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.execute import translate
from pldemu.pypto.session import FrontendOptions, use_options
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

ROWS, COLS, MT, BLOCKS, SLOTS = 64, 16, 8, 4, 4


@pl.program
class PerIteration:
    """Per row tile: a scratch staged by one task (x * 2) and read by the next (+ 1 into y), the tiles'
    tasks unordered with each other; then each block of a fan counts into its own array and writes it out."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             counts: pl.Out[pl.Tensor[[BLOCKS, SLOTS], pl.INT32]]) -> None:
        for i in pl.parallel(ROWS // MT):
            r0 = i * MT
            scratch = pl.create_tensor([MT, COLS], dtype=pl.FP32)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="stage"):
                scratch[0:MT, 0:COLS] = pl.mul(x[r0:r0 + MT, 0:COLS], 2.0)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="use"):
                y[r0:r0 + MT, 0:COLS] = pl.add(scratch[0:MT, 0:COLS], 1.0)
        for b in pl.spmd(BLOCKS, name_hint="count"):
            slots = pl.array.create(SLOTS, pl.INT32)
            for s in pl.range(SLOTS):
                slots[s] = 0
            for s in pl.range(SLOTS):
                slots[s] = slots[s] + b * 10 + s
            for s in pl.range(SLOTS):
                pl.write(counts, [b, s], slots[s])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[1, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, ROWS, COLS], pl.FP32]],
                  counts: pl.Out[pl.Tensor[[1, BLOCKS, SLOTS], pl.INT32]]) -> None:
        self.orch(x[0], y[0], counts[0], device=0)


def _args() -> tuple[np.ndarray, ...]:
    x = np.random.default_rng(5).integers(-8, 9, (1, ROWS, COLS)).astype(np.float32)
    return x, np.zeros((1, ROWS, COLS), np.float32), np.zeros((1, BLOCKS, SLOTS), np.int32)


def test_the_loops_scratch_and_the_blocks_array_are_made_where_they_run() -> None:
    built, _ = translate(PerIteration, 1, _args())
    creates = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TENSOR_CREATE]
    assert len(creates) == 2  # the scratch in the loop, the array in the block body
    assert not [b for b in built.program.buffers if b.var.name.startswith(("scratch", "slots"))]


@pytest.mark.launcher
@pytest.mark.parametrize("flags", [{}, {"task_order": "fifo"}, {"seed": 3}, {"jitter_us": 50.0}],
                         ids=["random", "fifo", "seed3", "jitter"])
def test_every_iteration_and_block_computes_with_its_own_buffer(flags: dict[str, object]) -> None:
    x, y, counts = _args()
    with use_options(FrontendOptions.from_flags(flags)):
        ir.compile(PerIteration, distributed_config=DistributedConfig(device_ids=[0]))(x, y, counts)
    np.testing.assert_array_equal(y, x * 2 + 1)
    want = np.array([[b * 10 + s for s in range(SLOTS)] for b in range(BLOCKS)], np.int32)
    np.testing.assert_array_equal(counts[0], want)
