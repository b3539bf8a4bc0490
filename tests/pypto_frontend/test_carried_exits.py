"""``break`` / ``continue`` in a ``pl.range(..., init_values=)`` loop run as pypto's CtrlFlowTransform leaves them
(ResolveYieldAtEscape): at the exit each carried value is the trailing ``pl.yield_``'s name when the statements
before the exit bind it, else the value the iteration began with; after a break the loop's results are those.
Programs whose results differ under any other reading, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

NB, R, C = 6, 8, 16


@pl.program
class Exits:
    @pl.function(type=pl.FunctionType.InCore)
    def masked(self, x: pl.Tensor[[NB * R, C], pl.FP32], mask: pl.Tensor[[1, NB], pl.INT32],
               y: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]]) -> pl.Tensor[[2 * R, C], pl.FP32]:
        zero = pl.tile.muls(pl.load(x, [0, 0], [R, C]), 0.0)
        for i, (acc, raw) in pl.range(NB, init_values=(zero, zero)):
            t = pl.load(x, [i * R, 0], [R, C])
            raw2 = pl.tile.add(raw, t)  # bound before the continue: yielded there too
            if pl.read(mask, [0, i]) == 0:
                continue
            acc2 = pl.tile.muls(pl.tile.add(acc, t), 0.5)  # bound after it: the iteration's own acc instead
            acc_out, raw_out = pl.yield_(acc2, raw2)
        y = pl.assemble(y, acc_out, [0, 0])
        return pl.assemble(y, raw_out, [R, 0])

    @pl.function(type=pl.FunctionType.InCore)
    def online(self, x: pl.Tensor[[NB * R, C], pl.FP32], count: pl.Tensor[[1, 1], pl.INT32],
               z: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]]) -> pl.Tensor[[2 * R, C], pl.FP32]:
        first = pl.load(x, [0, 0], [R, C])
        for i, (mx, seen) in pl.range(NB, init_values=(first, pl.tile.muls(first, 0.0))):
            t = pl.load(x, [i * R, 0], [R, C])
            seen2 = pl.tile.add(seen, t)  # bound before the break: the block it leaves at is in
            if i >= pl.read(count, [0, 0]):
                break
            mx2 = pl.tile.maximum(mx, t)
            mx_out, seen_out = pl.yield_(mx2, seen2)
        z = pl.assemble(z, mx_out, [0, 0])
        return pl.assemble(z, seen_out, [R, 0])

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[NB * R, C], pl.FP32], mask: pl.Tensor[[1, NB], pl.INT32],
             count: pl.Tensor[[1, 1], pl.INT32], y: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]],
             z: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]]) -> None:
        y = self.masked(x, mask, y)
        z = self.online(x, count, z)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[NB * R, C], pl.FP32], mask: pl.Tensor[[1, NB], pl.INT32],
             count: pl.Tensor[[1, 1], pl.INT32], y: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]],
             z: pl.Out[pl.Tensor[[2 * R, C], pl.FP32]]) -> None:
        self.orch(x, mask, count, y, z)


def _golden(x: np.ndarray, mask: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    blocks = x.reshape(NB, R, C)
    acc, raw = np.zeros((R, C), np.float32), np.zeros((R, C), np.float32)
    for i in range(NB):
        raw = raw + blocks[i]
        if mask[0, i]:
            acc = (acc + blocks[i]) * np.float32(0.5)
    mx, seen = blocks[0].copy(), np.zeros((R, C), np.float32)
    for i in range(NB):
        seen = seen + blocks[i]
        if i >= count:
            break
        mx = np.maximum(mx, blocks[i])
    return np.concatenate([acc, raw]), np.concatenate([mx, seen])


@pytest.mark.launcher
@pytest.mark.parametrize("count", [0, 3, NB])
def test_carried_values_at_an_exit_are_pyptos(count: int) -> None:
    rng = np.random.default_rng(count)
    x = rng.uniform(-4, 4, (NB * R, C)).astype(np.float32)
    mask = np.array([[1, 0, 1, 1, 0, 1]], np.int32)
    y, z = np.zeros((2 * R, C), np.float32), np.zeros((2 * R, C), np.float32)
    ir.compile(Exits, distributed_config=DistributedConfig(device_ids=[0]))(
        x, mask, np.array([[count]], np.int32), y, z)
    want_y, want_z = _golden(x, mask, count)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


def _refused(two: bool):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            for i, (acc,) in pl.range(4, init_values=(t,)):
                if i == 1:
                    continue
                if i == 2:
                    break
                acc2 = pl.tile.add(acc, t)
                out = pl.yield_(acc2)
            pl.store(out, [0, 0], y)

        @pl.function(type=pl.FunctionType.InCore)
        def j(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            for i, (acc,) in pl.range(4, init_values=(t,)):
                if i > 0:  # noqa: SIM102 (the nested exit is the point)
                    if i == 2:
                        continue
                acc2 = pl.tile.add(acc, t)
                out = pl.yield_(acc2)
            pl.store(out, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            if two:
                self.k(x, y)
            else:
                self.j(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.orch(x, y)

    return Prog


@pytest.mark.parametrize(("shape", "message"), [
    (True, "resolves the yield at a second exit against the statements since the first only"),
    (False, "an exit nested in an `if` of a loop with init_values is not run by pldemu"),
])
def test_ill_defined_exits_are_refused_at_their_line(shape: bool, message: str) -> None:
    x = np.zeros((R, C), np.float32)
    with pytest.raises(FrontendError, match=message):
        translate(_refused(shape), 1, (x, x.copy()))
