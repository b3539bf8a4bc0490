"""pypto's ``pld`` spellings that were missing: the canonical ``pld.system.world_size`` / ``get_comm_ctx`` /
``rank`` / ``nranks`` and ``pld.tensor.alloc_window_buffer`` / ``window`` (pldemu had their short forms only, which
pypto re-exports: one op each), the short forms ``pld.remote_load`` (``pld.tile.remote_load``) and
``pld.remote_store`` (pypto's dispatch on its source: a tile's is ``pld.tile.remote_store``, a tensor's
``pld.tensor.remote_store``), and the types ``pld.CommCtx`` / ``pld.CommCtxType`` of a comm ctx (a local's
annotation, a kernel's parameter).
Run at two ranks against numpy: each rank pushes its rows into every peer's windows (a tile, shifted by the peer's
rank, and a tensor as it is), then reads its own windows and the next rank's through ``pld.remote_load``."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS, C = 4, 16


def _program(nranks: int):  # type: ignore[no-untyped-def]
    rows = nranks * ROWS

    @pl.program
    class Names:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, C], pl.FP32],
                 shifted: pl.InOut[pld.DistributedTensor[[rows, C], pl.FP32]],
                 plain: pl.InOut[pld.DistributedTensor[[rows, C], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 8], pl.INT32]],
                 mine: pl.Out[pl.Tensor[[2, rows, C], pl.FP32]],
                 theirs: pl.Out[pl.Tensor[[rows, C], pl.FP32]]) -> pl.Tensor[[rows, C], pl.FP32]:
            ctx: pld.CommCtx = pld.system.get_comm_ctx(shifted)
            me = pld.system.rank(ctx)
            sig_ctx: pld.CommCtxType = pld.get_comm_ctx(sig)
            n = pld.system.nranks(sig_ctx)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="push") as pushed:
                t = pl.load(x, [0, 0], [ROWS, C])
                for peer, (s,) in pl.range(nranks, init_values=(t,)):  # peer p is sent x + p
                    pld.remote_store(s, shifted, peer, [me * ROWS, 0])
                    pld.remote_store(x, plain, peer, [me * ROWS, 0])
                    pld.system.notify(sig, peer, [0, 0], 1)
                    _ = pl.yield_(pl.tile.adds(s, 1.0))
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="own", deps=[pushed]):
                pld.system.wait(sig, [0, 0], n)
                mine = pl.assemble(mine, pl.load(shifted, [0, 0], [rows, C]), [0, 0, 0])
                mine = pl.assemble(mine, pl.load(plain, [0, 0], [rows, C]), [1, 0, 0])
                for peer in pl.range(nranks):
                    pld.system.notify(sig, peer, [0, 1], 1)
            theirs = self.next_rows(shifted, sig, sig_ctx, theirs)
            return theirs

        @pl.function(type=pl.FunctionType.InCore)
        def next_rows(self, shifted: pld.DistributedTensor[[rows, C], pl.FP32],
                      sig: pl.InOut[pld.DistributedTensor[[1, 8], pl.INT32]], ctx: pld.CommCtx,
                      theirs: pl.Out[pl.Tensor[[rows, C], pl.FP32]]) -> pl.Tensor[[rows, C], pl.FP32]:
            pld.system.wait(sig, [0, 1], pld.system.nranks(ctx))
            peer = (pld.system.rank(ctx) + 1) % pld.system.nranks(ctx)
            return pl.store(pld.remote_load(shifted, peer, [0, 0], [rows, C]), [0, 0], theirs)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, C], pl.FP32], mine: pl.Out[pl.Tensor[[NR, 2, rows, C], pl.FP32]],
                 theirs: pl.Out[pl.Tensor[[NR, rows, C], pl.FP32]]) -> None:
            by_bytes = pld.tensor.alloc_window_buffer(rows * C * 4)
            by_shape = pld.tensor.alloc_window_buffer([pld.system.world_size() * ROWS, C], dtype=pl.FP32)
            flags = pld.alloc_window_buffer(32)
            for r in pl.range(pld.system.world_size()):
                self.orch(x[r], pld.tensor.window(by_bytes, [rows, C], dtype=pl.FP32),
                          pld.tensor.window(by_shape, [rows, C], dtype=pl.FP32),
                          pld.window(flags, [1, 8], dtype=pl.INT32), mine[r], theirs[r], device=r)

    return Names


def test_the_canonical_spellings_are_the_short_forms_ops() -> None:
    assert pld.system.rank is pld.rank and pld.system.nranks is pld.nranks
    assert pld.system.world_size is pld.world_size and pld.system.get_comm_ctx is pld.get_comm_ctx
    assert pld.tensor.alloc_window_buffer is pld.alloc_window_buffer and pld.tensor.window is pld.window
    assert pld.remote_load is pld.tile.remote_load and pld.CommCtxType is pld.CommCtx


@pytest.mark.launcher
def test_the_pld_spellings_compute() -> None:
    nranks = 2
    x = np.random.default_rng(5).uniform(-4, 4, (nranks, ROWS, C)).astype(np.float32)
    mine = np.zeros((nranks, 2, nranks * ROWS, C), np.float32)
    theirs = np.zeros((nranks, nranks * ROWS, C), np.float32)
    ir.compile(_program(nranks), distributed_config=DistributedConfig(device_ids=list(range(nranks))))(
        x, mine, theirs)
    stacked = x.reshape(nranks * ROWS, C)
    for r in range(nranks):
        np.testing.assert_array_equal(mine[r, 0], stacked + np.float32(r))
        np.testing.assert_array_equal(mine[r, 1], stacked)
        np.testing.assert_array_equal(theirs[r], stacked + np.float32((r + 1) % nranks))
