"""Round 3 of the hunt (tests/pypto_frontend/hunt_programs/hunt3_*.py): pypto's tile spellings pldemu refused as
unknown names (``pl.tile.subs``, ``pl.tile.batch_matmul_acc``), and ``break`` / ``continue`` in device loops
(pypto's CtrlFlowTransform removes them; pldemu refused them as unsupported statements), run to numpy goldens;
where pypto's parser refuses them, pldemu does too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

B, M, K, N = 2, 16, 16, 16


@pl.program
class TileSpellings:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[M, N], pl.FP32], a: pl.Tensor[[B, M, K], pl.FP32], b: pl.Tensor[[B, K, N], pl.FP32],
          y: pl.Out[pl.Tensor[[M, N], pl.FP32]], c: pl.Out[pl.Tensor[[B, M, N], pl.FP32]]) -> None:
        y = pl.store(pl.tile.subs(pl.load(x, [0, 0], [M, N]), 1.5), [0, 0], y)
        lhs = pl.move(pl.load(a, [0, 0, 0], [B, M, K], target_memory=pl.MemorySpace.Mat),
                      target_memory=pl.MemorySpace.Left)
        rhs = pl.move(pl.load(b, [0, 0, 0], [B, K, N], target_memory=pl.MemorySpace.Mat),
                      target_memory=pl.MemorySpace.Right)
        prod = pl.tile.batch_matmul(lhs, rhs)
        c = pl.store(pl.tile.batch_matmul_acc(prod, lhs, rhs), [0, 0, 0], c)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[M, N], pl.FP32], a: pl.Tensor[[B, M, K], pl.FP32],
                  b: pl.Tensor[[B, K, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]],
                  c: pl.Out[pl.Tensor[[B, M, N], pl.FP32]]) -> None:
        self.k(x, a, b, y, c, device=0)


@pytest.mark.launcher
def test_tile_subs_and_batch_matmul_acc() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((M, N)).astype(np.float32)
    a = rng.integers(-4, 5, (B, M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (B, K, N)).astype(np.float32)
    y, c = np.zeros_like(x), np.zeros((B, M, N), np.float32)
    ir.compile(TileSpellings, distributed_config=DistributedConfig(device_ids=[0]))(x, a, b, y, c)
    np.testing.assert_array_equal(y, x - np.float32(1.5))
    np.testing.assert_array_equal(c, 2 * (a @ b))


R, C = 8, 16


@pl.program
class EarlyExits:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[8 * R, C], pl.FP32], lim: pl.Tensor[[1, 8], pl.INT32],
          y: pl.InOut[pl.Tensor[[8 * R, C], pl.FP32]], s: pl.Out[pl.Tensor[[2, C], pl.FP32]]) -> None:
        n = pl.read(lim, [0, 0])
        acc = pl.tile.full([R, C], pl.FP32, 0.0)
        for i in pl.range(8):
            if i >= n:
                break
            if i % 2 == 1:
                continue
            t = pl.load(x, [i * R, 0], [R, C])
            acc = pl.add(acc, t)
            y = pl.store(pl.mul(t, 2.0), [i * R, 0], y)
        s = pl.store(pl.slice(acc, [1, C], [0, 0]), [0, 0], s)
        k = 0
        cnt = pl.tile.full([1, C], pl.FP32, 0.0)
        while True:
            if k >= pl.read(lim, [0, 1]):
                break
            cnt = pl.add(cnt, 1.0)
            k = k + 1
        s = pl.store(cnt, [1, 0], s)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[8 * R, C], pl.FP32], lim: pl.Tensor[[1, 8], pl.INT32],
                  y: pl.InOut[pl.Tensor[[8 * R, C], pl.FP32]], s: pl.Out[pl.Tensor[[2, C], pl.FP32]]) -> None:
        self.k(x, lim, y, s, device=0)


@pytest.mark.launcher
def test_break_and_continue_in_device_loops() -> None:
    x = np.random.default_rng(6).standard_normal((8 * R, C)).astype(np.float32)
    lim = np.array([[5, 3, 0, 0, 0, 0, 0, 0]], np.int32)
    y, s = np.zeros_like(x), np.zeros((2, C), np.float32)
    ir.compile(EarlyExits, distributed_config=DistributedConfig(device_ids=[0]))(x, lim, y, s)
    want = np.zeros_like(x)
    for i in (0, 2, 4):  # i = 1, 3 continue; the loop breaks at i = 5
        want[i * R:(i + 1) * R] = 2 * x[i * R:(i + 1) * R]
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(s[0], x[0] + x[2 * R] + x[4 * R])
    np.testing.assert_array_equal(s[1], np.full(C, 3.0, np.float32))


def _refused(loop: str) -> str:
    @pl.program
    class Exit:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if loop == "parallel":
                for i in pl.parallel(4):
                    if i == 2:
                        break  # MARK
                    y = pl.store(t, [0, 0], y)
            else:
                for i, (a,) in pl.range(4, init_values=(t,)):
                    if i == 2:
                        continue  # MARK
                    a2 = pl.add(a, t)
                    (a_out,) = pl.yield_(a2)
                y = pl.store(a_out, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, y, device=0)

    x = np.zeros((R, C), np.float32)
    with pytest.raises(FrontendError) as err:
        ir.compile(Exit, distributed_config=DistributedConfig(device_ids=[0]))(x, np.zeros_like(x))
    return str(err.value)


def test_break_where_pypto_refuses_it() -> None:
    msg = _refused("parallel")
    assert "pypto refuses it: 'break' not supported in parallel loops" in msg and "MARK" not in msg, msg
    assert ":" + str(_mark_line("break")) in msg, msg


def _mark_line(word: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if line.strip() == f"{word}  # MARK")
