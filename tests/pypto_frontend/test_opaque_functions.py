"""``@pl.function`` without a type (pypto's default, Opaque): promoted to an Orchestration when its body has
an InCore scope (pypto's OutlineIncoreScopes), spliced where it is called when it has none; and
``pypto.runtime.execute_compiled(work_dir, args)``, pypto-lib's ``run()`` of a ``@pl.program``, running what
``ir.compile`` built into that folder in this session (a ctypes scalar passes its value)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.capture import Kind
from pldemu.pypto.finder import active
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.runtime import execute_compiled

ROWS, COLS = 8, 16


@pl.program
class OpaqueScale:
    """``y = (x * s + 1) * 2`` by an Opaque entry with one pl.at scope and a bare Opaque helper."""

    @pl.function
    def plus_one_twice(self, t: pl.Tile[[ROWS, COLS], pl.FP32]) -> pl.Tile[[ROWS, COLS], pl.FP32]:
        u = pl.add(t, 1.0)
        return pl.add(u, u)

    @pl.function(type=pl.FunctionType.Opaque)
    def entry(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
              s: pl.Scalar[pl.FP32]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="scale"):
            t = pl.mul(pl.load(x, [0, 0], [ROWS, COLS]), s)
            y = pl.store(self.plus_one_twice(t), [0, 0], y)
        return y


def test_an_opaque_function_is_an_orchestration_with_a_scope_and_a_helper_without() -> None:
    kinds = {name: fn.kind for name, fn in OpaqueScale.functions.items()}  # type: ignore[attr-defined]
    assert kinds == {"plus_one_twice": Kind.OPAQUE, "entry": Kind.ORCHESTRATION}


@pytest.mark.launcher
def test_execute_compiled_runs_what_ir_compile_built_there(tmp_path: Path) -> None:
    x = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    y = np.zeros_like(x)
    with active():
        compiled = ir.compile(OpaqueScale, output_dir=str(tmp_path / "build"))
        execute_compiled(compiled.output_dir, [x, y, ctypes.c_float(3.0)], platform="a2a3sim", device_id=0)
    expected = ((x * np.float32(3.0)) + np.float32(1.0)) * np.float32(2.0)
    np.testing.assert_array_equal(y, expected)


def test_execute_compiled_of_a_folder_nothing_compiled_is_refused(tmp_path: Path) -> None:
    with active(), pytest.raises(FileNotFoundError, match=r"is not a program pypto\.ir\.compile built"):
        execute_compiled(tmp_path, [], platform="a2a3sim", device_id=0)
    with pytest.raises(ValueError, match="level=3 is not supported"):
        execute_compiled(tmp_path, [], platform="a2a3sim", device_id=0, level=3)


def test_only_the_latest_builds_are_kept(tmp_path: Path) -> None:
    from pldemu.pypto.finder import KEPT_BUILDS, compiled_at

    with active():
        first = ir.compile(OpaqueScale, output_dir=str(tmp_path / "b0"))
        for i in range(1, KEPT_BUILDS + 1):
            ir.compile(OpaqueScale, output_dir=str(tmp_path / f"b{i}"))
        assert compiled_at(first.output_dir) is None
        assert compiled_at(tmp_path / f"b{KEPT_BUILDS}") is not None
