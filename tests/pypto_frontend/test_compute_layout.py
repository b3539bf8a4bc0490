"""pypto's allocation and layout ops in kernels: ``pl.create_tensor`` (with ``init_value``), ``pl.create_tile`` /
``pl.tile.create``, ``pl.reshape``, ``pl.transpose``, ``pl.fillpad`` (``pl.PadValue`` and its sugars),
``pl.set_validshape``, run on two ranks to numpy goldens; the valid box through a reshape; refusals."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

from pldemu.ir import ProgramBuilder
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.ir.vocabulary import IRTypeError
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
R, C = 8, 16
F32_MAX = float("inf")  # PadValue.max of FP32 on the device


@pl.program
class Layout:
    """A created INT32 tensor filled by init_value and assembled into; a set_validshape'd tile padded three ways
    (enum, ``-math.inf`` sugar, ``0`` sugar) and row-summed; a transpose; a reshape [R, C] -> [1, R * C] -> [R, C]
    and one that only adds a unit axis to a partial box; an Acc tile created and moved."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[4, R, C], pl.FP32]],
          t: pl.Out[pl.Tensor[[C, R], pl.FP32]], q: pl.Out[pl.Tensor[[R, C], pl.INT32]]) -> None:
        ones = pl.create_tensor([R, C], dtype=pl.INT32, init_value=7)
        ones = pl.assemble(ones, pl.full([2, C], dtype=pl.INT32, value=-1), [3, 0])
        q = pl.assemble(q, ones, [0, 0])  # a kernel's created tensor is the core's tile: assembled out
        tile = pl.set_validshape(pl.load(x, [0, 0], [R, C]), 5, 9)
        y = pl.assemble(y, pl.fillpad(tile, pad_value=pl.PadValue.max), [0, 0, 0])
        y = pl.assemble(y, pl.tile.fillpad(tile, -math.inf), [1, 0, 0])
        flat = pl.reshape(pl.fillpad(tile, 0), [1, R * C])
        y = pl.assemble(y, pl.tile.reshape(flat, [R, C]), [2, 0, 0])
        y = pl.assemble(y, pl.reshape(pl.reshape(x, [1, R, C]), [R, C]), [3, 0, 0])
        pl.store(pl.transpose(x, 0, 1), [0, 0], t)
        scratch = pl.create_tile([R, C], dtype=pl.FP32, target_memory=pl.MemorySpace.Acc)
        pl.tile.move(scratch, target_memory=pl.Mem.Vec)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, R, C], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 4, R, C], pl.FP32]],
                  ts: pl.Out[pl.Tensor[[NR, C, R], pl.FP32]], qs: pl.Out[pl.Tensor[[NR, R, C], pl.INT32]]) -> None:
        for r in pl.range(2):
            self.k(xs[r], ys[r], ts[r], qs[r], device=r)


def _args() -> tuple[np.ndarray, ...]:
    xs = np.random.default_rng(3).standard_normal((2, R, C)).astype(np.float32)
    return xs, np.zeros((2, 4, R, C), np.float32), np.zeros((2, C, R), np.float32), np.zeros((2, R, C), np.int32)


def _padded(x: np.ndarray, fill: float) -> np.ndarray:
    out = np.full_like(x, fill)
    out[..., :5, :9] = x[..., :5, :9]
    return out


@pytest.mark.launcher
def test_layout_and_allocation_run_on_two_ranks() -> None:
    xs, ys, ts, qs = _args()
    ir.compile(Layout, distributed_config=DistributedConfig(device_ids=[0, 1]))(xs, ys, ts, qs)
    np.testing.assert_array_equal(ys[:, 0], _padded(xs, F32_MAX))  # PadValue.max: +inf, as the device pads
    np.testing.assert_array_equal(ys[:, 1], _padded(xs, -F32_MAX))
    np.testing.assert_array_equal(ys[:, 2], _padded(xs, 0.0))
    np.testing.assert_array_equal(ys[:, 3], xs)
    np.testing.assert_array_equal(ts, xs.transpose(0, 2, 1))
    want = np.full((2, R, C), 7, np.int32)
    want[:, 3:5] = -1
    np.testing.assert_array_equal(qs, want)


def test_names_translate_onto_the_layout_ops() -> None:
    built, _ = translate(Layout, 2, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert ops.count(Op.TILE_FILLPAD) == 6 and ops.count(Op.TILE_SET_VALIDSHAPE) == 2
    assert ops.count(Op.TILE_RESHAPE) == 4 and ops.count(Op.TENSOR_VIEW) >= 4 and ops.count(Op.TILE_TRANSPOSE) == 2


def test_reshape_carries_a_box_through_unit_axes_only() -> None:
    fb = ProgramBuilder("r").function()
    t = fb.pld.tile.set_validshape(fb.pld.tile.create([R, C], "bf16"), [5, 9])
    unit = make_call(Op.TILE_RESHAPE, [t, _list([1, R, 1, C])])
    assert [int(v.value) for v in unit.type.valid_shape] == [1, 5, 1, 9]  # type: ignore[union-attr]
    with pytest.raises(IRTypeError, match=r"cannot carry the valid box \[5, 9\] of \[8, 16\] into \[1, 128\]"):
        make_call(Op.TILE_RESHAPE, [t, _list([1, R * C])])
    with pytest.raises(IRTypeError, match="128 elements"):
        make_call(Op.TILE_RESHAPE, [t, _list([R, R])])


def _list(items: list[int]):  # type: ignore[no-untyped-def]
    from pldemu.ir.nodes import Const, ListExpr

    return ListExpr(tuple(Const(i) for i in items))


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if mistake == "pad":
                pl.fillpad(t, pad_value=1.5)  # MARK-pad
            if mistake == "valid":
                pl.set_validshape(t, R + 1, C)  # MARK-valid
            if mistake == "init-bf16":
                pl.create_tensor([R, C], dtype=pl.BF16, init_value=1.0)  # MARK-init-bf16
            if mistake == "tile-transpose-flag":
                pl.create_tile([R, C], dtype=pl.FP32, transpose=True)  # MARK-tile-transpose-flag
            if mistake == "same-axis":
                pl.transpose(t, 1, -1)  # MARK-same-axis
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("pad", "pl.fillpad: pad_value must be pl.PadValue.zero / max / min or 0, math.inf, -math.inf, got 1.5"),
    ("valid", "pl.set_validshape: valid extent 9 outside [0, 8]"),
    ("init-bf16", "pl.create_tensor: a non-zero init_value of an FP16 / BF16 tensor"),
    ("tile-transpose-flag", "pl.create_tile: transpose / flat_layout are only for Mat tiles"),
    ("same-axis", "tile.transpose requires two distinct literal axes"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    src, start = inspect.getsourcelines(inspect.getmodule(_mistake))  # type: ignore[arg-type]
    want = next(max(start, 1) + i for i, line in enumerate(src) if f"MARK-{mistake}" in line and "(" in line)
    assert err.value.line == want, str(err.value)
