"""pypto's task-forming constructs translated into pldemu's task structure (no job), and pypto's rules on
what each may contain, as errors at the user's line (issue 40, stage 1)."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.ir import format_program, parse_program, verify
from pldemu.ir.nodes import Assign, For, LoopKind, Program, Task, TaskKind, TaskScope
from pldemu.ir.ops import Op
from pldemu.ir.walk import walk_calls, walk_stmts
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.language import distributed as pld

W = 8
NR = pl.dynamic("NR")


@pl.program
class Graph:
    """Every construct once: an InCore call with pl.no_dep, pl.at with deps / name_hint / early resolve,
    a manual scope, an SPMD grid (with and for forms), pl.parallel, a join and a TASK_ID seed."""

    @pl.function(type=pl.FunctionType.InCore)
    def fill(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]) -> pl.Tensor[[4, W], pl.FP32]:
        return pl.store(pl.load(src, [0, 0], [4, W]), [0, 0], dst)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]) -> pl.Tensor[[4, W], pl.FP32]:
        prev: pl.Scalar[pl.TASK_ID] = None
        dst = self.fill(pl.no_dep(src), dst)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="first", deps=[prev], allow_early_resolve=True) as first:
            row = pl.load(src, [0, 0], [1, W])
            dst = pl.store(row, [0, 0], dst)
        with pl.manual_scope():  # noqa: SIM117 - pypto's nesting
            with pl.spmd(4, deps=[first]) as grid:
                b = pl.tile.get_block_idx()
                dst = pl.store(pl.load(src, [b, 0], [1, W]), [b, 0], dst)
        for i in pl.spmd(2):
            dst = pl.store(pl.load(src, [i, 0], [1, W]), [i + 2, 0], dst)
        for j in pl.parallel(2):
            with pl.at(level=pl.Level.CORE_GROUP):
                dst = pl.store(pl.load(src, [j, 0], [1, W]), [j, 0], dst)
        pl.system.task_dummy(deps=[first, grid])
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


def _program(cls: object, nranks: int = 2) -> Program:
    x = np.zeros((nranks, 4, W), np.float32)
    built, _ = translate(cls, nranks, (x, np.zeros_like(x)))
    return built.program


def _tasks(program: Program) -> list[Task]:
    return [s for f in program.functions for s in walk_stmts(f.body.stmts) if isinstance(s, Task)]


def test_every_construct_becomes_a_task_and_the_text_form_round_trips() -> None:
    program = _program(Graph)
    tasks = _tasks(program)
    kinds = [t.kind for t in tasks]
    per_rank = [TaskKind.KERNEL, TaskKind.CORE_GROUP, TaskKind.SPMD, TaskKind.SPMD, TaskKind.CORE_GROUP,
                TaskKind.DUMMY]
    assert kinds == per_rank * 2
    kernel, first, grid, loop_grid, _, join = tasks[:6]
    assert kernel.name == "fill" and len(kernel.no_dep) == 1 and first.no_dep == ()
    assert first.name == "first" and first.early_resolve and first.deps == ()  # the None seed is no edge
    assert grid.deps == (first.tid,) and grid.block_var is not None and loop_grid.block_var is not None
    assert join.deps == (first.tid, grid.tid)
    stmts = list(walk_stmts(program.functions[0].body.stmts))
    assert any(isinstance(s, TaskScope) and s.manual for s in stmts)
    assert any(isinstance(s, For) and s.kind is LoopKind.PARALLEL for s in stmts)
    text = format_program(program)
    assert "task first = core_group \"first\"" in text and " early {" in text
    again = parse_program(text, "graph.pld")
    assert format_program(again) == text
    verify(again)


def test_get_block_idx_is_the_grid_block() -> None:
    grid = _tasks(_program(Graph))[2]
    (load,) = [c for c in walk_calls(grid.body.stmts) if c.op is Op.TILE_LOAD]
    index = load.args[1].items[0]
    assigned = {s.var: s.value for s in walk_stmts(grid.body.stmts) if isinstance(s, Assign)}
    assert grid.block_var in (index, assigned.get(index))


# -- pypto's rules, at the user's line ---------------------------------------------------------------


@pl.program
class NestedAt:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]) -> pl.Tensor[[4, W], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):  # noqa: SIM117 - pypto's nesting
            with pl.at(level=pl.Level.CORE_GROUP):  # the nested task
                dst = pl.store(pl.load(src, [0, 0], [1, W]), [0, 0], dst)
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


@pl.program
class WorkAfterDeferWait:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[4, W], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):
            pld.system.defer_wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            dst = pl.store(pl.load(src, [0, 0], [1, W]), [0, 0], dst)  # the payload after the deferred wait
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)


@pl.program
class DeferWaitEarly:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[4, W], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP, allow_early_resolve=True):  # the refused flag
            pld.system.defer_wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)


@pl.program
class ScopeInManual:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]) -> pl.Tensor[[4, W], pl.FP32]:
        with pl.manual_scope():  # noqa: SIM117 - pypto's nesting
            with pl.scope():  # the nested scope
                dst = pl.store(pl.load(src, [0, 0], [1, W]), [0, 0], dst)
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


@pl.program
class SpmdDepsWithoutAs:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, src: pl.Tensor[[4, W], pl.FP32], dst: pl.Out[pl.Tensor[[4, W], pl.FP32]]) -> pl.Tensor[[4, W], pl.FP32]:
        first = pl.system.task_dummy(deps=[])
        with pl.spmd(2, deps=[first]):  # deps= without `as`
            dst = pl.store(pl.load(src, [0, 0], [1, W]), [0, 0], dst)
        return dst

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, 4, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 4, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], device=r)


def _line(marker: str) -> int:
    with open(__file__) as f:
        return 1 + next(i for i, text in enumerate(f) if marker in text and "parametrize" not in text
                        and not text.lstrip().startswith("("))


@pytest.mark.parametrize(("cls", "marker", "words"), [
    (NestedAt, "# the nested task", "inside a task"),
    (WorkAfterDeferWait, "# the payload after", "after pld.system.defer_wait"),
    (DeferWaitEarly, "# the refused flag", "allow_early_resolve"),
    (ScopeInManual, "# the nested scope", "inside pl.manual_scope()"),
    (SpmdDepsWithoutAs, "# deps= without", "needs the `with pl.spmd(...) as tid:` form"),
])
def test_pyptos_rules_are_errors_at_the_users_line(cls: type, marker: str, words: str) -> None:
    with pytest.raises(FrontendError) as err:
        _program(cls)
    assert words in str(err.value)
    assert f"{__file__.rsplit('/', 1)[-1]}:{_line(marker)}" in str(err.value)


def test_a_tasks_line_is_its_constructs_not_a_body_line() -> None:
    # the task's origin is taken where the construct starts, not after its body moved the builder's origin
    tasks = _tasks(_program(Graph))[:6]
    markers = ["dst = self.fill(pl.no_dep(src), dst)", 'name_hint="first"', "with pl.spmd(4, deps=[first])",
               "for i in pl.spmd(2):", "with pl.at(level=pl.Level.CORE_GROUP):", "pl.system.task_dummy(deps="]
    assert [t.origin.line if t.origin else None for t in tasks] == [_line(m) for m in markers]
