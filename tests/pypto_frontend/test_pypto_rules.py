"""pypto's refusals that pldemu applies too: each program breaking one is one FrontendError at its line
(pypto's or ptoas's wording), and the corrected program passes. One factory per rule family in pypto's
style; ``variant`` picks the statement (it folds at translation time, so only that one is translated)."""

from __future__ import annotations

import inspect
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
COLS = 8  # a 32-byte row of FP32: the narrowest tile ptoas takes
NARROW = 4  # a 16-byte row: refused
LAST = 1


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


def _where(err: pytest.ExceptionInfo[FrontendError], marker: str) -> None:
    assert err.value.file == __file__
    assert err.value.line == _line_of(marker), str(err.value)


def _run(prog: object, *args: np.ndarray) -> None:
    ir.compile(prog, distributed_config=DistributedConfig(device_ids=[0, 1]))(*args)


# -- device scalars: float arithmetic, casts, and where a scalar parameter may sit -----------------------


def _hello_rank(variant: str):  # type: ignore[no-untyped-def]
    """pypto's 01_hello_rank (``y = x + rank``, rank a scalar parameter the host passes), by variant."""

    @pl.program
    class HelloRank:
        @pl.function(type=pl.FunctionType.InCore)
        def add_rank(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                     w: pld.DistributedTensor[[1, COLS], pl.FP32], rank: pl.Scalar[pl.INT32]
                     ) -> pl.Tensor[[1, COLS], pl.FP32]:
            tile = pl.load(x, [0, 0], [1, COLS])
            if variant == "float-add":
                tile = pl.add(tile, pl.cast(rank, target_type=pl.FP32) + 1.0)  # MARK-float-add
            elif variant == "float-and-int":
                tile = pl.add(tile, pl.cast(rank, target_type=pl.FP32) * 2)  # MARK-float-and-int
            elif variant == "index-cast":
                tile = pl.add(tile, pl.cast(rank + 0, target_type=pl.FP32))  # MARK-index-cast
            elif variant == "rank-cast":
                me = pld.rank(pld.get_comm_ctx(w))
                tile = pl.add(tile, pl.cast(me + 1, target_type=pl.FP32))  # MARK-rank-cast
            elif variant == "loop-var-cast":
                for i in pl.range(1):
                    tile = pl.add(tile, pl.cast(i, target_type=pl.FP32))  # MARK-loop-var-cast
            elif variant == "scalar-mode":
                tile = pl.add(tile, pl.cast(rank, target_type=pl.FP32, mode="floor"))  # MARK-scalar-mode
            elif variant == "float-mul":  # ptoas lowers a scalar mulf (only addf has no lowering)
                tile = pl.add(tile, pl.cast(rank, target_type=pl.FP32) * 2.0)
            elif variant == "index-int-float":  # index -> INT32 -> FP32: no cast between float and index
                tile = pl.add(tile, pl.cast(pl.cast(rank + 1, target_type=pl.INT32), target_type=pl.FP32))
            else:
                tile = pl.add(tile, pl.cast(rank, target_type=pl.FP32))
            return pl.store(tile, [0, 0], y)

        @pl.function(type=pl.FunctionType.InCore)
        def add_bias(self, x: pl.Tensor[[1, COLS], pl.FP32], bias: pl.Scalar[pl.FP32],
                     y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> pl.Tensor[[1, COLS], pl.FP32]:
            return pl.store(pl.add(pl.load(x, [0, 0], [1, COLS]), bias), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(self, x: pl.Tensor[[1, COLS], pl.FP32], rank: pl.Scalar[pl.INT32],
                     y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]], w: pld.DistributedTensor[[1, COLS], pl.FP32]
                     ) -> pl.Tensor[[1, COLS], pl.FP32]:
            if variant == "orchestration-float-add":  # scalar float math on the AICPU is C++: legal
                return self.add_bias(x, pl.cast(rank, target_type=pl.FP32) + 1.0, y)
            return self.add_rank(x, y, w, rank)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
            buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            for r in pl.range(pld.world_size()):
                self.per_rank(xs[r], r, ys[r], pld.window(buf, [1, COLS], dtype=pl.FP32), device=r)
            return ys

    return HelloRank


def _args(n: int = 2) -> tuple[np.ndarray, np.ndarray]:
    xs = np.arange(n * COLS, dtype=np.float32).reshape(n, 1, COLS)
    return xs, np.zeros_like(xs)


