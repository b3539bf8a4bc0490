"""``pl.prefetch`` (pypto's asynchronous GM -> L2 prefetch, a cache hint): translated after pypto's checks of its
operands, changing no value; written here in pypto-lib's pattern (a layer's weights flattened and warmed in a
task before the matmul that reads them)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

M, K, N = 16, 32, 16


@pl.program
class Warmed:
    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[M, K], pl.FP32], w: pl.Tensor[[K, N], pl.FP32],
             y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        w_flat = pl.reshape(w, [K * N])
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="warm"):
            ctx = pl.prefetch.make_context()
            event = pl.prefetch.async_prefetch(w_flat, ctx)
            pl.prefetch.wait(event, pl.prefetch.session(ctx))
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="mm"):
            a = pl.load(x, [0, 0], [M, K], target_memory=pl.MemorySpace.Mat)
            b = pl.load(w, [0, 0], [K, N], target_memory=pl.MemorySpace.Mat)
            acc = pl.matmul(pl.move(a, target_memory=pl.MemorySpace.Left),
                            pl.move(b, target_memory=pl.MemorySpace.Right))
            pl.store(acc, [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[M, K], pl.FP32], w: pl.Tensor[[K, N], pl.FP32],
                  y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        self.orch(x, w, y)


def _mistake(kind: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Bad:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, w: pl.Tensor[[K, N], pl.FP32]) -> None:
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="warm"):
                ctx = pl.prefetch.make_context()
                if kind == "2d":
                    pl.prefetch.async_prefetch(w, ctx)
                if kind == "ctx":
                    pl.prefetch.async_prefetch(pl.reshape(w, [K * N]), 3)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, w: pl.Tensor[[K, N], pl.FP32]) -> None:
            self.orch(w)

    return Bad


@pytest.mark.launcher
def test_a_prefetched_weight_reads_the_same() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 4, (M, K)).astype(np.float32)  # exact in any order of the sum
    w = rng.integers(-4, 4, (K, N)).astype(np.float32)
    y = np.zeros((M, N), np.float32)
    ir.compile(Warmed, distributed_config=DistributedConfig(device_ids=[0]))(x, w, y)
    np.testing.assert_array_equal(y, x @ w)


def test_prefetch_leaves_no_op_in_the_program() -> None:
    args = (np.zeros((M, K), np.float32), np.zeros((K, N), np.float32), np.zeros((M, N), np.float32))
    built, _ = translate(Warmed, 1, args)
    assert "prefetch" not in repr(built.program)


@pytest.mark.parametrize(("kind", "message"), [
    ("2d", "pl.prefetch.async_prefetch expects src to be a flat contiguous logical 1D GM region (all dimensions "
           "except the last must be 1), but dimension 0 is 32"),
    ("ctx", "pl.prefetch.async_prefetch expects a PrefetchAsyncContext (output of pl.prefetch.make_context), "
            "got 3"),
])
def test_prefetch_operands_are_checked_as_pypto_checks_them(kind: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(f"pypto refuses it: {message}")):
        translate(_mistake(kind), 1, (np.zeros((K, N), np.float32),))
