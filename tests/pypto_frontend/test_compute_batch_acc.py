"""``pl.matmul_acc`` with an operand of rank >= 3 is pypto's ``tile.batch_matmul_acc`` (batch dims broadcast
to the accumulator's): the routed-expert pattern of pypto-lib's MoE, an INT8 token tile times a
``[1, N, K]`` slice of the experts' weights, split K accumulated in a per-block INT32 scratch through
``pl.pipeline``. ``init_cond`` on such operands is refused as pypto refuses it. Against numpy at 1 and 2
ranks."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
E, TOK, N, K, KT, NT = 2, 16, 64, 128, 32, 32
"""Experts, tokens, output columns, reduction depth, its chunk, and a block's column tile."""


def _program(init_cond: bool):
    @pl.program
    class Experts:
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[TOK, K], pl.INT8], w: pl.Tensor[[E, N, K], pl.INT8],
                 y: pl.Out[pl.Tensor[[E, TOK, N], pl.INT32]]) -> None:
            for blk in pl.spmd(E * (N // NT), name_hint="expert_mm"):
                e = blk // (N // NT)
                n0 = (blk % (N // NT)) * NT
                acc = pl.create_tensor([1, TOK, NT], dtype=pl.INT32)
                for k0 in pl.pipeline(0, K, KT, stage=2):
                    xk = x[:, k0:k0 + KT]
                    wk = w[e:e + 1, n0:n0 + NT, k0:k0 + KT]
                    if init_cond:
                        acc = pl.matmul_acc(acc, xk, wk, b_trans=True, init_cond=(k0 == 0))
                    elif k0 == 0:
                        acc = pl.matmul(xk, wk, b_trans=True, out_dtype=pl.INT32)
                    else:
                        acc = pl.matmul_acc(acc, xk, wk, b_trans=True)
                y[e:e + 1, :, n0:n0 + NT] = acc

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, TOK, K], pl.INT8], w: pl.Tensor[[NR, E, N, K], pl.INT8],
                 y: pl.Out[pl.Tensor[[NR, E, TOK, N], pl.INT32]]) -> None:
            for r in pl.range(pld.world_size()):
                self.orch(x[r], w[r], y[r], device=r)

    return Experts


def _args(nranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, (nranks, TOK, K)).astype(np.int8)
    w = rng.integers(-128, 128, (nranks, E, N, K)).astype(np.int8)
    return x, w, np.zeros((nranks, E, TOK, N), np.int32)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_experts_split_k_through_batch_matmul_acc(nranks: int) -> None:
    x, w, y = _args(nranks)
    ir.compile(_program(False), distributed_config=DistributedConfig(device_ids=list(range(nranks))))(x, w, y)
    want = np.einsum("rtk,renk->retn", x.astype(np.int64), w.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(y, want)


def test_init_cond_on_batched_operands_is_refused_as_pypto_does() -> None:
    with pytest.raises(FrontendError, match=re.escape("does not support init_cond on operands of rank > 2")):
        translate(_program(True), 1, _args(1))


@pl.program
class GroupsSideBySide:
    """Each group's ``[1, TOK, NT]`` product (a 2-D token tile times a ``[1, NT, K]`` slice of the group's
    weights) assembled into a 2-D tensor at the group's columns (pypto-lib's attention output projection:
    pypto's FlattenTileNdTo2D stores the 3-D tile as its ``[TOK, NT]`` rows)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[TOK, K], pl.INT8], w: pl.Tensor[[E, NT, K], pl.INT8],
             y: pl.Out[pl.Tensor[[TOK, E * NT], pl.INT32]]) -> None:
        for g in pl.spmd(E, name_hint="group_mm"):
            acc = pl.matmul(x[:, 0:K], w[g:g + 1, 0:NT, 0:K], b_trans=True, out_dtype=pl.INT32)
            y = pl.assemble(y, acc, [0, g * NT])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[TOK, K], pl.INT8], w: pl.Tensor[[E, NT, K], pl.INT8],
             y: pl.Out[pl.Tensor[[TOK, E * NT], pl.INT32]]) -> None:
        self.orch(x, w, y)


@pytest.mark.launcher
def test_a_3d_product_assembled_into_a_2d_tensor_lands_as_its_rows() -> None:
    rng = np.random.default_rng(19)
    x = rng.integers(-128, 128, (TOK, K)).astype(np.int8)
    w = rng.integers(-128, 128, (E, NT, K)).astype(np.int8)
    y = np.zeros((TOK, E * NT), np.int32)
    ir.compile(GroupsSideBySide, distributed_config=DistributedConfig(device_ids=[0]))(x, w, y)
    want = np.concatenate([x.astype(np.int32) @ w[g].astype(np.int32).T for g in range(E)], axis=1)
    np.testing.assert_array_equal(y, want)
