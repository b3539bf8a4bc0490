"""``pl.cast`` of a run-time comparison (a BOOL device scalar) to an integer: 1 where it holds, else 0, usable in
scalar arithmetic (a product of match flags: is each row of ids a run of consecutive values from a
non-negative start?) and in an ``if``. Run on two ranks against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS, RUN = 4, 8


@pl.program
class Runs:
    """Row r of ``flags``: [the run flag (0 / 1), the flag of ``first >= 0`` alone, 7 when the run holds]."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, ids: pl.Tensor[[ROWS, RUN], pl.INT32], flags: pl.Out[pl.Tensor[[ROWS, RUN], pl.INT32]]) -> None:
        for r in pl.range(ROWS):
            first = pl.read(ids, [r, 0])
            starts = pl.cast(first >= 0, pl.INT32)
            matches = starts
            for d in pl.range(1, RUN):
                matches = matches * pl.cast(pl.read(ids, [r, d]) == first + d, pl.INT32)
            pl.write(flags, [r, 0], matches)
            pl.write(flags, [r, 1], starts)
            if matches == 1:
                pl.write(flags, [r, 2], 7)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, ids: pl.Tensor[[NR, ROWS, RUN], pl.INT32],
                  flags: pl.Out[pl.Tensor[[NR, ROWS, RUN], pl.INT32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(ids[r], flags[r], device=r)


@pytest.mark.launcher
def test_a_bool_scalar_cast_to_int32_is_one_or_zero() -> None:
    base = np.arange(RUN, dtype=np.int32)
    ids = np.stack([base + 3, base - 2, base[::-1], np.r_[base[:4], base[:4]]]).astype(np.int32)
    ids = np.stack([ids, ids + 1])
    flags = np.zeros_like(ids)
    ir.compile(Runs, distributed_config=DistributedConfig(device_ids=[0, 1]))(ids, flags)
    starts = (ids[:, :, 0] >= 0).astype(np.int32)
    runs = starts * np.all(ids == ids[:, :, :1] + base, axis=2)
    np.testing.assert_array_equal(flags[:, :, 0], runs)
    np.testing.assert_array_equal(flags[:, :, 1], starts)
    np.testing.assert_array_equal(flags[:, :, 2], 7 * runs)