@pytest.mark.parametrize(("variant", "message"), [
    ("float-add", "ptoas refuses it (failed to legalize operation 'arith.addf' that was explicitly marked illegal)"),
    ("float-and-int", "Operator 'mul' requires same numeric dtype category, got fp32 and index"),
    ("index-cast", "Cast between float and index types is not supported (pl.cast of an index scalar to fp32"),
    ("rank-cast", "Cast between float and index types is not supported"),
    ("loop-var-cast", "Cast between float and index types is not supported"),
    ("scalar-mode", "pl.cast: Scalar inputs do not support non-default mode, got mode='floor'"),
])
def test_device_scalar_refusals(variant: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_hello_rank(variant), 2, _args())
    _where(err, f"MARK-{variant}")


@pytest.mark.parametrize(("variant", "bias"), [("float-mul", lambda r: 2.0 * r),
                                               ("orchestration-float-add", lambda r: r + 1.0)])
def test_device_scalar_forms_pypto_takes(variant: str, bias) -> None:  # type: ignore[no-untyped-def]
    built, _ = translate(_hello_rank(variant), 2, _args())
    consts = {c.value for c in _scalar_operands(built)}
    assert consts == {bias(0), bias(1)}


def _scalar_operands(built) -> list:  # type: ignore[no-untyped-def]
    from pldemu.ir.ops import Op
    from pldemu.ir.walk import function_calls

    return [c.args[1] for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_ADDS]


def _task_scalars(variant: str):  # type: ignore[no-untyped-def]
    """The AI core's scalar rules in a ``pl.at`` / ``pl.spmd`` body of an Orchestration: pypto outlines it into
    an InCore kernel, so its scalar expressions go through the same PTO code generator and ptoas."""

    @pl.program
    class TaskScalars:
        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(self, x: pl.Tensor[[4, COLS], pl.FP32], y: pl.Out[pl.Tensor[[4, COLS], pl.FP32]],
                     w: pld.DistributedTensor[[1, COLS], pl.FP32], bias: pl.Scalar[pl.FP32]
                     ) -> pl.Tensor[[4, COLS], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(w))
            f = pl.cast(me + 1, pl.FP32)  # the orchestration's C++: legal
            if variant == "spmd-index-cast":
                for b in pl.spmd(4, name_hint="rows"):
                    y[b:b + 1, :] = pl.mul(x[b:b + 1, :], pl.cast(b + 1, pl.FP32))  # MARK-spmd-index-cast
            else:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="scale"):
                    if variant == "at-rank-cast":
                        y[:, :] = pl.mul(x[:, :], pl.cast(me + 1, pl.FP32))  # MARK-at-rank-cast
                    elif variant == "at-float-add":
                        y[:, :] = pl.mul(x[:, :], bias + 1.0)  # MARK-at-float-add
                    else:
                        y[:, :] = pl.mul(pl.mul(x[:, :], f), bias * 2.0)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 4, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 4, COLS], pl.FP32]]) -> pl.Tensor[[NR, 4, COLS], pl.FP32]:
            buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            for r in pl.range(pld.world_size()):
                self.per_rank(xs[r], ys[r], pld.window(buf, [1, COLS], dtype=pl.FP32), 1.5, device=r)
            return ys

    return TaskScalars


@pytest.mark.parametrize(("variant", "message"), [
    ("at-rank-cast", "Cast between float and index types is not supported"),
    ("spmd-index-cast", "Cast between float and index types is not supported"),
    ("at-float-add", "ptoas refuses it (failed to legalize operation 'arith.addf'"),
])
def test_task_body_scalar_refusals(variant: str, message: str) -> None:
    xs = np.ones((2, 4, COLS), np.float32)
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_task_scalars(variant), 2, (xs, np.zeros_like(xs)))
    _where(err, f"MARK-{variant}")


def test_task_body_scalar_forms_pypto_takes() -> None:
    xs = np.ones((2, 4, COLS), np.float32)
    translate(_task_scalars("ok"), 2, (xs, np.zeros_like(xs)))


