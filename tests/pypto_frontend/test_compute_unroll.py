"""``pl.unroll`` takes ``range``'s bounds (stop | start, stop[, step]), as pypto's parser reads them: pypto-lib's
sparse-attention merge folds blocks 1.. into block 0 with ``for m_sb in pl.unroll(1, PREFILL_ATTN_BLOCKS)``
(read as ``pl.unroll(1)``, block 0 was merged with itself and the later blocks never)."""

from __future__ import annotations

import inspect
import re
import sys

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
R = 6
C = 16
FIRST = 1


@pl.program
class UnrollBounds:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[3, C], pl.FP32]]) -> None:
        # Horner sums (a * 2 + row): the value says which rows were visited and in which order.
        a = pl.load(x, [0, 0], [1, C])
        for i in pl.unroll(FIRST, 4):
            a = pl.add(pl.mul(a, 2.0), pl.load(x, [i, 0], [1, C]))
        y = pl.assemble(y, a, [0, 0])
        b = pl.full([1, C], dtype=pl.FP32, value=0.0)
        for i in pl.unroll(0, R, 2):
            b = pl.add(pl.mul(b, 2.0), pl.load(x, [i, 0], [1, C]))
        y = pl.assemble(y, b, [1, 0])
        c = pl.full([1, C], dtype=pl.FP32, value=0.0)
        for i in pl.unroll(R - 1, 0, -2):
            c = pl.add(pl.mul(c, 2.0), pl.load(x, [i, 0], [1, C]))
        y = pl.assemble(y, c, [2, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[NR, R, C], pl.FP32], y: pl.Out[pl.Tensor[[NR, 3, C], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], y[r], device=r)


def _horner(rows: np.ndarray) -> np.ndarray:
    out = np.zeros(rows.shape[1], np.float32)
    for row in rows:
        out = out * np.float32(2.0) + row
    return out


@pytest.mark.launcher
def test_unroll_takes_start_stop_and_step_as_range_does() -> None:
    x = np.random.default_rng(7).standard_normal((1, R, C)).astype(np.float32)
    y = np.zeros((1, 3, C), np.float32)
    ir.compile(UnrollBounds, distributed_config=DistributedConfig(device_ids=[0]))(x, y)
    np.testing.assert_allclose(y[0, 0], _horner(x[0, [0, 1, 2, 3]]), rtol=1e-6)
    np.testing.assert_allclose(y[0, 1], _horner(x[0, [0, 2, 4]]), rtol=1e-6)
    np.testing.assert_allclose(y[0, 2], _horner(x[0, [5, 3, 1]]), rtol=1e-6)


@pl.program
class UnrollZeroStep:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, C], pl.FP32]]) -> None:
        a = pl.full([1, C], dtype=pl.FP32, value=0.0)
        for i in pl.unroll(0, R, 0):  # MARK-zero-step
            a = pl.add(a, pl.load(x, [i, 0], [1, C]))
        y = pl.assemble(y, a, [0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, C], pl.FP32]]) -> None:
        self.k(x, y)


def test_unroll_with_a_zero_step_is_refused_at_its_line() -> None:
    x, y = np.zeros((R, C), np.float32), np.zeros((1, C), np.float32)
    with pytest.raises(FrontendError, match=re.escape("the step cannot be zero")) as err:
        translate(UnrollZeroStep, 1, (x, y))
    src, start = inspect.getsourcelines(sys.modules[__name__])
    assert (err.value.file, err.value.line) == (__file__, next(max(start, 1) + i for i, line in enumerate(src)
                                                                if "MARK-zero-step" in line and "next(" not in line))
