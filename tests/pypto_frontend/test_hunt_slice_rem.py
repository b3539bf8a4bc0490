"""A slice whose bounds repeat a device ``%`` / ``//`` (``t[p % B:p % B + 1]``, ``t[p // B:p // B + 1]``):
pypto's parser simplifies ``(p % B + 1) - p % B`` to the extent 1; pldemu computes each truncating operator
into a variable of its own, and folds the two through the expression each was bound to. Golden: numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
B, ROWS, COLS = 4, 12, 8


@pl.program
class RowAtRemainder:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], p: pl.Tensor[[1, 8], pl.INT32],
          y: pl.Out[pl.Tensor[[2, COLS], pl.FP32]]) -> None:
        pos = pl.read(p, [0, 0])
        y[0:1, :] = x[pos % B:pos % B + 1, :]
        y[1:2, :] = pl.mul(x[pos // B:pos // B + 1, :], 2.0)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], p: pl.Tensor[[NR, 1, 8], pl.INT32],
                  y: pl.Out[pl.Tensor[[NR, 2, COLS], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], p[r], y[r], device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    x = np.arange(n * ROWS * COLS, dtype=np.float32).reshape(n, ROWS, COLS)
    p = np.zeros((n, 1, 8), np.int32)
    p[:, 0, 0] = [7 + 3 * r for r in range(n)]
    return x, p, np.zeros((n, 2, COLS), np.float32)


def test_the_repeated_remainder_is_one_static_extent() -> None:
    translate(RowAtRemainder, 2, _args(2))  # was: a slice extent must be static: rem_1 + 1 - rem is not


@pytest.mark.launcher
def test_rows_at_the_remainder_and_quotient() -> None:
    x, p, y = _args(2)
    ir.compile(RowAtRemainder, distributed_config=DistributedConfig(device_ids=[0, 1]))(x, p, y)
    for r in range(2):
        pos = int(p[r, 0, 0])
        np.testing.assert_array_equal(y[r, 0], x[r, pos % B])
        np.testing.assert_array_equal(y[r, 1], x[r, pos // B] * 2)
