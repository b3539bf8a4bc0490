"""A prepared worker's dispatch takes a host tensor only in shared memory (pypto's DistributedWorker refuses
any other), but a scalar parameter's value as it is: pypto forwards a ``pl.Scalar`` argument (pypto-lib's
runner passes a 0-dim torch tensor, never shared) without the check."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

ROWS, COLS = 8, 16


class Unshared(np.ndarray):
    """A host tensor in private memory, as torch's before ``share_memory_()``."""

    def is_shared(self) -> bool:
        return False


def unshared(a: np.ndarray) -> Any:
    return a.view(Unshared)


@pl.program
class AddScalar:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Scalar[pl.INT32],
          y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        pl.store(pl.add(pl.load(x, [0, 0], [ROWS, COLS]), pl.cast(n, pl.FP32)), [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Scalar[pl.INT32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.k(x, n, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], n: pl.Scalar[pl.INT32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
        self.chip(x, n, y)


@pytest.mark.launcher
def test_a_scalar_argument_needs_no_shared_memory() -> None:
    compiled = ir.compile(AddScalar, distributed_config=DistributedConfig(device_ids=[0]))
    x, y = np.ones((ROWS, COLS), np.float32), np.zeros((ROWS, COLS), np.float32)
    with compiled.prepare() as rt:
        rt(x, unshared(np.array(3, np.int32)), y)
        np.testing.assert_array_equal(y, np.full((ROWS, COLS), 4.0, np.float32))
        with pytest.raises(TypeError, match=r"Parameter 'x': a host torch\.Tensor passed to a DistributedWorker"):
            rt(unshared(x), np.array(3, np.int32), y)
