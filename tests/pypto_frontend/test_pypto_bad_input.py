"""The bad-input catalogue: each mistake is one FrontendError at the user's file:line, before any job."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import AnnotationError, FrontendError
from pldemu.pypto.execute import run, translate
from pldemu.pypto.session import FrontendOptions
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
COLS = 8  # a 32-byte row of FP32 (ptoas's tile alignment)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)


def _where(err: pytest.ExceptionInfo[FrontendError], marker: str) -> None:
    assert err.value.file == __file__
    assert err.value.line == _line_of(marker), str(err.value)


def test_unknown_pl_name_at_decoration() -> None:
    with pytest.raises(FrontendError, match=re.escape("pl.no_such_op is not supported")) as err:
        @pl.program
        class Bad:
            @pl.function(type=pl.FunctionType.InCore)
            def k(self, x: pl.Tensor[[1, COLS], pl.FP32]) -> pl.Tensor[[1, COLS], pl.FP32]:
                return pl.no_such_op(x)  # MARK-unknown-pl
    _where(err, "MARK-unknown-pl")


def test_unknown_variable_at_decoration() -> None:
    with pytest.raises(FrontendError, match="unknown name 'undefined_size'") as err:
        @pl.program
        class Bad:
            @pl.function(type=pl.FunctionType.InCore)
            def k(self, x: pl.Tensor[[1, COLS], pl.FP32]) -> pl.Tensor[[1, COLS], pl.FP32]:
                return pl.load(x, [0, 0], [1, undefined_size])  # type: ignore[name-defined]  # noqa: F821  MARK-undef
    _where(err, "MARK-undef")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: pl.Tensor[COLS, pl.FP32], "pl.Tensor[[dims], dtype] expected"),
    (lambda: pld.DistributedTensor[[COLS, "x"], pl.FP32], "dim 'x' is not an int or pl.dynamic expression"),
    (lambda: pl.Out[[COLS], pl.FP32], "pl.Out[...] takes a tensor type"),
    (lambda: pl.Scalar[int], "pl.Scalar[dtype] expected"),
])
def test_bad_annotation_is_one_error_at_its_line(make, message: str) -> None:  # type: ignore[no-untyped-def]
    """A TypeError (as Python's own subscript errors) that is a FrontendError at the line that wrote it."""
    with pytest.raises(AnnotationError, match=re.escape(message)) as err:
        make()
    assert isinstance(err.value, TypeError) and err.value.file == __file__
    assert err.value.line == inspect.getsourcelines(make)[1]


def test_method_without_pl_function() -> None:
    with pytest.raises(FrontendError, match=re.escape("helper of @pl.program Bad is not a @pl.function")):
        @pl.program
        class Bad:
            def helper(self) -> None:
                pass


def _host_program(body: str):  # type: ignore[no-untyped-def]
    """A factory in pypto's style: the HOST body varies, the kernels are fixed."""

    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def copy(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                 w: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]) -> pl.Tensor[[1, COLS], pl.FP32]:
            while True:  # MARK-while
                pass
            return y

        @pl.function(type=pl.FunctionType.InCore)
        def fine(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                 w: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]) -> pl.Tensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)

        @pl.function(type=pl.FunctionType.InCore)
        def loaded(self, x: pl.Tensor[[1, COLS], pl.FP32],
                   w: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]) -> pl.Tensor[[1, COLS], pl.FP32]:
            return pl.load(x, [0, 0], [1, COLS])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],  # MARK-host-orch
                      ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
            buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            w = pld.window(buf, [1, COLS], dtype=pl.FP32)
            if body == "while":
                for r in pl.range(pld.world_size()):
                    self.copy(xs[r], ys[r], w, device=r)
            elif body == "data-dependent":
                if xs[0] > 0:  # MARK-data-dependent
                    self.fine(xs[0], ys[0], w)
            elif body == "two-writers":
                for r in pl.range(pld.world_size()):
                    self.fine(xs[0], ys[0], w, device=r)  # MARK-two-writers
            elif body == "written-then-read":
                self.fine(xs[0], ys[0], w, device=0)
                self.fine(ys[0], ys[1], w, device=1)  # MARK-written-then-read
            elif body == "opaque-result":
                tile = self.loaded(xs[0], w, device=0)
                self.fine(tile, ys[0], w, device=1)  # MARK-opaque-result
            elif body == "bad-device":
                self.fine(xs[0], ys[0], w, device=7)  # MARK-bad-device
            elif body == "unsignalled-in-loop":
                for _ in pl.range(2):
                    w = pld.tensor.allreduce(w)  # MARK-unsignalled-in-loop
            elif body == "unsignalled-ring":
                w = pld.tensor.allreduce(w, mode="ring")  # MARK-unsignalled-ring
            elif body == "unsignalled-barrier":
                pld.tensor.barrier()  # MARK-unsignalled-barrier
            elif body == "barrier-core-num":
                pld.tensor.barrier(w, core_num=2)  # MARK-barrier-core-num
            elif body == "ring-max":
                sig = pld.window(pld.alloc_window_buffer(3 * 2 * 4), [3, pld.world_size()], dtype=pl.INT32)
                w = pld.tensor.allreduce(w, sig, op=pld.ReduceOp.Max, mode="ring")  # MARK-ring-max
            elif body == "ring-odd":
                sig = pld.window(pld.alloc_window_buffer(3 * 2 * 4), [3, pld.world_size()], dtype=pl.INT32)
                odd = pld.window(buf, [1, 3], dtype=pl.FP32)
                odd = pld.tensor.allreduce(odd, sig, op=pld.ReduceOp.Sum, mode="ring")  # MARK-ring-odd
            elif body == "allgather-fp16":
                sig = pld.window(pld.alloc_window_buffer(2 * 4), [pld.world_size()], dtype=pl.INT32)
                rows = pld.window(pld.alloc_window_buffer(2 * COLS * 2), [pld.world_size(), COLS], dtype=pl.FP16)
                rows = pld.tensor.allgather(pld.window(buf, [1, COLS], dtype=pl.FP16), rows, sig)  # MARK-allgather-fp16
            elif body == "reduce-scatter-max":
                sig = pld.window(pld.alloc_window_buffer(2 * 4), [pld.world_size()], dtype=pl.INT32)
                rows = pld.window(pld.alloc_window_buffer(2 * COLS * 4), [pld.world_size(), COLS], dtype=pl.FP32)
                rows = pld.tensor.reduce_scatter(rows, sig, op=pld.ReduceOp.Max)  # MARK-reduce-scatter-max
            else:
                for r in pl.range(pld.world_size()):
                    self.fine(xs[r], ys[r], w, device=r)
            return ys

    return Prog


