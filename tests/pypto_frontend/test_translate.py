"""pypto-style programs translated to pldemu IR (no job): capture, projection, buffers, no hidden sync."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from pldemu.ir.enums import CastMode
from pldemu.ir.nodes import Assign, Const, For, Program, Var
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls, walk_stmts
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.translate.values import HostTensor
from pldemu.pypto.types import Direction

COLS = 8
NR = pl.dynamic("NR")


@pl.program
class TwoPhase:
    """Publish into the own window, then (a second host phase) read the right neighbour's."""

    @pl.function(type=pl.FunctionType.InCore)
    def publish(self, inp: pl.Tensor[[1, COLS], pl.FP32],
                win: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return pl.store(pl.load(inp, [0, 0], [1, COLS]), [0, 0], win)

    @pl.function(type=pl.FunctionType.InCore)
    def pull(self, win: pld.DistributedTensor[[1, COLS], pl.FP32], out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
             right: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, COLS], pl.FP32]:
        got = pld.tile.remote_load(win, peer=right, offsets=[0, 0], shape=[1, COLS])
        return pl.store(got, [0, 0], out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, inputs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                  outputs: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
        win_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        for r in pl.range(pld.world_size()):
            self.publish(inputs[r], pld.window(win_buf, [1, COLS], dtype=pl.FP32), device=r)
        for r in pl.range(pld.world_size()):
            self.pull(pld.window(win_buf, [1, COLS], dtype=pl.FP32), outputs[r], (r + 1) % pld.world_size(),
                      device=r)
        return outputs


def _ops(program: Program) -> list[Op]:
    return [c.op for f in program.functions for c in function_calls(f)]


def test_host_phases_add_no_synchronisation() -> None:
    """Issue 21 item 4: per-rank program order only, no barrier between the two dispatch loops."""
    inputs = np.zeros((3, 1, COLS), np.float32)
    built, _ = translate(TwoPhase, 3, (inputs, np.zeros_like(inputs)))
    ops = _ops(built.program)
    assert Op.BARRIER not in ops and Op.WAIT not in ops and Op.NOTIFY not in ops
    assert ops.count(Op.REMOTE_LOAD) == 3  # one pull per rank block


def test_buffers_windows_and_per_rank_slices() -> None:
    inputs = np.arange(3 * COLS, dtype=np.float32).reshape(3, 1, COLS)
    built, _ = translate(TwoPhase, 3, (inputs, np.zeros_like(inputs)))
    kinds = {d.var.name: d.kind.value for d in built.program.buffers}
    assert kinds == {"win_buf": "window", "inputs": "local", "outputs": "local"}
    assert built.program.nranks == 3
    for rank in range(3):
        np.testing.assert_array_equal(built.inputs[rank]["inputs"], inputs[rank])
        assert not built.inputs[rank]["win_buf"].any()  # windows are zero at allocation
    assert {(w.rank, w.param, w.key) for w in built.writebacks} == {(r, "outputs", (r,)) for r in range(3)}


def test_origins_are_the_pypto_lines() -> None:
    built, _ = translate(TwoPhase, 2, (np.zeros((2, 1, COLS), np.float32),) * 2)
    stmts = [s for s in walk_stmts(built.program.functions[0].body.stmts) if getattr(s, "origin", None)]
    lines = {s.origin.line for s in stmts}  # type: ignore[union-attr]
    files = {s.origin.file for s in stmts}  # type: ignore[union-attr]
    assert files == {__file__}
    assert min(lines) >= 20


def test_host_tensor_slices_index_from_the_left() -> None:
    t = HostTensor("x", (), np.arange(12).reshape(2, 2, 3), pl.FP32, Direction.IN, (2, 2, 3))
    s = t[1][0]
    assert s.key == (1, 0) and s.shape == (3,) and s.dims == (3,)


@pl.program
class GatherRows:
    """A rank-2 tile stored into the trailing dims of a rank-3 tensor, at a row the host chose."""

    @pl.function(type=pl.FunctionType.InCore)
    def put_row(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.InOut[pl.Tensor[[1, 3, COLS], pl.FP32]],
                row: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, 3, COLS], pl.FP32]:
        return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, row, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[1, COLS], pl.FP32],
                  ys: pl.InOut[pl.Tensor[[1, 3, COLS], pl.FP32]]) -> pl.Tensor[[1, 3, COLS], pl.FP32]:
        self.put_row(xs, ys, 2)
        return ys


def test_lower_rank_tile_into_higher_rank_tensor() -> None:
    built, _ = translate(GatherRows, 1, (np.ones((1, COLS), np.float32), np.zeros((1, 3, COLS), np.float32)))
    calls = [c for f in built.program.functions for c in function_calls(f)]
    view = next(c for c in calls if c.op is Op.TENSOR_VIEW)
    store = next(c for c in calls if c.op is Op.TILE_STORE)
    assert [getattr(d, "value", None) for d in view.type.shape] == [3, COLS]  # type: ignore[union-attr]
    assert [getattr(o, "value", None) for o in store.args[1].items] == [2, 0]  # type: ignore[union-attr]


