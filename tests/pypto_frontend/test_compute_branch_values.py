"""A name bound to a Python number in both branches of a run-time ``if`` is one value after it, the branch
taken's: pypto's parser binds ``kind = 1`` to a variable and its SSA conversion merges the branches' (a phi),
as pypto-lib's ``prefill_cp_swa.py`` picks an overlay source with ``source_kind = 1`` / ``0``."""

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


@pl.program
class TwoTypes:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[1, 8], pl.INT32], f: pl.Tensor[[1, 8], pl.FP32],
          y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> pl.Tensor[[1, 8], pl.FP32]:
        t = pl.load(f, [0, 0], [1, 8])
        if pl.read(a, [0, 0]) > 0:
            v = pl.read(a, [0, 1])
            u = pl.cast(v, pl.FP32)  # each branch reads its own v
        else:
            v = pl.read(t, [0, 1])
            u = v
        y = pl.store(pl.mul(t, pl.mul(u, pl.cast(v, pl.FP32))), [0, 0], y)  # MARK-two-types
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[1, 8], pl.INT32], f: pl.Tensor[[1, 8], pl.FP32],
                  y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> None:
        self.k(a, f, y)


def test_a_name_of_two_types_after_an_if_is_refused_where_it_is_read() -> None:
    a, f = np.zeros((1, 8), np.int32), np.zeros((1, 8), np.float32)
    with pytest.raises(FrontendError, match=re.escape("v is a int32 scalar after one branch of the if above and a "
                                                      "fp32 scalar after another")) as err:
        translate(TwoTypes, 1, (a, f, f.copy()))
    src, start = inspect.getsourcelines(sys.modules[__name__])
    assert (err.value.file, err.value.line) == (__file__, next(max(start, 1) + i for i, line in enumerate(src)
                                                                if "MARK-two-types" in line and "next(" not in line))