def _args(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros((n, 1, COLS), np.float32)
    return x, np.zeros_like(x)


@pytest.mark.parametrize(("body", "marker", "message"), [
    ("while", "MARK-while", "while condition `True` is always true: the loop never ends"),
    ("data-dependent", "MARK-data-dependent", "host control flow must not depend on tensor data"),
    ("two-writers", "MARK-two-writers", "is written by device 0 and device 1"),
    ("written-then-read", "MARK-written-then-read", "host tensor ys[0] is written by device 0 and read by device 1"),
    ("opaque-result", "MARK-opaque-result", "passes on a result of self.loaded (line"),
    ("bad-device", "MARK-bad-device", "device=7 is outside the 2 devices"),
    ("unsignalled-in-loop", "MARK-unsignalled-in-loop", "without an explicit signal is not supported inside a HOST loop"),
    ("unsignalled-ring", "MARK-unsignalled-ring", "mode='ring') at HOST level needs an explicit signal"),
    ("unsignalled-barrier", "MARK-unsignalled-barrier", "pld.tensor.barrier: missing signal (pypto synthesises"),
    ("barrier-core-num", "MARK-barrier-core-num", "pld.tensor.barrier: unknown keyword argument 'core_num'"),
    # pypto's HOST builtins' deducers (src/ir/op/distributed/collective.cpp)
    ("ring-max", "MARK-ring-max", "pypto refuses it: builtin.tensor.allreduce_ring op must be ReduceOp.Sum (got Max)"),
    ("ring-odd", "MARK-ring-odd", "builtin.tensor.allreduce_ring requires the src data size (product of shape = 3) to "
                                  "be an exact multiple of the rank count (2)"),
    ("allgather-fp16", "MARK-allgather-fp16", "builtin.tensor.allgather currently supports only dtype=FP32; got FP16"),
    ("reduce-scatter-max", "MARK-reduce-scatter-max", "builtin.tensor.reduce_scatter op must be ReduceOp.Sum (got Max)"),
])
def test_host_and_device_mistakes(body: str, marker: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_host_program(body), 2, _args(2))
    _where(err, marker)


def test_rank_count_against_nr() -> None:
    compiled = ir.compile(_host_program("ok"), distributed_config=DistributedConfig(device_ids=[0, 1]))
    with pytest.raises(FrontendError, match=re.escape("NR = 3 from the host tensors' shapes, but the program "
                                                      "runs on 2 devices")) as err:
        compiled(*_args(3))
    _where(err, "MARK-host-orch")


def test_wrong_host_argument_count() -> None:
    compiled = ir.compile(_host_program("ok"), distributed_config=DistributedConfig(device_ids=[0, 1]))
    with pytest.raises(FrontendError, match="takes 2 host arguments"):
        compiled(*_args(2), _args(2)[0])  # one Out left out is pypto's return-style call; one too many is not


@pytest.mark.parametrize(("ids", "message"), [([], "must not be empty"), ([0, 0], "must be distinct")])
def test_distributed_config_checks(ids: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DistributedConfig(device_ids=ids)


@pl.program
class LaneSignal:
    """A HOST allreduce of 3 lanes (pypto's core_num) on a [world_size, 2] signal, one column short, which
    pldemu's mesh recipe refuses: the refusal is at the host call's line, not a traceback out of the lowering."""

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32]) -> None:
        buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        sig_buf = pld.alloc_window_buffer(pld.world_size() * 2 * pl.INT32.get_byte())
        d = pld.window(buf, [1, COLS], dtype=pl.FP32)
        d = pld.tensor.allreduce(d, pld.window(sig_buf, [pld.world_size(), 2], dtype=pl.INT32),  # MARK-lanes
                                 core_num=3)