@pytest.mark.launcher
@pytest.mark.parametrize(("variant", "offset"), [("ok", 0), ("index-int-float", 1)])
def test_corrected_hello_rank_runs(variant: str, offset: int) -> None:
    """01_hello_rank's form (cast the INT32 parameter, add it in a tile op), with the rank parameter between
    tensors in the dispatched function's signature: pypto e2d0f78 takes that (see docs/pypto-frontend.md)."""
    xs, ys = _args()
    _run(_hello_rank(variant), xs, ys)
    np.testing.assert_array_equal(ys, xs + (np.arange(2) + offset).reshape(2, 1, 1))


# -- device=: the forms pypto resolves, every device dispatched, round-robin without it ----------------


def _dispatch(variant: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Dispatch:
        @pl.function(type=pl.FunctionType.InCore)
        def copy(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]
                 ) -> pl.Tensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)

        @pl.function(type=pl.FunctionType.InCore)
        def publish(self, x: pl.Tensor[[1, COLS], pl.FP32], w: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                    ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], w)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],  # MARK-uncovered
                      ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
            buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            if variant == "expression":
                for r in pl.range(pld.world_size()):
                    self.copy(xs[r], ys[r], device=(r + 1) % pld.world_size())  # MARK-expression
            elif variant == "step":
                for r in pl.range(0, 2, 2):
                    self.copy(xs[r], ys[r], device=r)  # MARK-step
            elif variant == "dynamic-bound":
                for r in pl.range(NR):
                    self.copy(xs[r], ys[r], device=r)  # MARK-dynamic-bound
            elif variant == "loop-local":
                for r in pl.range(pld.world_size()):
                    d = r
                    self.copy(xs[r], ys[r], device=d)  # MARK-loop-local
            elif variant == "world-minus-one":
                self.copy(xs[0], ys[0], device=pld.world_size() - 1)  # MARK-world-minus-one
            elif variant == "uncovered":
                self.copy(xs[0], ys[0], device=0)
            elif variant == "window-no-device":
                self.publish(xs[0], pld.window(buf, [1, COLS], dtype=pl.FP32))  # MARK-window-no-device
            elif variant == "constants":
                first = 0
                self.copy(xs[0], ys[0], device=first)
                self.copy(xs[LAST], ys[LAST], device=LAST)
            elif variant == "constant-range":
                for r in pl.range(2):
                    self.copy(xs[r], ys[r], device=r)
            elif variant == "round-robin":
                self.copy(xs[0], ys[0])
                self.copy(xs[1], ys[1])
            else:
                for r in pl.range(pld.world_size()):
                    self.publish(xs[r], pld.window(buf, [1, COLS], dtype=pl.FP32), device=r)
                    self.copy(xs[r], ys[r], device=r)
            return ys

    return Dispatch


@pytest.mark.parametrize(("variant", "message"), [
    ("expression", "device=(r + 1) % pld.world_size(): MaterializeCommDomainScopes: device= expression must be "
                   "ConstInt or the induction var of pl.range"),
    ("step", "device=r: MaterializeCommDomainScopes: device=r over a non-unit-step loop is not supported (step=2)"),
    ("dynamic-bound", "device=r loop bound must be ConstInt or pld.system.world_size() (pypto refuses it"),
    ("loop-local", "device=d: MaterializeCommDomainScopes: device= Var is not the induction variable of any "
                   "enclosing pl.range loop"),
    ("world-minus-one", "device= expression must be ConstInt or the induction var of pl.range"),
    ("uncovered", "device 1 of the 2 gets no dispatch: pypto's dispatch loop must cover every device"),
    ("window-no-device", "self.publish(...) passes a window (pld.DistributedTensor) and has no device=: pypto "
                         "refuses it (Call passing DistributedTensor args must carry device= attr)"),
])
def test_device_form_refusals(variant: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_dispatch(variant), 2, _args())
    _where(err, f"MARK-{variant}")


@pytest.mark.parametrize("variant", ["constants", "constant-range", "round-robin", "ok"])
def test_device_forms_pypto_takes(variant: str) -> None:
    """Constants (a closure int, a host name bound to one outside any loop), a constant-bounded loop, and
    no device= at all: pypto's runtime deals those dispatches round-robin, so ys[k] is written on device k."""
    built, _ = translate(_dispatch(variant), 2, _args())
    assert {(w.rank, w.key) for w in built.writebacks if w.param == "ys"} == {(0, (0,)), (1, (1,))}


