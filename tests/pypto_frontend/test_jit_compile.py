"""``compile()`` translates: a ``pl.jit`` function's ``fn.compile(...)`` (pypto-lib's ``--compile-only``) and
a class's ``ir.compile`` translate the program into pldemu's IR for what they know, so a construct pldemu
refuses is one error at its line at compile time, and the later call of that kind reuses the translation.
What compile cannot know (a dynamic dim's extent or a scalar's value in signature mode; sample tensors
whose ``NR`` is not the device count) is said, not guessed."""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from mpi_launch import IN_JOB_ENV, REPO_ROOT, job_env, run_tracked

from pldemu.ir import format_program
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.jit.specialize import UntranslatedWarning
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.surface.runtime import RunConfig

COLS = 16
NR = pl.dynamic("NR")
ROWS = pl.dynamic("ROWS")


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


def _line_of(marker: str) -> int:
    src, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(i for i, line in enumerate(src, 1) if marker in line and "_line_of" not in line)


def _config(n: int) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))))


@pl.jit.incore
def refused_kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    for _ in pl.range(1):
        t = pl.load(x, [0, 0], [1, COLS])
    else:  # MARK-for-else
        t = pl.load(x, [0, 0], [1, COLS])
    return pl.store(t, [0, 0], y)


@pl.jit.incore
def copy_kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)


@pl.jit
def copy_orch(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return copy_kernel(x, y)


@pl.jit.host
def copy_host(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        copy_orch(x[r], y[r], device=r)


@pl.jit.incore
def rows_kernel(x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]):
    return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)