def test_a_refused_lowering_is_one_error_at_the_host_call(tmp_path: Path) -> None:
    with pytest.raises(FrontendError, match=re.escape("LowerCompositeOps refused it: pld.tensor.allreduce: "
                                                      "argument 'signal' must be [NR, S] with a static S >= lanes = 3")) as err:
        run(LaneSignal, 2, (np.zeros((2, 1, COLS), np.float32),), tmp_path, FrontendOptions(codegen_only=True))
    _where(err, "MARK-lanes")


@pl.program
class InCoreLanes:
    """pypto's InCore allreduce is one block: core_num > 1 is for a HOST orchestrator only."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
          sig: pl.InOut[pld.DistributedTensor[[NR, 2], pl.INT32]]) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return pld.tensor.allreduce(w, sig, core_num=2)  # MARK-incore-lanes

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32]) -> None:
        buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        sig_buf = pld.alloc_window_buffer(pld.world_size() * 2 * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.k(pld.window(buf, [1, COLS], dtype=pl.FP32),
                   pld.window(sig_buf, [pld.world_size(), 2], dtype=pl.INT32), device=r)


def test_core_num_inside_a_kernel_is_refused() -> None:
    with pytest.raises(FrontendError, match=re.escape("core_num > 1 is supported only in a HOST orchestrator")) as err:
        translate(InCoreLanes, 2, (np.zeros((2, 1, COLS), np.float32),))
    _where(err, "MARK-incore-lanes")


class _NoRepr:
    def __repr__(self) -> str:
        raise AssertionError("a captured program's repr reached its module's names")


def test_a_captured_programs_repr_leaves_out_the_names_it_sees() -> None:
    """pytest's report of a failing test reprs every frame's arguments, pldemu's own frames included: a
    captured program's closure (its module's globals, which hold the program again) must stay out of it, or
    the report of one FrontendError takes minutes and gigabytes."""
    @pl.program
    class Small:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[1, COLS], pl.FP32]) -> pl.Tensor[[1, COLS], pl.FP32]:
            return x

    poisoned = dataclasses.replace(Small, closure={"trap": _NoRepr()},
                                   functions={n: dataclasses.replace(f, closure={"trap": _NoRepr()})
                                              for n, f in Small.functions.items()})
    assert "Small" in repr(poisoned)
