"""pypto's op wrappers take their optional parameters positionally too (its parser calls the Python wrapper with
the call's positional arguments: ``invoke_dsl(op_func, args, kwargs)``), so ``pl.cast(x, pl.BF16, "ceil")``,
``pl.slice(x, shape, offset, valid_shape)``, ``pl.load(t, offsets, shapes, valid_shape, target_memory)``,
``pl.matmul(a, b, out_dtype, a_trans, b_trans)``, ``pl.matmul_acc(acc, a, b, a_trans, b_trans)``,
``pl.tile.matmul_acc(acc, a, b, init_cond)``, ``pl.div(a, b, high_precision)``, ``pl.tile.transpose(t, 0, 1,
tmp)`` and ``pld.tile.remote_load(w, peer, offsets, shape, valid_shape)`` are each the keyword form. Run on one
rank against numpy."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.surface.runtime import RunConfig

R, C, ROWS = 16, 32, 5
NR = pl.dynamic("NR")


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


@pl.jit.incore
def positional(x: pl.Tensor[[R, C], pl.FP32], w: pl.Tensor[[C, C], pl.BF16], win: pld.DistributedTensor[[R, C], pl.FP32],
               bf: pl.Out[pl.Tensor[[R, C], pl.BF16]], part: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               mm: pl.Out[pl.Tensor[[3, R, C], pl.FP32]], dv: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               tr: pl.Out[pl.Tensor[[C, R], pl.FP32]], got: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    t = pl.load(x, [0, 0], [R, C])
    pl.store(pl.cast(t, pl.BF16, "ceil"), [0, 0], bf)
    pl.store(pl.fillpad(pl.slice(t, [R, C], [0, 0], [ROWS, C])), [0, 0], part)
    a = pl.load(w, [0, 0], [R, C], [R, C], pl.MemorySpace.Mat)
    a = pl.move(a, target_memory=pl.MemorySpace.Left)
    b = pl.move(pl.load(w, [0, 0], [C, C], None, pl.MemorySpace.Mat), target_memory=pl.MemorySpace.Right)
    prod = pl.matmul(a, b)
    pl.store(pl.tile.matmul_acc(prod, a, b, False), [0, 0, 0], mm)  # init_cond False: prod + a @ b
    pl.store(pl.tile.matmul_acc(prod, a, b, True), [1, 0, 0], mm)  # init_cond True: a @ b alone
    pl.store(pl.div(t, pl.add(t, 4.0), True), [0, 0], dv)
    pl.store(pl.tile.transpose(t, 0, 1, pl.create_tile([R, C], pl.FP32)), [0, 0], tr)
    pl.store(t, [0, 0], win)
    pl.store(pl.fillpad(pld.tile.remote_load(win, 0, [0, 0], [R, C], [ROWS, C])), [0, 0], got)
    return bf


@pl.jit
def tensor_level(w: pl.Tensor[[C, C], pl.BF16], mm: pl.InOut[pl.Tensor[[3, R, C], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tensor_mm"):
        acc = pl.matmul(w[0:R, :], w, pl.FP32, False, True)
        mm[2:3, :, :] = pl.reshape(pl.matmul_acc(acc, w[0:R, :], w, False, True), [1, R, C])
    return mm


@pl.jit.host
def host(x: pl.Tensor[[NR, R, C], pl.FP32], w: pl.Tensor[[NR, C, C], pl.BF16], bf: pl.Out[pl.Tensor[[NR, R, C], pl.BF16]],
         part: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]], mm: pl.Out[pl.Tensor[[NR, 3, R, C], pl.FP32]],
         dv: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]], tr: pl.Out[pl.Tensor[[NR, C, R], pl.FP32]],
         got: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]]):
    buf = pld.alloc_window_buffer(R * C * 4)
    for r in pl.range(pld.world_size()):
        win = pld.window(buf, [R, C], dtype=pl.FP32)
        positional(x[r], w[r], win, bf[r], part[r], mm[r], dv[r], tr[r], got[r], device=r)
        tensor_level(w[r], mm[r], device=r)


@pytest.mark.launcher
def test_optional_parameters_are_taken_positionally_as_pypto_takes_them() -> None:
    rng = np.random.default_rng(47)
    x = rng.standard_normal((1, R, C)).astype(np.float32)
    w = rng.standard_normal((1, C, C)).astype(ml_dtypes.bfloat16)
    outs = [np.zeros((1, R, C), ml_dtypes.bfloat16), np.zeros((1, R, C), np.float32), np.zeros((1, 3, R, C), np.float32),
            np.zeros((1, R, C), np.float32), np.zeros((1, C, R), np.float32), np.zeros((1, R, C), np.float32)]
    host(x, w, *outs, config=RunConfig(distributed_config=DistributedConfig(device_ids=[0])))
    bf, part, mm, dv, tr, got = (o[0] for o in outs)
    near = x[0].astype(ml_dtypes.bfloat16)
    bits = near.view(np.uint16).astype(np.int32)
    above = np.where(near.astype(np.float32) >= 0, bits + 1, bits - 1).astype(np.uint16).view(ml_dtypes.bfloat16)
    want_bf = np.where(near.astype(np.float32) < x[0], above.astype(np.float32), near.astype(np.float32))
    np.testing.assert_array_equal(bf.astype(np.float32), want_bf)  # ceil: the nearest BF16 not below x
    head = np.where(np.arange(R)[:, None] < ROWS, x[0], 0.0)
    np.testing.assert_array_equal(part, head)
    a = w[0, :R].astype(np.float64)
    np.testing.assert_allclose(mm[0], 2 * (a @ w[0].astype(np.float64)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(mm[1], a @ w[0].astype(np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(mm[2], 2 * (a @ w[0].astype(np.float64).T), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dv, x[0] / (x[0] + np.float32(4.0)), rtol=1e-6)
    np.testing.assert_array_equal(tr, x[0].T)
    np.testing.assert_array_equal(got, head)
