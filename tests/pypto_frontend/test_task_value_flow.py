"""Values leaving a ``pl.at`` / ``pl.spmd`` task as pypto's OutlineIncoreScopes and ConvertToSSA treat them: a tile
an earlier ``pl.at`` made, re-bound by a ``pl.at`` in a ``pl.range`` loop, is carried through the loop (each
iteration reads the previous one's); a scalar a ``pl.at`` body computes, a ``pl.at`` output made only inside a
loop, and a tile of a ``pl.spmd`` body are refused where they are read after it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.finder import active
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl

R, C, N = 8, 16, 3


@pl.program
class Recurrence:
    """``h = h / 2 + x[i]`` by one ``pl.at`` per step of a ``pl.range``, ``h`` made by an earlier ``pl.at``."""

    @pl.function
    def entry(self, x: pl.Tensor[[N * R, C], pl.FP32],
              out: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="init"):
            h = pl.full([R, C], dtype=pl.FP32, value=1.0)
        for i in pl.range(N):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
                h = pl.add(pl.mul(h, 0.5), x[i * R:(i + 1) * R, :])
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="fin"):
            out = pl.assemble(out, h, [0, 0])
        return out


@pytest.mark.launcher
def test_a_task_output_rebound_in_a_loop_is_carried_through_it() -> None:
    x = np.arange(N * R * C, dtype=np.float32).reshape(N * R, C) / 10
    out = np.zeros((R, C), np.float32)
    with active():
        ir.compile(Recurrence)(x, out)
    h = np.ones((R, C), np.float32)
    for i in range(N):
        h = h * np.float32(0.5) + x[i * R:(i + 1) * R]
    np.testing.assert_array_equal(out, h)


def _refused(kind: str) -> object:
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.Opaque)
        def entry(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[4], pl.INT32],
                  y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
            if kind == "scalar":
                with pl.at(level=pl.Level.CORE_GROUP):
                    k = pl.read(n, [1])
                    t = pl.mul(x, 2.0)
                with pl.at(level=pl.Level.CORE_GROUP):
                    y = pl.assemble(y, pl.add(t, pl.cast(k, pl.FP32)), [0, 0])
            elif kind == "loop":
                for j in pl.parallel(2):
                    with pl.at(level=pl.Level.CORE_GROUP):
                        t = pl.mul(x[j * 4:j * 4 + 4, :], 2.0)
                with pl.at(level=pl.Level.CORE_GROUP):
                    y = pl.assemble(y, t, [0, 0])
            else:
                with pl.spmd(2):
                    b = pl.tile.get_block_idx()
                    t = pl.mul(x[b * 4:b * 4 + 4, :], 2.0)
                    y = pl.assemble(y, t, [b * 4, 0])
                with pl.at(level=pl.Level.CORE_GROUP):
                    y = pl.assemble(y, pl.add(t, 1.0), [0, 0])
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[4], pl.INT32],
                 y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.entry(x, n, y)

    return Prog


@pytest.mark.parametrize(("kind", "message"), [
    ("scalar", r"k is a scalar the pl.at body at line \d+ computes, read after that body"),
    ("loop", "t is the output of a pl.at task inside the loop above, read after the loop"),
    ("spmd", r"t is bound in the pl.spmd body at line \d+, read after it: every block of the task binds its own"),
])
def test_values_pypto_cannot_carry_out_of_a_task_are_refused_where_read(kind: str, message: str) -> None:
    x = np.zeros((R, C), np.float32)
    with pytest.raises(FrontendError, match=message) as err:
        translate(_refused(kind), 1, (x, np.zeros(4, np.int32), x.copy()))
    assert err.value.line == {"scalar": 62, "loop": 68, "spmd": 75}[kind]  # the read after the task


@pl.jit.incore
def _bump(src: pl.Tensor[[4, 16], pl.FP32], dst: pl.Out[pl.Tensor[[4, 16], pl.FP32]]):
    return pl.store(pl.add(pl.load(src, [0, 0], [4, 16]), 1.0), [0, 0], dst)


@pl.jit
def _swap_dynamic(x: pl.Tensor[[4, 16], pl.FP32], y: pl.Out[pl.Tensor[[4, 16], pl.FP32]],
                  nt: pl.Tensor[[1], pl.INT32]):
    cur = x
    for _ in pl.range(pl.cast(pl.tensor.read(nt, [0]), pl.INDEX)):  # MARK-swap-dynamic
        nxt = pl.create_tensor([4, 16], dtype=pl.FP32)
        nxt = _bump(cur, nxt)
        cur = nxt
    return _bump(cur, y)


def test_a_tensor_swapped_in_a_loop_of_a_run_time_trip_count_is_refused_at_the_loop() -> None:
    args = [np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32), np.array([3], np.int32)]
    with pytest.raises(FrontendError, match="cur: re-bound inside this loop to another tensor") as err:
        translate(_swap_dynamic.compile(*args).program, 1, args)
    src = Path(__file__).read_text().splitlines()
    assert err.value.line == next(i + 1 for i, text in enumerate(src) if "MARK-swap" + "-dynamic" in text)
