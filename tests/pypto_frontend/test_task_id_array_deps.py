"""A whole ``pl.array`` of TASK_IDs as a ``deps=`` entry (pypto's parser: an ``Array[N, TASK_ID]`` entry
contributes one edge per slot, an invalid slot none; its codegen fills a TASK_ID array with the invalid id
where it is made), and a loop carrying such an array whose body yields a fresh one (pypto's arrays are
values: the next iteration sees the yielded slots). A phase fence in a manual scope: each phase's tasks
wait for all of the previous phase's, the last task for all of the last phase's."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.ir.nodes import Task
from pldemu.ir.walk import walk_stmts
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

B, W, PHASES = 2, 8, 3


@pl.program
class PhaseFence:
    @pl.function(type=pl.FunctionType.InCore)
    def bump(self, row: pl.Scalar[pl.INDEX], out: pl.InOut[pl.Tensor[[B, W], pl.FP32]]
             ) -> pl.Tensor[[B, W], pl.FP32]:
        return pl.store(pl.add(pl.load(out, [row, 0], [1, W]), 1.0), [row, 0], out)

    @pl.function(type=pl.FunctionType.InCore)
    def double(self, out: pl.InOut[pl.Tensor[[B, W], pl.FP32]]) -> pl.Tensor[[B, W], pl.FP32]:
        t = pl.load(out, [0, 0], [B, W])
        return pl.store(pl.add(t, t), [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, out: pl.InOut[pl.Tensor[[B, W], pl.FP32]]) -> pl.Tensor[[B, W], pl.FP32]:
        with pl.manual_scope():
            tids = pl.array.create(B, pl.TASK_ID)
            for _phase, (tids_phase,) in pl.range(PHASES, init_values=(tids,)):
                tids_next = pl.array.create(B, pl.TASK_ID)
                for b in pl.range(B):
                    out, tid = pl.submit(self.bump, b, out, deps=[tids_phase])
                    tids_next[b] = tid
                tids = pl.yield_(tids_next)
            out, _ = pl.submit(self.double, out, deps=[tids])
        return out

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, out: pl.InOut[pl.Tensor[[B, W], pl.FP32]]) -> None:
        self.orch(out, device=0)


def test_a_whole_array_is_one_dep_per_slot() -> None:
    built, _ = translate(PhaseFence, 1, (np.zeros((B, W), np.float32),))
    tasks = [s for f in built.program.functions for s in walk_stmts(f.body.stmts) if isinstance(s, Task)]
    assert [len(t.deps) for t in tasks] == [B, B]  # the bump (its phase's array), the double (the last one)


@pytest.mark.launcher
def test_the_phase_fence_runs_each_phase_after_the_last() -> None:
    out = np.zeros((B, W), np.float32)
    ir.compile(PhaseFence, distributed_config=DistributedConfig(device_ids=[0]))(out)
    np.testing.assert_array_equal(out, np.full((B, W), 2.0 * PHASES, np.float32))
