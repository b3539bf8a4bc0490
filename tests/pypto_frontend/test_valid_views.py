"""An orchestration-level ``pl.slice(..., valid_shape=)`` is pypto's view carrying its valid shape: a read
through it (``pl.load``, a subscript or ``pl.slice`` in a kernel, a view of it) is narrowed to the part of the
valid box under the window (pypto's InferWindowReadValidShape), also for a run-time valid extent; a kernel's
tensor parameter is its annotation's type, so a kernel reads the whole window. The end-to-end program is
hunt_programs/hunt3_valid_views.py (plain and shaken schedules, test_hunt_programs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import Const, ScalarType, TensorType, Var, format_expr
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl
from pldemu.pypto.translate.regions import Region, TensorView, window_valid

R, N = 8, 32


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


def test_window_valid_is_the_valid_part_under_the_window() -> None:
    base = Var("x", TensorType(DType.FP32, (Const(16), Const(N))))
    view = TensorView(base, Region((4, 0), (R, N)), (5, N))
    assert window_valid(view, (2, 0), (4, N), None) == [3, N]
    assert window_valid(view, (2, 0), (4, N), [2, 16]) == [2, 16]
    assert window_valid(view, (6, 0), (2, N), None) == [0, N]  # wholly past the valid rows: empty
    assert window_valid(view.whole(), (2, 0), (4, N), None) is None
    assert window_valid(base, (2, 0), (4, N), [1, N]) == [1, N]
    rows = Var("rows", ScalarType(DType.INDEX))
    dynamic = TensorView(base, Region((4, 0), (R, N)), (rows, N))
    (got, cols) = window_valid(dynamic, (2, 0), (4, N), None) or []
    assert format_expr(got) == "min(max(rows - 2, 0), 4)" and cols == N


@pl.jit.inline
def tail_sums(v: pl.Tensor, out: pl.Tensor):
    inner = v[2:6, :]  # a view of the view
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tail"):
        pl.store(pl.load(inner, [0, 0], [4, N]), [0, 0], out)
    return out


@pl.jit
def tail_orch(x: pl.Tensor[[16, N], pl.FP32], out: pl.Out[pl.Tensor[[4, N], pl.FP32]]):
    for r0 in pl.range(0, 16, R):
        v = pl.slice(x, [R, N], [r0, 0], valid_shape=[pl.min(13 - r0, R), N])
        out = tail_sums(v, out)
    return out


def test_a_run_time_valid_extent_narrows_the_load_through_a_view_of_the_view() -> None:
    args = [np.zeros((16, N), np.float32), np.zeros((4, N), np.float32)]
    built, _ = translate(tail_orch.compile(*args).program, 1, args)
    (load,) = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_LOAD]
    assert load.args[0].name == "x" and format_expr(load.args[1].items[0]) == "r0 + 2"
    rows, cols = (format_expr(e) for e in load.args[3].items)
    assert "min(13 - r0, 8)" in rows and rows.startswith("min(max(") and cols == str(N)


@pl.jit.incore
def double(t: pl.Tensor[[R, N], pl.FP32], out: pl.Out[pl.Tensor[[R, N], pl.FP32]]):
    x = pl.load(t, [0, 0], [R, N])
    return pl.store(pl.add(x, x), [0, 0], out)


@pl.jit.inline
def at_double(v: pl.Tensor, out: pl.Tensor):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="at_double"):
        x = pl.load(v, [0, 0], [R, N])
        out = pl.store(pl.add(x, x), [0, 0], out)
    return out


@pl.jit
def kernel_orch(t: pl.Tensor[[16, N], pl.FP32], k: pl.Out[pl.Tensor[[R, N], pl.FP32]],
                a: pl.Out[pl.Tensor[[R, N], pl.FP32]]):
    v = pl.slice(t, [R, N], [2, 0], valid_shape=[3, N])
    k = double(v, k)
    a = at_double(v, a)
    return a


@pytest.mark.launcher
def test_a_kernel_reads_the_whole_window_a_task_only_the_valid_rows() -> None:
    t = np.arange(16 * N, dtype=np.float32).reshape(16, N)
    k, a = np.full((R, N), -1.0, np.float32), np.full((R, N), -1.0, np.float32)
    kernel_orch(t, k, a)
    np.testing.assert_array_equal(k, 2 * t[2:10])  # pypto compiles the kernel's parameter fully valid
    want = np.full((R, N), -1.0, np.float32)
    want[:3] = 2 * t[2:5]  # the outlined task's parameter keeps the view's type: 3 rows loaded and stored
    np.testing.assert_array_equal(a, want)
