"""pypto's ``pl.row_argmax`` / ``pl.row_argmin`` (unified, ``pl.tensor.*`` and ``pl.tile.*(tile, tmp_tile)``:
``tile.row_argmax`` / ``tile.row_argmin``, INT32 column indices of the first extreme of each row's valid part),
as a greedy sampler uses them (pypto-lib's dspark ``pl.read(pl.row_argmax(x), [0, 0])``); they were refused as
unknown names. Golden: numpy's argmax / argmin (first index on ties)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pldemu.ir.dtypes import DType
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
R, C = 8, 32


@pl.program
class Greedy:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[3, R], pl.INT32]],
          best: pl.Out[pl.Tensor[[1, C], pl.FP32]]) -> None:
        vc = pl.read(n, [0, 0])
        y[0:1, :] = pl.reshape(pl.row_argmax(x), [1, R])
        y[1:2, :] = pl.reshape(pl.tensor.row_argmin(pl.slice(x, [R, C], [0, 0], valid_shape=[R, vc])), [1, R])
        t = pl.load(x, [0, 0], [R, C])
        y[2:3, :] = pl.reshape(pl.tile.row_argmax(pl.neg(t), pl.create_tile([R, C], pl.FP32)), [1, R])
        # the row holding the largest of the first 8 columns, chosen on the device
        col0 = pl.reshape(pl.slice(x, [R, 8], [0, 0]), [1, 8 * R])
        pick = pl.read(pl.row_argmax(col0), [0, 0]) // 8
        best[0:1, :] = x[pick:pick + 1, :]

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, R, C], pl.FP32], n: pl.Tensor[[NR, 1, 8], pl.INT32],
                  y: pl.Out[pl.Tensor[[NR, 3, R], pl.INT32]], best: pl.Out[pl.Tensor[[NR, 1, C], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], n[r], y[r], best[r], device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    x = np.random.default_rng(20).standard_normal((n, R, C)).astype(np.float32)
    x[:, 3, 5] = x[:, 3, 9] = 100.0  # a tie: the first index wins
    counts = np.zeros((n, 1, 8), np.int32)
    counts[:, 0, 0] = [20 + 3 * r for r in range(n)]
    return x, counts, np.zeros((n, 3, R), np.int32), np.zeros((n, 1, C), np.float32)


def test_argmax_translates_to_the_tile_op() -> None:
    built, _ = translate(Greedy, 1, _args(1))
    calls = [c for f in built.program.functions for c in function_calls(f)
             if c.op in (Op.TILE_ROW_ARGMAX, Op.TILE_ROW_ARGMIN)]
    assert [c.op for c in calls] == [Op.TILE_ROW_ARGMAX, Op.TILE_ROW_ARGMIN, Op.TILE_ROW_ARGMAX, Op.TILE_ROW_ARGMAX]
    assert all(c.type.dtype is DType.INT32 and c.type.shape[-1] == 1 for c in calls)


@pl.program
class WideScratch:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, R], pl.INT32]]) -> None:
        t = pl.load(x, [0, 0], [R, C])
        y[0:1, :] = pl.reshape(pl.tile.row_argmax(t, pl.create_tile([R, 2 * C], pl.FP32)), [1, R])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, R], pl.INT32]]) -> None:
        self.k(x, y)


def test_the_scratch_must_match_exactly() -> None:
    """pypto's deducer: the arg reductions' tmp_tile has exactly the input's shape."""
    with pytest.raises(FrontendError, match=re.escape("a fp32 tile exactly [8, 32]")):
        translate(WideScratch, 1, (np.zeros((R, C), np.float32), np.zeros((1, R), np.int32)))


@pytest.mark.launcher
def test_row_arg_reductions_compute() -> None:
    x, counts, y, best = _args(2)
    ir.compile(Greedy, distributed_config=DistributedConfig(device_ids=[0, 1]))(x, counts, y, best)
    for r in range(2):
        vc = int(counts[r, 0, 0])
        np.testing.assert_array_equal(y[r], np.stack([x[r].argmax(1), x[r, :, :vc].argmin(1), (-x[r]).argmax(1)]))
        np.testing.assert_array_equal(best[r, 0], x[r, np.argmax(x[r, :, :8]) // 8])
