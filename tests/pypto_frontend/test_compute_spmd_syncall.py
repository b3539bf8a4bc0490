"""``pl.system.syncall`` at the top level of a ``pl.spmd`` body (``sync_start=True``): the barrier of the task's
blocks, as pypto-lib's fused hc_pre uses it (``DSV4_HC_PRE_IMPL=syncall``: one spmd of 24 blocks, 2 barriers).
pldemu runs each phase as an SPMD task of the same blocks after the previous phase's, so a block reads what
every block wrote before the barrier, in every schedule and with the race detector on; a name bound from the
block index by a plain assignment is carried into the later phases, a tensor a phase assembles into stays
itself, any other crossing name is refused where it is read. Our own program, against numpy; pypto-lib's
hc_pre.py of all three models passes its goldens with ``DSV4_HC_PRE_IMPL=syncall`` this way."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.session import FrontendOptions, use_options
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

B, R, C = 4, 8, 16


@pl.program
class Phased:
    """Phase 1: each block doubles its rows into a scratch; barrier; phase 2: each block adds the next block's
    doubled rows to its own; barrier; phase 3: block 0 copies the first rows again (a third phase)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[B * R, C], pl.FP32], y: pl.Out[pl.Tensor[[B * R, C], pl.FP32]],
             z: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
        partial = pl.create_tensor([B * R, C], dtype=pl.FP32)
        with pl.spmd(B, name_hint="fused", sync_start=True) as fused:
            core = pl.tile.get_block_idx()
            r0 = core * R
            partial = pl.assemble(partial, pl.mul(x[r0:r0 + R, 0:C], 2.0), [r0, 0])  # the tensor itself after
            pl.system.syncall(core_type="mix")
            n0 = ((core + 1) % B) * R
            y[r0:r0 + R, 0:C] = pl.add(partial[n0:n0 + R, 0:C], partial[r0:r0 + R, 0:C])
            pl.system.syncall(core_type="mix")
            if core == 0:
                z[0:R, 0:C] = pl.add(y[R:2 * R, 0:C], 0.0)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="after", deps=[fused]):
            z[0:1, 0:C] = pl.add(z[0:1, 0:C], 1.0)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[1, B * R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, B * R, C], pl.FP32]],
                  z: pl.Out[pl.Tensor[[1, R, C], pl.FP32]]) -> None:
        self.orch(x[0], y[0], z[0], device=0)


@pytest.mark.launcher
@pytest.mark.parametrize("flags", [{}, {"task_order": "fifo"}, {"task_order": "program"}, {"seed": 5}],
                         ids=["random", "fifo", "program", "seed5"])
def test_every_block_reads_what_all_blocks_wrote_before_the_barrier(flags: dict[str, object]) -> None:
    x = np.random.default_rng(2).integers(-8, 9, (1, B * R, C)).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros((1, R, C), np.float32)
    with use_options(FrontendOptions.from_flags(flags)):
        ir.compile(Phased, distributed_config=DistributedConfig(device_ids=[0]))(x, y, z)
    doubled = (2 * x[0]).reshape(B, R, C)
    want = (doubled + np.roll(doubled, -1, axis=0)).reshape(B * R, C)
    np.testing.assert_array_equal(y[0], want)
    after = want[R:2 * R].copy()
    after[0] += 1
    np.testing.assert_array_equal(z[0], after)


def test_a_tile_crossing_the_barrier_is_refused_where_it_is_read() -> None:
    @pl.program
    class Crossing:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[B * R, C], pl.FP32], y: pl.Out[pl.Tensor[[B * R, C], pl.FP32]]) -> None:
            for b in pl.spmd(B, name_hint="fused", sync_start=True):
                t = pl.mul(x[b * R:b * R + R, 0:C], 2.0)
                pl.system.syncall(core_type="mix")
                y[b * R:b * R + R, 0:C] = t  # MARK

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[1, B * R, C], pl.FP32], y: pl.Out[pl.Tensor[[1, B * R, C], pl.FP32]]) -> None:
            self.orch(x[0], y[0], device=0)

    x = np.zeros((1, B * R, C), np.float32)
    with pytest.raises(FrontendError, match=re.escape("t is bound before a pl.system.syncall")) as err:
        ir.compile(Crossing, distributed_config=DistributedConfig(device_ids=[0]))(x, np.zeros_like(x))
    assert "MARK" in Path(err.value.file).read_text().splitlines()[err.value.line - 1]