@pl.program
class PassedOn:
    """Dispatch results passed on: a window through pl.tile.store and a loop carry, and a tuple."""

    @pl.function(type=pl.FunctionType.InCore)
    def publish(self, inp: pl.Tensor[[1, COLS], pl.FP32], out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                win: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                ) -> tuple[pld.DistributedTensor[[1, COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        for _, (w,) in pl.range(1, init_values=(win,)):
            w = pl.tile.store(pl.load(inp, [0, 0], [1, COLS]), [0, 0], w)
            staged = pl.yield_(w)
        return staged, out

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish_orch(self, inp: pl.Tensor[[1, COLS], pl.FP32], out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                     win: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                     ) -> tuple[pld.DistributedTensor[[1, COLS], pl.FP32], pl.Tensor[[1, COLS], pl.FP32]]:
        win, out = self.publish(inp, out, win)
        return win, out

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, inputs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                  outputs: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
        win_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        win = pld.window(win_buf, [1, COLS], dtype=pl.FP32)
        for r in pl.range(pld.world_size()):
            win, _ = self.publish_orch(inputs[r], outputs[r], win, device=r)
        win = pld.tensor.allreduce(win, pld.window(sig_buf, [pld.world_size()], dtype=pl.INT32))
        return outputs


def test_a_dispatch_result_is_the_argument_it_returns() -> None:
    """``win, _ = self.orch(..., win, device=r)`` rebinds ``win`` to the window itself on every rank (also
    where another device runs that dispatch), so the host allreduce after the loop gets the window."""
    inputs = np.zeros((2, 1, COLS), np.float32)
    built, _ = translate(PassedOn, 2, (inputs, np.zeros_like(inputs)))
    (coll,) = built.collectives
    assert coll.op == "pld.tensor.allreduce" and coll.args[0].alloc.name == "win_buf"


@pl.program
class PyptoKeywords:
    """Every op called with pypto's own keyword names (``pl.cast(input=, target_type=)``, ``pl.read(src=,
    offset=)``, ``pl.write(dst=, offset=, value=)``, ``pld.tile.remote_store(src_tile=, ...)``), a
    tensor pushed by ``pld.tensor.remote_store`` (loaded whole on core first), a window allocated by
    shape and dtype."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], n: pl.Tensor[[1, 1], pl.INT32],
          win: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]) -> None:
        count = pl.cast(input=pl.read(src=n, offset=[0, 0]), target_type=pl.INDEX)
        pl.write(dst=n, offset=[0, 0], value=pl.cast(count + 1, target_type=pl.INT32))
        pld.tile.remote_store(src_tile=pl.load(x, [0, 0], [1, COLS]), target=win, peer=0, offsets=[0, 0])
        pld.tensor.remote_store(src=x, target=win, peer=0, offsets=[0, 0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[1, COLS], pl.FP32], ns: pl.InOut[pl.Tensor[[1, 1], pl.INT32]]) -> None:
        win_buf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)  # pypto's shape + dtype form
        self.k(xs, ns, pld.window(win_buf, [1, COLS], dtype=pl.FP32), device=0)


def test_ops_take_pyptos_keyword_names() -> None:
    built, _ = translate(PyptoKeywords, 1, (np.zeros((1, COLS), np.float32), np.zeros((1, 1), np.int32)))
    ops = _ops(built.program)
    assert ops.count(Op.PUT) == 2 and Op.TENSOR_READ in ops and Op.TENSOR_WRITE in ops
    assert built.program.buffer("win_buf").var.type.shape == (Const(1), Const(COLS))


BF16_COLS = 16  # a 32-byte row of bf16


@pl.program
class TileCasts:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, BF16_COLS], pl.BF16], y: pl.Out[pl.Tensor[[1, BF16_COLS], pl.BF16]]) -> None:
        wide = pl.cast(pl.load(x, [0, 0], [1, BF16_COLS]), pl.FP32)
        pl.store(pl.cast(wide, target_type=pl.BF16, mode="floor"), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[1, BF16_COLS], pl.BF16],
                  ys: pl.Out[pl.Tensor[[1, BF16_COLS], pl.BF16]]) -> None:
        self.k(xs, ys)


def test_a_tile_cast_keeps_pyptos_modes() -> None:
    """``pl.cast`` of a tile is ``tile.cast``; pypto's default mode is ``round``, a named mode is kept."""
    import ml_dtypes

    x = np.zeros((1, BF16_COLS), ml_dtypes.bfloat16)
    built, _ = translate(TileCasts, 1, (x, np.zeros_like(x)))
    casts = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_CAST]
    assert [(c.attr("dtype").value, c.attr("mode")) for c in casts] == [("fp32", CastMode.ROUND),
                                                                          ("bf16", CastMode.FLOOR)]


@pl.program
class TileSpellings:
    """``pl.tile.*`` (pypto's tile-op module) and a scalar subtracted from a tile."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
          w: pld.DistributedTensor[[1, COLS], pl.FP32]) -> None:
        me = pld.rank(pld.get_comm_ctx(w))
        t = pl.tile.muls(pl.tile.load(x, [0, 0], [1, COLS]), 2.0)
        pl.tile.store(pl.sub(pl.tile.sub(t, 1.5), pl.cast(me, pl.INT32)), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[1, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> None:
        w_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        self.k(xs, ys, pld.window(w_buf, [1, COLS], dtype=pl.FP32), device=0)


def test_tile_module_spellings_and_scalar_subtraction() -> None:
    built, _ = translate(TileSpellings, 1, (np.zeros((1, COLS), np.float32), np.zeros((1, COLS), np.float32)))
    calls = [c for f in built.program.functions for c in function_calls(f)]
    assert [c.op for c in calls if c.op in (Op.TILE_MULS, Op.TILE_ADDS, Op.TILE_SUB)] == [Op.TILE_MULS, Op.TILE_ADDS,
                                                                                            Op.TILE_ADDS]
    adds = [c for c in calls if c.op is Op.TILE_ADDS]
    assert getattr(adds[0].args[1], "value", None) == -1.5  # x - 1.5 is x + -1.5


@pl.program
class Aliases:
    """``cur = own`` then ``cur`` re-bound in a loop; a scalar parameter re-bound in a callee; a name bound
    to an expression of a variable that is re-bound afterwards."""

    @pl.function(type=pl.FunctionType.InCore)
    def bump(self, t: pl.Tensor[[1, COLS], pl.INT32], acc: pl.Scalar[pl.INT32]) -> None:
        for i in pl.range(2):
            acc = acc + pl.read(t, [0, i])
        pl.write(t, [0, 2], acc)

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], owns: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
          t: pl.InOut[pl.Tensor[[1, COLS], pl.INT32]]) -> None:
        own = pl.load(x, [0, 0], [1, COLS])
        cur = own
        for _ in pl.range(2):
            cur = pl.add(cur, own)
        pl.store(own, [0, 0], owns)
        first = pl.read(t, [0, 0])
        after = first + 1
        first = pl.read(t, [0, 1])
        pl.write(t, [0, 3], after)
        self.bump(t, first)
        pl.write(t, [0, 4], first)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[1, COLS], pl.FP32], owns: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                  ts: pl.InOut[pl.Tensor[[1, COLS], pl.INT32]]) -> None:
        self.k(xs, owns, ts)


def _assigned(stmts: Any) -> Counter[str]:
    return Counter(s.var.name for s in walk_stmts(stmts) if isinstance(s, Assign))


def test_a_name_rebound_never_changes_another_names_value() -> None:
    """pypto's names are SSA values: re-binding ``cur`` (an alias of ``own``) in a loop assigns a variable of
    ``cur``'s own; ``own``, the caller's scalar and a value computed from an earlier binding keep theirs."""
    x = np.zeros((1, COLS), np.float32)
    built, _ = translate(Aliases, 1, (x, x.copy(), np.zeros((1, COLS), np.int32)))
    (fn,) = built.program.functions
    in_loops = sum((_assigned(s.body.stmts) for s in walk_stmts(fn.body.stmts) if isinstance(s, For)), Counter())
    everywhere = _assigned(fn.body.stmts)
    calls = list(function_calls(fn))
    own = next(c for c in calls if c.op is Op.TILE_STORE).args[0]
    after, first = (c.args[2] for c in calls if c.op is Op.TENSOR_WRITE and c.args[1].items[1] in (Const(3), Const(4)))
    assert isinstance(own, Var) and own.name not in in_loops and everywhere[own.name] == 1
    assert isinstance(after, Var) and everywhere[after.name] == 1  # evaluated when bound, not re-read later
    assert isinstance(first, Var) and first.name not in in_loops  # bump's loop carries a copy
    assert sorted(in_loops) == ["acc", "cur", "ts_val_2"]


@pl.program
class TrueDivision:
    """``1.0 / D`` of closure numbers in a kernel (pypto-lib's RMSNorm scale): Python's value, a constant."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> None:
        pl.store(pl.mul(pl.load(x, [0, 0], [1, COLS]), 1.0 / COLS), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> None:
        self.k(x, y)


def test_true_division_of_python_numbers_folds() -> None:
    x = np.zeros((1, COLS), np.float32)
    built, _ = translate(TrueDivision, 1, (x, x.copy()))
    (fn,) = built.program.functions
    muls = [c for c in function_calls(fn) if c.op is Op.TILE_MULS]
    assert len(muls) == 1 and muls[0].args[1] == Const(1.0 / COLS, muls[0].args[1].type.dtype)