@pytest.mark.launcher
def test_dispatches_without_device_go_round_robin() -> None:
    xs, ys = _args()
    _run(_dispatch("round-robin"), xs, ys)
    np.testing.assert_array_equal(ys, xs)


# -- tiles: ptoas's 32-byte alignment of a tile's row (its column, for an [R, 1] tile) -------------------


def _tiles(variant: str):  # type: ignore[no-untyped-def]
    """09-barrier's observable: each device's [2, 1] INT32 signal window, read back after a notify."""

    @pl.program
    class Tiles:
        @pl.function(type=pl.FunctionType.InCore)
        def observe(self, x: pl.Tensor[[1, NARROW], pl.FP32], y: pl.Out[pl.Tensor[[2, 1], pl.INT32]],
                    w: pld.DistributedTensor[[1, NARROW], pl.FP32], sig: pld.DistributedTensor[[2, 1], pl.INT32],
                    wide: pld.DistributedTensor[[8, 1], pl.INT32]) -> pl.Tensor[[2, 1], pl.INT32]:
            me = pld.rank(pld.get_comm_ctx(sig))
            cells = sig
            if variant == "aligned-column":
                cells = wide
            pld.system.notify(cells, peer=me, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(cells, offsets=[me, 0], expected=1, cmp=pld.WaitCmp.Ge)
            if variant == "window-column":
                y = pl.store(pl.load(sig, [0, 0], [2, 1]), [0, 0], y)  # MARK-window-column
            elif variant == "tensor-row":
                pl.load(x, [0, 0], [1, NARROW])  # MARK-tensor-row
            elif variant == "remote-row":
                pld.tile.remote_load(w, peer=me, offsets=[0, 0], shape=[1, NARROW])  # MARK-remote-row
            elif variant == "tensor-op":
                pld.tensor.remote_store(pl.tensor.add(x, x), w, me, [0, 0])  # MARK-tensor-op
            elif variant == "aligned-column":  # [8, 1] INT32: a 32-byte column, narrowed to the 2 cells
                y = pl.store(pl.load(wide, [0, 0], [8, 1], valid_shape=[2, 1]), [0, 0], y)
            else:  # 09-barrier's way: cell by cell
                for i in pl.range(2):
                    pl.write(y, [i, 0], pl.read(sig, [i, 0]))
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, NARROW], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 2, 1], pl.INT32]]) -> pl.Tensor[[NR, 2, 1], pl.INT32]:
            w_buf = pld.alloc_window_buffer(NARROW * pl.FP32.get_byte())
            sig_buf = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
            wide_buf = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                self.observe(xs[r], ys[r], pld.window(w_buf, [1, NARROW], dtype=pl.FP32),
                             pld.window(sig_buf, [2, 1], dtype=pl.INT32), pld.window(wide_buf, [8, 1], dtype=pl.INT32),
                             device=r)
            return ys

    return Tiles


def _tile_args() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((2, 1, NARROW), np.float32), np.full((2, 2, 1), -1, np.int32)


@pytest.mark.parametrize(("variant", "message"), [
    ("window-column", "pl.load of a [2, 1] int32 tile: ptoas refuses it: 'pto.alloc_tile' op expects result "
                      "col-major none_box tile column byte size (rows * sizeof(dtype)) to be 32-byte aligned, "
                      "but got 8 bytes"),
    ("tensor-row", "pl.load of a [1, 4] fp32 tile: ptoas refuses it: 'pto.alloc_tile' op expects result row-major "
                   "none_box tile row byte size (cols * sizeof(dtype)) to be 32-byte aligned, but got 16 bytes"),
    ("remote-row", "pld.tile.remote_load of a [1, 4] fp32 tile: ptoas refuses it"),
    ("tensor-op", "pl.tensor.add's whole-tensor load of a [1, 4] fp32 tile: ptoas refuses it"),
])
def test_narrow_tile_refusals(variant: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_tiles(variant), 2, _tile_args())
    _where(err, f"MARK-{variant}")


@pytest.mark.launcher
@pytest.mark.parametrize("variant", ["cells", "aligned-column"])
def test_corrected_signal_readback_runs(variant: str) -> None:
    xs, ys = _tile_args()
    _run(_tiles(variant), xs, ys)
    want = np.zeros((2, 2, 1), np.int32)
    want[0, 0, 0] = want[1, 1, 0] = 1  # each device notified its own row
    np.testing.assert_array_equal(ys, want)
