"""``pld.tensor.remote_store`` of a valid-shaped slice pushes its valid box only: a shard of ``HALF``
columns pushed in ``TILE``-column tiles whose last one is ragged (``HALF`` is not a multiple of ``TILE``)
lands exactly in the owner's half of the window, never in the next rank's (pypto-lib's LM head pushes its
ragged last vocab tile so). Run at one to three ranks against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS, HALF, TILE = 4, 40, 16
TILES = (HALF + TILE - 1) // TILE


def _program(nranks: int):
    full = nranks * HALF

    @pl.program
    class RaggedPush:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, shard: pl.Tensor[[ROWS, HALF + TILE], pl.FP32],
                 win: pl.InOut[pld.DistributedTensor[[ROWS, full], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 8], pl.INT32]],
                 out: pl.Out[pl.Tensor[[ROWS, full], pl.FP32]]) -> pl.Tensor[[ROWS, full], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(win))
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="push") as pushed:
                for t in pl.range(TILES):
                    o0 = t * TILE
                    part = pl.slice(shard, [ROWS, TILE], [0, o0], valid_shape=[ROWS, pl.min(HALF - o0, TILE)])
                    for peer in pl.range(nranks):
                        pld.tensor.remote_store(part, win, peer, [0, me * HALF + o0])
                for peer in pl.range(nranks):
                    pld.system.notify(sig, peer, [0, 0], 1)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="read", deps=[pushed]):
                pld.system.wait(sig, [0, 0], nranks)
                for c in pl.range(0, full, HALF):
                    out = pl.store(pl.load(win, [0, c], [ROWS, HALF]), [0, c], out)
            return out

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, shard: pl.Tensor[[NR, ROWS, HALF + TILE], pl.FP32],
                 out: pl.Out[pl.Tensor[[NR, ROWS, full], pl.FP32]]) -> pl.Tensor[[NR, ROWS, full], pl.FP32]:
            cells = pld.alloc_window_buffer(ROWS * full * 4)
            flags = pld.alloc_window_buffer(32)
            for r in pl.range(pld.world_size()):
                self.orch(shard[r], pld.window(cells, [ROWS, full], dtype=pl.FP32),
                          pld.window(flags, [1, 8], dtype=pl.INT32), out[r], device=r)
            return out

    return RaggedPush


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_a_ragged_tile_pushes_its_valid_box_only(nranks: int) -> None:
    shard = np.random.default_rng(3).standard_normal((nranks, ROWS, HALF + TILE)).astype(np.float32)
    out = np.zeros((nranks, ROWS, nranks * HALF), np.float32)
    ir.compile(_program(nranks), distributed_config=DistributedConfig(device_ids=list(range(nranks))))(shard, out)
    want = np.concatenate([shard[r, :, :HALF] for r in range(nranks)], axis=1)
    for r in range(nranks):
        np.testing.assert_array_equal(out[r], want)
