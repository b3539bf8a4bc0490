"""A name bound to a Python number in both branches of a run-time ``if`` is one value after it, the branch
taken's: pypto's parser binds ``kind = 1`` to a variable and its SSA conversion merges the branches' (a phi),
as pypto-lib's ``prefill_cp_swa.py`` picks an overlay source with ``source_kind = 1`` / ``0``."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
N = 6
C = 16


@pl.program
class BranchValues:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, sel: pl.Tensor[[N], pl.INT32], x: pl.Tensor[[3, C], pl.FP32],
          y: pl.Out[pl.Tensor[[N, C], pl.FP32]], z: pl.Out[pl.Tensor[[N, C], pl.FP32]],
          w: pl.Out[pl.Tensor[[N], pl.INT32]]) -> None:
        for i in pl.range(N):
            s = pl.read(sel, [i])
            if s > 0:
                kind = 2
            elif s == 0:
                kind = 1
            else:
                kind = 0
            y = pl.assemble(y, pl.load(x, [kind, 0], [1, C]), [i, 0])
            other = pl.full([1, C], dtype=pl.FP32, value=-1.0)
            if kind == 2:
                other = pl.load(x, [0, 0], [1, C])
            z = pl.assemble(z, other, [i, 0])
            if s > 0:  # noqa: SIM108 - a run-time branch, as pypto-lib writes it
                m = s
            else:
                m = 0
            pl.write(w, [i], m)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, sel: pl.Tensor[[NR, N], pl.INT32], x: pl.Tensor[[NR, 3, C], pl.FP32],
             y: pl.Out[pl.Tensor[[NR, N, C], pl.FP32]], z: pl.Out[pl.Tensor[[NR, N, C], pl.FP32]],
             w: pl.Out[pl.Tensor[[NR, N], pl.INT32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(sel[r], x[r], y[r], z[r], w[r], device=r)


@pytest.mark.launcher
def test_a_number_bound_in_each_branch_is_the_taken_branchs_after_the_if() -> None:
    sel = np.array([[3, 0, -2, 0, 7, -1]], dtype=np.int32)
    x = np.arange(3 * C, dtype=np.float32).reshape(1, 3, C)
    y = np.zeros((1, N, C), np.float32)
    z = np.zeros((1, N, C), np.float32)
    w = np.full((1, N), -9, np.int32)
    ir.compile(BranchValues, distributed_config=DistributedConfig(device_ids=[0]))(sel, x, y, z, w)
    kind = np.where(sel[0] > 0, 2, np.where(sel[0] == 0, 1, 0))
    np.testing.assert_array_equal(y[0], x[0][kind])
    np.testing.assert_array_equal(z[0], np.where((kind == 2)[:, None], x[0, 0][None, :], np.float32(-1.0)))
    np.testing.assert_array_equal(w[0], np.maximum(sel[0], 0))  # an INT32 read in one branch, a literal in the other
