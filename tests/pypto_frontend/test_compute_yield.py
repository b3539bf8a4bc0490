"""A yield hands over all its values at once, as pypto's ``pl.yield_`` does (its values are the loop's next
iter_args, computed from this iteration's): a value that reads a carried name sees the old value, though pldemu
assigns the carries one after another. Was: ``pl.yield_(b, a + b)`` added the new ``a``."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig


@pl.program
class Fib:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
        for _, (a, b) in pl.range(10, init_values=(0, 1)):
            a_out, _b_out = pl.yield_(b, a + b)  # both from the old a and b: pypto's yield hands over at once
        pl.write(z, [0, 0], pl.cast(a_out, pl.INT32))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
        self.k(z)


@pytest.mark.launcher
def test_a_yield_hands_over_all_its_values_at_once() -> None:
    z = np.zeros((1, 8), np.int32)
    ir.compile(Fib, distributed_config=DistributedConfig(device_ids=[0]))(z)
    assert z[0, 0] == 55  # fib(10); assigned one after another it would be 512 (a = b, then b = b + b)
