"""pypto's ``pl.tensor.*`` spellings of the reductions (``row_sum`` / ``row_max`` / ``row_min`` / ``col_sum`` /
``col_max`` / ``col_min``, no scratch argument: pypto's conversion synthesises it), the tensor-scalar ops
(``adds`` / ``subs`` / ``muls``) and ``concat``, on tensors in a kernel, run to numpy goldens (they were
refused as unknown names while their unified spellings ran)."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
R, C = 8, 16


@pl.program
class TensorSpellings:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], rows: pl.Out[pl.Tensor[[3, R], pl.FP32]],
          cols: pl.Out[pl.Tensor[[3, C], pl.FP32]], ew: pl.Out[pl.Tensor[[R, 4 * C], pl.FP32]]) -> None:
        rows[0:1, :] = pl.reshape(pl.tensor.row_sum(x), [1, R])
        rows[1:2, :] = pl.reshape(pl.tensor.row_max(x), [1, R])
        rows[2:3, :] = pl.reshape(pl.tensor.row_min(x), [1, R])
        cols[0:1, :] = pl.tensor.col_sum(x)
        cols[1:2, :] = pl.tensor.col_max(x)
        cols[2:3, :] = pl.tensor.col_min(x)
        ew[:, 0:2 * C] = pl.tensor.concat(pl.tensor.adds(x, 1.5), pl.tensor.subs(x, 0.25))
        ew[:, 2 * C:4 * C] = pl.tensor.concat(pl.tensor.muls(x, -2.0), x)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, R, C], pl.FP32], rows: pl.Out[pl.Tensor[[NR, 3, R], pl.FP32]],
                  cols: pl.Out[pl.Tensor[[NR, 3, C], pl.FP32]], ew: pl.Out[pl.Tensor[[NR, R, 4 * C], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], rows[r], cols[r], ew[r], device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    x = np.random.default_rng(19).standard_normal((n, R, C)).astype(np.float32)
    return x, np.zeros((n, 3, R), np.float32), np.zeros((n, 3, C), np.float32), np.zeros((n, R, 4 * C), np.float32)


def test_the_tensor_spellings_translate() -> None:
    translate(TensorSpellings, 2, _args(2))  # was: pl.tensor.row_sum is not supported by pldemu's pypto layer


@pytest.mark.launcher
def test_the_tensor_spellings_compute() -> None:
    x, rows, cols, ew = _args(2)
    ir.compile(TensorSpellings, distributed_config=DistributedConfig(device_ids=[0, 1]))(x, rows, cols, ew)
    for r in range(2):
        a = x[r]
        np.testing.assert_allclose(rows[r], np.stack([a.sum(1), a.max(1), a.min(1)]), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(cols[r], np.stack([a.sum(0), a.max(0), a.min(0)]), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(ew[r], np.concatenate([a + np.float32(1.5), a - np.float32(0.25),
                                                             a * np.float32(-2.0), a], axis=1))
