"""HOST-level ``with pl.at(level=pl.Level.CHIP):`` scopes, outlined as pypto's OutlineHierarchyScopes does
(``pldemu.pypto.translate.outline``): each scope becomes a chip Orchestration of its free variables, dispatched
without ``device=`` (round-robin over the chips); a ``return self.orch(...)`` at HOST level dispatches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.execute import run, translate
from pldemu.pypto.surface import language as pl
from pldemu.pypto.translate.outline import outline_host_scopes

R, C = 8, 16


@pl.program
class TwoScopes:
    @pl.function(type=pl.FunctionType.InCore)
    def add(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
            f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [R, C]), pl.load(b, [0, 0], [R, C])), [0, 0], f)

    @pl.function(type=pl.FunctionType.InCore)
    def sub(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
            f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.store(pl.sub(pl.load(a, [0, 0], [R, C]), pl.load(b, [0, 0], [R, C])), [0, 0], f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
             s: pl.Out[pl.Tensor[[R, C], pl.FP32]], d: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            total = self.add(a, b, s)
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            self.sub(a, b, d)
        return total


@pl.program
class ReturnsDispatch:
    @pl.function(type=pl.FunctionType.InCore)
    def add(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
            f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [R, C]), pl.load(b, [0, 0], [R, C])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
             f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return self.add(a, b, f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.FP32],
             f: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        return self.chip(a, b, f)


def _args(n: int) -> list[np.ndarray]:
    return [np.full((R, C), 2.0, np.float32), np.full((R, C), 3.0, np.float32)] + [np.zeros((R, C), np.float32)] * n


def test_each_scope_is_an_orchestration_of_its_free_variables() -> None:
    prog = outline_host_scopes(TwoScopes)
    outlined = sorted(n for n in prog.functions if n.startswith("_at_"))
    assert len(outlined) == 2
    assert [prog.functions[n].params for n in outlined] == [("a", "b", "s"), ("a", "b", "d")]
    assert outline_host_scopes(ReturnsDispatch) is ReturnsDispatch  # nothing to outline


def test_scopes_go_round_robin_over_the_chips() -> None:
    built, _ = translate(TwoScopes, 2, [*_args(1), np.zeros((R, C), np.float32)])
    assert len(built.sources[0]) and len(built.sources[1])  # one scope's tensors on each chip
    assert {p for p, _ in built.sources[0].values()} == {"a", "b", "s"}
    assert {p for p, _ in built.sources[1].values()} == {"a", "b", "d"}


@pytest.mark.launcher
def test_the_scopes_compute_on_their_chips(tmp_path: Path) -> None:
    a, b, s, d = _args(2)
    d = np.zeros_like(s)
    run(TwoScopes, 2, (a, b, s, d), tmp_path)
    assert (s == 5.0).all() and (d == -1.0).all()


@pytest.mark.launcher
def test_returning_a_dispatch_dispatches(tmp_path: Path) -> None:
    a, b, f = _args(1)
    run(ReturnsDispatch, 1, (a, b, f), tmp_path)
    assert (f == 5.0).all()
