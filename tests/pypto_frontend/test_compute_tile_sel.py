"""pypto's tile-level comparison and selection: ``pl.tile.cmp`` (tile rhs) and ``pl.tile.cmps`` (scalar rhs) give
the packed predicate mask, ``pl.tile.sel(mask, lhs, rhs, tmp)`` picks per element (pypto ``tile_ops.py`` cmp /
cmps / sel); each spelling takes only its own kind of rhs, as pypto's does. Against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

R, C = 8, 32


@pl.program
class Select:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], z: pl.Tensor[[R, C], pl.FP32],
          y: pl.Out[pl.Tensor[[R, C], pl.FP32]], w: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        a = pl.load(x, [0, 0], [R, C])
        b = pl.load(z, [0, 0], [R, C])
        tmp = pl.tile.create([1, 32], dtype=pl.UINT8)
        positive = pl.tile.cmps(a, 0.0, cmp_type=4)          # a > 0
        y = pl.store(pl.tile.sel(positive, a, pl.neg(a), tmp), [0, 0], y)   # |a|
        below = pl.tile.cmp(a, b, cmp_type=3)                 # a <= b
        w = pl.store(pl.tile.sel(below, b, a, tmp), [0, 0], w)              # max(a, b)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[1, R, C], pl.FP32], z: pl.Tensor[[1, R, C], pl.FP32],
                  y: pl.Out[pl.Tensor[[1, R, C], pl.FP32]], w: pl.Out[pl.Tensor[[1, R, C], pl.FP32]]) -> None:
        self.k(x[0], z[0], y[0], w[0], device=0)


@pytest.mark.launcher
def test_cmp_cmps_and_sel_of_tiles() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 6, (1, R, C)).astype(np.float32)
    z = rng.integers(-5, 6, (1, R, C)).astype(np.float32)
    y, w = np.zeros_like(x), np.zeros_like(x)
    ir.compile(Select, distributed_config=DistributedConfig(device_ids=[0]))(x, z, y, w)
    np.testing.assert_array_equal(y, np.abs(x))
    np.testing.assert_array_equal(w, np.where(x <= z, z, x))


def test_each_tile_spelling_takes_its_own_rhs() -> None:
    @pl.program
    class Wrong:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            a = pl.load(x, [0, 0], [R, C])
            m = pl.tile.cmp(a, 0.0, cmp_type=4)  # MARK
            y = pl.store(pl.tile.sel(m, a, a, pl.tile.create([1, 32], dtype=pl.UINT8)), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[1, R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, R, C], pl.FP32]]) -> None:
            self.k(x[0], y[0], device=0)

    x = np.zeros((1, R, C), np.float32)
    with pytest.raises(FrontendError, match=r"pypto refuses it: pl\.tile\.cmp: rhs must be a tile"):
        ir.compile(Wrong, distributed_config=DistributedConfig(device_ids=[0]))(x, np.zeros_like(x))
