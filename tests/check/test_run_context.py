"""The run context performs the host-side hooks of the schedule and the race detector in order, and the
shared block loop stops where ``Hooks.stop_after`` says (one process, fake checkers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from mpi4py import MPI

from pldemu.harness.blocks import QUIET, BlockFigures, Hooks, RunContext, block_size, run_blocks, silent
from pldemu.harness.common import CheckError, Failure
from pldemu.runtime.options import RuntimeOptions


class _Schedule:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def host_access(self) -> None:
        self.calls.append("schedule.host_access")

    def host_sync(self) -> None:
        self.calls.append("schedule.host_sync")


class _Races:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def host_access(self, name: str, write: bool, where: str) -> None:
        self.calls.append(f"races.host_access {name} {'write' if write else 'read'} {where}")

    def join(self) -> None:
        self.calls.append("races.join")

    def check(self, comm: Any = None) -> list[Any]:
        self.calls.append("races.check")
        return []

    def notes(self) -> list[str]:
        return []  # the block loop prints the run's notes at its end (fenced mode)


class _Instance:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.schedule = _Schedule(self.calls)
        self.races = _Races(self.calls)
        self.invariants = None
        self.backend = "fake"
        self.buffers = {"a": np.zeros(4), "b": np.zeros(4)}

    def local(self, name: str) -> np.ndarray:
        self.calls.append(f"local {name}")
        return self.buffers[name]

    def run(self) -> None:
        self.calls.append("run")


@dataclass
class _Log:
    first_error: str | None = None
    failure: Failure | None = None
    kinds: dict[str, Failure] = field(default_factory=dict)


def _ctx(hooks: Hooks = QUIET) -> tuple[RunContext, _Instance]:
    inst = _Instance()
    return RunContext(MPI.COMM_SELF, inst, RuntimeOptions(), _Log(), hooks), inst  # type: ignore[arg-type]


def test_writes_land_deferred_writes_first_and_are_recorded_after() -> None:
    ctx, inst = _ctx()
    ctx.write_own({"a": np.arange(4.0)})
    assert inst.calls == ["schedule.host_access", "local a", "races.host_access a write inputs"]
    assert inst.buffers["a"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_reads_are_copies_taken_after_the_own_writes_landed() -> None:
    ctx, inst = _ctx()
    (copy,) = ctx.read_own(["b"])
    copy[0] = 5.0
    assert inst.buffers["b"][0] == 0.0
    assert inst.calls == ["schedule.host_access", "local b", "races.host_access b read consume"]


def test_a_fence_lands_everything_then_meets_then_joins_the_clocks() -> None:
    ctx, inst = _ctx()
    ctx.fence("a fence")
    assert inst.calls == ["schedule.host_sync", "races.join"]
    ctx.block_barrier("a block end")
    assert inst.calls[2:] == ["schedule.host_sync"]  # the checkpoint joins the clocks at a block end


class _Harness:
    def __init__(self) -> None:
        self.ends: list[int] = []

    def call(self, ctx: RunContext, it: int) -> float:
        return ctx.run_call(it)

    def block_end(self, ctx: RunContext, last: int) -> list[int]:
        self.ends.append(last)
        return [1 if last >= 3 else 0]

    def row(self, f: BlockFigures) -> Any:
        @dataclass(frozen=True)
        class Row:
            iters: int
            bad: int

            @property
            def ok(self) -> bool:
                return self.bad == 0

            def format(self) -> str:
                return f"{self.iters} {self.bad}"

        return Row(f.iters, f.totals[0])


def test_the_block_loop_runs_blocks_and_stops_where_the_hook_says() -> None:
    seen: list[int] = []
    lines: list[str] = []
    ctx, inst = _ctx(Hooks(emit=lines.append, report=None, before_run=seen.append,
                           stop_after=lambda row: not row.ok))
    harness = _Harness()
    run = run_blocks(ctx, 10, 2, harness)
    assert seen == [0, 1, 2, 3] and harness.ends == [1, 3]
    assert run.stopped and [r.iters for r in run.rows] == [2, 4] and lines == ["2 0", "4 1"]
    assert inst.calls.count("run") == 4 and inst.calls.count("races.check") == 2


def test_the_loop_runs_to_the_end_without_a_stop_hook() -> None:
    ctx, _ = _ctx(Hooks(emit=silent, report=None))
    run = run_blocks(ctx, 5, 2, _Harness())
    assert not run.stopped and [r.iters for r in run.rows] == [2, 4, 5]


@pytest.mark.parametrize("iters, block", [(0, None), (3, 0)])
def test_counts_below_one_are_refused(iters: int, block: int | None) -> None:
    with pytest.raises(CheckError):
        block_size(iters, block)
