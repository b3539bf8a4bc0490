"""``pl.no_dep(t)`` in ``pl.submit`` / ``pl.spmd_submit``'s kernel arguments: pypto strips the marker at every
kernel call site, submits included (ast_parser.py, ``_parse_kernel_call`` -> ``_strip_call_arg_markers`` ->
``arg_direction_overrides``), so ``t`` is a NoDep argument of that task: the runtime derives no edge from it.
pldemu gives that task the tensor as its ``no_dep`` (and no later task inherits it)."""

from __future__ import annotations

import numpy as np

from pldemu.ir.nodes import Task
from pldemu.ir.walk import walk_stmts
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl

W = 8


@pl.program
class Marked:
    @pl.function(type=pl.FunctionType.InCore)
    def fill(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]
             ) -> pl.Tensor[[4, W], pl.FP32]:
        return pl.store(pl.load(src, [0, 0], [4, W]), [0, 0], dst)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]
             ) -> pl.Tensor[[4, W], pl.FP32]:
        dst, _grid = pl.spmd_submit(self.fill, pl.no_dep(src), dst, core_num=2)
        dst, _one = pl.submit(self.fill, pl.no_dep(src), dst)
        dst, _plain = pl.submit(self.fill, src, dst)
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[4, W], pl.FP32], y: pl.Out[pl.Tensor[[4, W], pl.FP32]]):
        self.orch(x, y, device=0)


def test_a_submits_no_dep_argument_is_that_tasks_and_only_its() -> None:
    x = np.zeros((4, W), np.float32)
    built, _ = translate(Marked, 1, (x, np.zeros_like(x)))
    tasks = [s for f in built.program.functions for s in walk_stmts(f.body.stmts) if isinstance(s, Task)]
    assert [[v.name for v in t.no_dep] for t in tasks] == [["x"], ["x"], []]