def _tensors(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ones((n, 1, COLS), np.float32), np.zeros((n, 1, COLS), np.float32)


def test_a_refused_construct_is_one_error_at_its_line_at_compile() -> None:
    x = np.zeros((1, COLS), np.float32)
    with pytest.raises(FrontendError, match=re.escape("for ... else is not supported")) as err:
        refused_kernel.compile(x, np.zeros_like(x))
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-for-else") - 2)


def test_compile_translates_for_its_arguments_and_devices() -> None:
    compiled = copy_host.compile(*_tensors(2), config=_config(2))
    assert compiled.untranslated is None
    ((nranks, *_), (built, _)), = compiled.translations.entries.items()
    assert nranks == 2 and "tile.load(x, [0, 0], [1, 16])" in format_program(built.program)
    assert copy_host.compile(*_tensors(2), config=_config(2)) is compiled
    assert len(compiled.translations.entries) == 1  # the same kind of call: not translated again
    copy_host.compile(*_tensors(3), config=_config(3))
    assert len(compiled.translations.entries) == 1  # another device count is another compiled program


def test_signature_mode_translates_what_the_annotations_tell() -> None:
    compiled = copy_host.compile(config=_config(3))  # NR follows the devices
    assert compiled.untranslated is None and len(compiled.translations.entries) == 1
    with pytest.warns(UntranslatedWarning, match="dynamic dim ROWS has no extent before a call"):
        unknown = rows_kernel.compile()
    assert unknown.untranslated == "host tensor x: dynamic dim ROWS has no extent before a call"
    assert not unknown.translations.entries


def test_sample_tensors_whose_nr_is_not_the_device_count_are_not_translated() -> None:
    with pytest.warns(UntranslatedWarning, match=r"sample tensors give NR = 3, but it runs on 2 devices"):
        compiled = copy_host.compile(*_tensors(3), config=_config(2))
    assert compiled.untranslated is not None and "(a call of these shapes is refused)" in compiled.untranslated
    assert all(shape != (3, 1, COLS) for key in compiled.translations.entries for _, shape, _ in key[2:])


@pl.jit.host
def table_host(x: pl.Tensor[[NR, 1, COLS], pl.FP32], table: pl.Tensor[[4], pl.INT32],
               y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        copy_orch(x[r], y[r], device=r)


def test_sample_tensors_not_of_the_annotated_shapes_are_not_translated() -> None:
    """pypto regenerates a pl.jit function's parameter types from its arguments, so it compiles samples
    given in another order than the parameters (pypto-lib's runner passes them in its specs' order); pldemu
    translates the annotated shapes only, so compile says it did not translate them."""
    x, y = _tensors(2)
    with pytest.warns(UntranslatedWarning, match=r"not of the annotated shapes \(host tensor table: dim 0 is 2"):
        compiled = table_host.compile(x, np.zeros(2, np.int32), y, config=_config(2))
    assert not compiled.translations.entries


@pytest.mark.launcher
def test_the_call_reuses_the_translation_of_compile() -> None:
    x, y = _tensors(2)
    compiled = copy_host.compile(x, y, config=_config(2))
    ((_, (built, _)),) = compiled.translations.entries.items()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntranslatedWarning)
        copy_host(x, y, config=_config(2))
    assert compiled.last.built.program is built.program
    np.testing.assert_array_equal(y, x)


def _class_program(body: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Copy:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
            t = pl.load(x, [0, 0], [1, COLS])
            if body == "refused":
                for _ in pl.range(1):
                    t = pl.load(x, [0, 0], [1, COLS])
                else:  # MARK-class-for-else
                    t = pl.load(x, [0, 0], [1, COLS])
            return pl.store(t, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
            return self.kernel(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
            for r in pl.range(pld.world_size()):
                self.orch(x[r], y[r], device=r)

    return Copy


def test_class_form_ir_compile_translates_static_host_annotations() -> None:
    compiled = ir.compile(_class_program("good"), distributed_config=DistributedConfig(device_ids=[0, 1]))
    assert compiled.untranslated is None and len(compiled.translations.entries) == 1
    with pytest.raises(FrontendError, match=re.escape("for ... else is not supported")) as err:
        ir.compile(_class_program("refused"), distributed_config=DistributedConfig(device_ids=[0, 1]))
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-class-for-else") - 2)


def test_class_form_l2_ir_compile_translates_each_orchestration() -> None:
    @pl.program
    class L2Copy:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
            for _ in pl.range(1):
                t = pl.load(x, [0, 0], [1, COLS])
            else:  # MARK-l2-for-else
                t = pl.load(x, [0, 0], [1, COLS])
            return pl.store(t, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
            return self.kernel(x, y)

    with pytest.raises(FrontendError, match=re.escape("for ... else is not supported")) as err:
        ir.compile(L2Copy)
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-l2-for-else") - 2)


SCRIPT = """
    import argparse

    import numpy as np
    import pypto.language as pl


    @pl.jit.incore
    def kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
        t = pl.load(x, [0, 0], [1, 16])
        for _ in pl.range(1):
            t = pl.load(x, [0, 0], [1, 16])
        else:
            t = pl.load(x, [0, 0], [1, 16])
        return pl.store(t, [0, 0], y)


    parser = argparse.ArgumentParser()
    parser.add_argument("--compile-only", action="store_true")
    x = np.ones((1, 16), np.float32)
    compiled = kernel.compile(x, np.zeros_like(x))
    print(f"compile_only done: {compiled.output_dir}")
"""


@pytest.mark.launcher
def test_compile_only_script_fails_at_the_users_line(tmp_path: Path) -> None:
    script = tmp_path / "refused.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = job_env({"PYTHONDONTWRITEBYTECODE": "1"})
    env.pop(IN_JOB_ENV, None)
    result = run_tracked([sys.executable, "-m", "pldemu", "python", str(script), "--compile-only"], 180.0, env,
                         REPO_ROOT)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "compile_only done" not in out
    assert f"{script}:11" in out and "for ... else is not supported" in out


HUGE = 1 << 16
BIG_ROWS, BIG_COLS = 1 << 18, 1 << 20  # 1 TiB of FP32 a rank


@pl.jit
def huge_scratch_orch(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    scratch = pl.create_tensor([HUGE, HUGE], dtype=pl.FP32)  # 16 GiB a rank: more than a test machine has
    copy_kernel(x, scratch)
    return copy_kernel(x, y)


@pl.jit.host
def huge_host(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        huge_scratch_orch(x[r], y[r], device=r)


def test_compile_says_when_a_call_of_its_samples_would_be_refused_for_memory() -> None:
    """pypto-lib's ``--compile-only`` of a layer that does not fit the machine: compile translates it and
    warns with the estimate the call would be refused with (16 GiB a rank over 8 ranks)."""
    from pldemu.pypto.surface.ir.distributed_compiled_program import MemoryEstimateWarning

    with pytest.warns(MemoryEstimateWarning, match=r"on 8 devices: a call of these arguments will be refused "
                                                   r"before its job starts: the job needs about .* GiB"):
        compiled = huge_host.compile(*_tensors(8), config=_config(8))
    assert compiled.untranslated is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy_host.compile(*_tensors(2), config=_config(2))  # one that fits says nothing


@pl.jit
def first_row(w: pl.Tensor[[BIG_ROWS, BIG_COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="row"):
        y[0:1, 0:COLS] = w[0:1, 0:COLS]
    return y


@pl.jit.host
def model_host(w: pl.Tensor[[NR, BIG_ROWS, BIG_COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        first_row(w[r], y[r], device=r)


def test_compile_of_shape_only_samples_copies_none_of_them() -> None:
    """A model's compile from samples that carry only shapes (a weight of 2 TiB seen through one zero): the
    translation slices the ranks' inputs without copying them, so compile warns with the estimate instead of
    failing to allocate what no machine here has."""
    from pldemu.pypto.surface.ir.distributed_compiled_program import MemoryEstimateWarning

    weight = np.broadcast_to(np.zeros((), np.float32), (2, BIG_ROWS, BIG_COLS))
    with pytest.warns(MemoryEstimateWarning, match=r"biggest buffers: .* 1024.0 GiB"):
        compiled = model_host.compile(weight, np.zeros((2, 1, COLS), np.float32), config=_config(2))
    assert compiled.untranslated is None
