"""pl.jit without a job: the decorator family's rules, dependency discovery, specialisation and the cache,
signature mode, pypto's runtime surface (RunConfig, DistributedConfig, _get_metadata) and every error at
the user's file:line. What runs on ranks is in jit_programs/ (test_jit_programs.py)."""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.capture import Kind
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.jit.deps import dependency_order
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir import DistributedCompiledProgram, DistributedConfig, ParamDirection
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.surface.runtime import RunConfig

COLS = 16
NR = pl.dynamic("NR")


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))
    return tmp_path / "build_output"


def _line_of(marker: str) -> int:
    src, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(i for i, line in enumerate(src, 1) if marker in line and "_line_of" not in line)


@pl.jit.incore
def copy_kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], y)


@pl.jit
def copy_orch(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]):
    return copy_kernel(x, y)


@pl.jit.host
def copy_host(x: pl.Tensor[[NR, 1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]],
              scale: pl.Scalar[pl.INT32]):
    for r in pl.range(pld.world_size()):
        copy_orch(x[r], y[r], device=r)


def _config(n: int) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))))


def _tensors(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ones((n, 1, COLS), np.float32), np.zeros((n, 1, COLS), np.float32)


# -- the decorator family ----------------------------------------------------------------------------

def test_every_form_decorates_and_keeps_pyptos_attributes() -> None:
    assert copy_kernel._func_type == "incore" and copy_orch._func_type == "orchestration"
    assert copy_host._func_type == "host" and copy_host.__name__ == "copy_host"
    assert pl.jit.incore(level=pl.Level.AIC)(lambda x: x)._level is pl.Level.AIC
    assert pl.jit(auto_scope=False)(lambda x: x)._auto_scope is False
    assert pl.jit.host(auto_scope=False)(lambda x: x)._auto_scope is False
    assert pl.jit.inline(lambda x: x)._func_type == "inline" and pl.jit.opaque(lambda x: x)._func_type == "opaque"
    assert pl.jit(copy_kernel._func)._func_type == "orchestration"  # pypto-lib re-wraps ._func
    assert copy_host._param_names() == ["x", "y", "scale"]  # pypto-lib's decode_fwd_mtp orders its specs by it


@pytest.mark.parametrize(("make", "message"), [
    (lambda: pl.jit.host(level=pl.Level.AIC), "@pl.jit.host does not accept a level= argument"),
    (lambda: pl.jit.incore(auto_scope=False), "@pl.jit.incore does not accept an auto_scope= argument"),
    (lambda: pl.jit.opaque(auto_scope=True), "@pl.jit.opaque does not accept an auto_scope= argument"),
])
def test_keywords_a_kind_does_not_take_are_refused_as_pypto_does(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=re.escape(message)):
        make()


def test_extern_kernels_are_out_of_scope() -> None:
    with pytest.raises(NotImplementedError, match=re.escape("pl.jit.extern")):
        pl.jit.extern(source="k.cpp")


# -- dependencies ------------------------------------------------------------------------------------

def _factory() -> object:
    @pl.jit.inline
    def helper(t: pl.Tensor):
        return t

    @pl.jit
    def orch(x: pl.Tensor, y: pl.Out[pl.Tensor]):
        helper(x)
        return copy_kernel(x, y)

    @pl.jit.host
    def host(x: pl.Tensor, y: pl.Out[pl.Tensor]):
        for r in pl.range(pld.world_size()):
            orch(x[r], y[r], device=r)

    return host


def test_dependencies_through_closures_and_globals_leaf_first() -> None:
    order = [f.__name__ for f in dependency_order(_factory())]  # type: ignore[arg-type]
    assert order == ["helper", "copy_kernel", "orch", "host"]


@pl.jit
def other_entry(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    return copy_orch(x, y)  # MARK-entry-calls-entry


def test_an_orchestration_never_absorbs_another_entry() -> None:
    assert [f.__name__ for f in dependency_order(other_entry)] == ["other_entry"]  # type: ignore[arg-type]
    x = np.ones((1, COLS), np.float32)
    with pytest.raises(FrontendError, match="copy_orch cannot be called in a device function") as err:
        translate(other_entry.compile(x, np.zeros_like(x)).program, 1, [x, np.zeros_like(x)])
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-entry-calls-entry"))


# -- specialisation and the cache --------------------------------------------------------------------

def test_equal_keys_give_the_same_program_and_other_keys_another() -> None:
    x, y = _tensors(2)
    first = copy_host.compile(x, y, 3, config=_config(2))
    assert isinstance(first, DistributedCompiledProgram)
    assert copy_host.compile(x, y, 3, config=_config(2)) is first
    assert copy_host.compile(*_tensors(3), 3, config=_config(2)) is first  # NR is dynamic: not in the key
    assert copy_host.compile(x, y, 4, config=_config(2)) is not first  # a specialised scalar is
    assert copy_host.compile(x, y, 3, config=_config(3)) is not first  # and so are the devices
    assert copy_host.compile(x, y, 3, config=RunConfig(platform="a5sim", distributed_config=DistributedConfig(
        device_ids=[0, 1]))) is not first


def test_bare_annotations_are_typed_by_the_arguments() -> None:
    x = np.arange(COLS, dtype=np.float32).reshape(1, COLS)
    compiled = copy_kernel.compile(x, np.zeros_like(x))
    host = compiled.program.host()
    assert host.kind is Kind.HOST and compiled.program.functions["copy_kernel"].kind is Kind.INCORE
    ann = host.annotations["y"]
    assert ann.dims == (1, COLS) and ann.dtype is pl.FP32 and ann.direction.value == "Out"
    assert copy_kernel.compile(np.zeros((1, COLS), np.int32), np.zeros((1, COLS), np.int32)) is not compiled


def test_scalars_are_baked_and_a_runtime_scalar_is_not() -> None:
    x, y = _tensors(2)
    assert copy_host.compile(x, y, 7, config=_config(2)).program.specialized == {"scale": 7}
    runtime = copy_host.compile(scale=pl.RUNTIME, config=_config(2))
    assert runtime.program.specialized == {}
    assert runtime.program.host().annotations["x"].dims[1:] == (1, COLS)


def test_a_host_scalar_may_arrive_as_a_one_element_tensor() -> None:
    x, y = _tensors(2)
    assert copy_host.compile(x, y, np.array(5, np.int32), config=_config(2)).program.specialized == {"scale": 5}


def test_signature_mode_needs_full_annotations() -> None:
    with pytest.raises(TypeError, match=re.escape("parameter 'x' is a bare pl.Tensor")):
        copy_kernel.compile()


def test_pl_runtime_on_a_real_call_is_refused_with_pyptos_words() -> None:
    with pytest.raises(TypeError, match=r"parameter 'scale' received pl\.RUNTIME, which is a compile-time marker"):
        copy_host(*_tensors(1), pl.RUNTIME)


def test_missing_and_unknown_arguments() -> None:
    with pytest.raises(TypeError, match=re.escape("@pl.jit function 'copy_host': missing a required argument: 'scale'")):
        copy_host(*_tensors(1))
    with pytest.raises(TypeError, match=re.escape("@pl.jit function 'copy_kernel'")):
        copy_kernel.compile(*_tensors(1), nope=1)


def test_config_must_be_a_run_config() -> None:
    with pytest.raises(TypeError, match=re.escape("config= takes a pypto.runtime.RunConfig")):
        copy_host.compile(*_tensors(1), 1, config={"platform": "a2a3sim"})


def test_lower_shows_what_pldemu_runs() -> None:
    x, y = _tensors(2)
    text = str(copy_host.lower(x, y, 1, config=_config(2)))
    assert text.startswith("program _jit_copy_host nranks=2") and "tile.load(x, [0, 0], [1, 16])" in text
    assert copy_host.lower(x, y, 1, config=_config(2)).as_python() == text


def test_output_dir_is_named_as_pypto_names_it(_build_dir: Path) -> None:
    compiled = copy_host.compile(*_tensors(1), 2)
    assert compiled.output_dir.parent == _build_dir
    assert re.fullmatch(r"_jit_copy_host_\d{8}_\d{6}", compiled.output_dir.name)
    assert (compiled.output_dir / "PLDEMU.txt").is_file() and str(compiled) == str(compiled.output_dir)


# -- pypto's runtime surface -------------------------------------------------------------------------

def test_get_metadata_lists_the_host_parameters() -> None:
    infos, outs, returns = copy_host.compile(*_tensors(2), 1, config=_config(2))._get_metadata()
    assert [(p.name, p.direction, p.shape) for p in infos] == [
        ("x", ParamDirection.In, [-1, 1, COLS]), ("y", ParamDirection.Out, [-1, 1, COLS]),
        ("scale", ParamDirection.In, None)]
    assert outs == [1] and returns == []


def test_run_config_is_pyptos_dataclass() -> None:
    import dataclasses

    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert {"platform", "distributed_config", "save_kernels_dir", "enable_chip_swimlane", "ring_task_window",
            "dump_ptoas_passes"} <= names
    assert RunConfig(platform="a5sim").backend_type.name == "Ascend950"
    with pytest.raises(ValueError, match="Invalid platform 'gpu'"):
        RunConfig(platform="gpu")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"device_ids": []}, "must not be empty"),
    ({"device_ids": [0, 0]}, "must be distinct"),
    ({"device_ids": [-1]}, "non-negative device indices"),
    ({"device_ids": [0], "aicpu_thread_num": 1}, "0 (the platform default) or at least 2"),
    ({"device_ids": [0], "num_sub_workers": -1}, "num_sub_workers must be non-negative"),
])
def test_distributed_config_is_checked(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        DistributedConfig(**kwargs)  # type: ignore[arg-type]


def test_a_call_refuses_a_config_that_is_not_a_run_config() -> None:
    compiled = copy_host.compile(*_tensors(1), 1)
    with pytest.raises(TypeError, match=re.escape("config= takes a pypto.runtime.RunConfig")):
        compiled(*_tensors(1), 1, config="a2a3sim")


# -- errors at the user's lines ----------------------------------------------------------------------

@pl.jit.incore
def bad_kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
    return pl.no_such_op(x)  # MARK-unknown-op


def test_an_unknown_name_is_one_error_at_its_line() -> None:
    with pytest.raises(FrontendError, match=re.escape("pl.no_such_op is not supported")) as err:
        bad_kernel.compile(*[np.zeros((1, COLS), np.float32)] * 2)
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-unknown-op"))


def test_an_error_in_a_helper_module_names_that_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = tmp_path / "far_helpers.py"
    helper.write_text(textwrap.dedent("""
        from pldemu.pypto.surface import language as pl

        @pl.jit.inline
        def broken(t: pl.Tensor):
            return pl.load(t, [0, 0], [1, undefined_cols])  # noqa: F821
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from far_helpers import broken  # type: ignore[import-not-found]

    @pl.jit
    def uses_it(x: pl.Tensor, y: pl.Out[pl.Tensor]):
        return broken(x)

    with pytest.raises(FrontendError, match="unknown name 'undefined_cols'") as err:
        uses_it.compile(*[np.zeros((1, COLS), np.float32)] * 2)
    assert (err.value.file, err.value.line) == (str(helper), 6)


def test_two_functions_of_one_name_are_refused() -> None:
    def make() -> object:
        @pl.jit.incore
        def copy_kernel(x: pl.Tensor, y: pl.Out[pl.Tensor]):
            return y
        return copy_kernel

    shadow = make()

    @pl.jit
    def both(x: pl.Tensor, y: pl.Out[pl.Tensor]):
        shadow(x, y)
        return copy_kernel(x, y)

    with pytest.raises(FrontendError, match=re.escape("two pl.jit functions named 'copy_kernel'")) as err:
        both.compile(*[np.zeros((1, COLS), np.float32)] * 2)
    assert err.value.file == __file__
