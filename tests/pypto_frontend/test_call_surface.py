"""pypto's call surface around a compiled program (written here, in pypto's style): ``RunConfig`` checked as
pypto checks it, ``config=`` on every call with its swimlane switch answered by pldemu's own trace,
``DistributedConfig(num_sub_workers=N)``, ``ir.compile(output_dir=)``, and L2-only programs
(``CompiledProgram``: one Orchestration called directly, several selected by name)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.compiled_program import CompiledProgram
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedCompiledProgram, DistributedConfig
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.surface.runtime import RunConfig

ROWS, COLS = 8, 16
NR = pl.dynamic("NR")


@pl.program
class AddOrMul:
    """Two L2 Orchestrations with one signature and no HOST function."""

    @pl.function(type=pl.FunctionType.InCore)
    def k_add(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], b: pl.Tensor[[ROWS, COLS], pl.FP32],
              f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [ROWS, COLS]), pl.load(b, [0, 0], [ROWS, COLS])), [0, 0], f)

    @pl.function(type=pl.FunctionType.InCore)
    def k_mul(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], b: pl.Tensor[[ROWS, COLS], pl.FP32],
              f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return pl.store(pl.mul(pl.load(a, [0, 0], [ROWS, COLS]), pl.load(b, [0, 0], [ROWS, COLS])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch_mul(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], b: pl.Tensor[[ROWS, COLS], pl.FP32],
                 f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.k_mul(a, b, f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch_add(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], b: pl.Tensor[[ROWS, COLS], pl.FP32],
                 f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        out = self.k_add(a, b, f)
        return out


@pl.program
class Scale:
    """One L2 Orchestration: ``f = a * s``."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
          s: pl.Scalar[pl.FP32]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return pl.store(pl.mul(pl.load(a, [0, 0], [ROWS, COLS]), s), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, a: pl.Tensor[[ROWS, COLS], pl.FP32], f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             s: pl.Scalar[pl.FP32]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.k(a, f, s)


@pl.program
class PerRankAddOne:
    """``y[r] = x[r] + 1`` on every rank, one rank-pinned dispatch each."""

    @pl.function(type=pl.FunctionType.InCore)
    def add_one(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return pl.store(pl.add(pl.load(x, [0, 0], [ROWS, COLS]), 1.0), [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def child(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
              y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        return self.add_one(x, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.child(x[r], y[r], device=r)


def _line(text: str) -> int:
    """The first line of this file holding ``text``."""
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)


# -- RunConfig -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "message"), [
    ({"ring_task_window": 48}, "ring_task_window must be a power of 2 >= 4, got 48"),
    ({"ring_task_window": 2}, "ring_task_window must be a power of 2 >= 4, got 2"),
    ({"ring_heap": 512}, "ring_heap must be a power of 2 >= 1024 (bytes per ring), got 512"),
    ({"ring_dep_pool": 2**31}, "ring_dep_pool must be in [4, INT32_MAX], got 2147483648"),
    ({"ring_dep_pool": 3.0}, "ring_dep_pool must be in [4, INT32_MAX], got 3.0"),
    ({"ring_heap": True}, "ring_heap must be a power of 2 >= 1024 (bytes per ring), got True"),
    ({"ring_heap": [1024, 1024]}, "ring_heap must have exactly 4 entries (one per scope-depth ring), got 2"),
    ({"ring_task_window": [4, 0, 12, 8]}, "ring_task_window entries must be a power of 2 >= 4 (or 0 to keep "
                                          "default), got 12"),
    ({"ring_dep_pool": [False, 0, 0, 0]}, "ring_dep_pool entries must be in [4, INT32_MAX] (or 0 to keep default), "
                                          "got False"),
    ({"enable_chip_swimlane": 5}, "enable_chip_swimlane must be a collection level in [0, 4]"),
    ({"platform": "a3"}, "Invalid platform 'a3'."),
])
def test_run_config_refuses_what_pypto_refuses_at_the_users_line(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RunConfig(**fields)  # type: ignore[arg-type]
    assert isinstance(caught.value, FrontendError) and message in caught.value.message, caught.value
    assert (caught.value.file, caught.value.line) == (__file__, _line("RunConfig(**fields)  #"))


def test_run_config_swimlane_level_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="enable_chip_swimlane must be an int collection level"):
        RunConfig(enable_chip_swimlane="full")  # type: ignore[arg-type]


def test_run_config_accepts_pyptos_ring_sizes_and_normalises_as_pypto_does() -> None:
    rc = RunConfig(ring_task_window=64, ring_heap=8 * 1024 * 1024, ring_dep_pool=256)
    assert (rc.ring_task_window, rc.ring_heap, rc.ring_dep_pool) == (64, 8 * 1024 * 1024, 256)
    per_ring = RunConfig(ring_task_window=(4, 0, 8, 0), ring_heap=[0, 1024, 0, 0], ring_dep_pool=(0, 4, 2**31 - 1, 0))
    assert per_ring.ring_task_window == [4, 0, 8, 0] and per_ring.ring_dep_pool == [0, 4, 2**31 - 1, 0]
    assert RunConfig(enable_chip_swimlane=True).enable_chip_swimlane == 4
    assert RunConfig(enable_chip_swimlane=False).enable_chip_swimlane == 0
    assert RunConfig(enable_dep_gen=True).save_kernels and not RunConfig().save_kernels
    assert RunConfig(enable_pmu=2).any_dfx_enabled() and not RunConfig().any_dfx_enabled()


def test_num_sub_workers_is_accepted_as_pypto_accepts_it() -> None:
    assert DistributedConfig(device_ids=[0, 1], num_sub_workers=2).num_sub_workers == 2
    with pytest.raises(ValueError, match="num_sub_workers must be non-negative"):
        DistributedConfig(num_sub_workers=-1)


# -- L2-only programs ------------------------------------------------------------------------------

def test_an_l2_program_compiles_to_a_compiled_program_with_one_callable_per_orchestration(tmp_path: Path) -> None:
    compiled = ir.compile(AddOrMul, output_dir=str(tmp_path))
    assert isinstance(compiled, CompiledProgram) and compiled.output_dir == tmp_path
    assert compiled.orchestration_names == ["orch_add", "orch_mul"]
    add, mul = compiled["orch_add"], compiled.orch_mul
    assert (add.name, mul.name) == ("orch_add", "orch_mul") and compiled.orch_add.name == "orch_add"
    assert add.output_dir == tmp_path / "next_levels" / "orch_add"
    assert mul.output_dir == tmp_path / "next_levels" / "orch_mul"
    assert add.param_names == ["a", "b", "f"] and add.output_indices == [2]
    a = np.zeros((ROWS, COLS), np.float32)
    with pytest.raises(TypeError, match=r"Program has 2 L2 orchestrations \['orch_add', 'orch_mul'\]; select one "
                                        r"explicitly via compiled\['<name>'\]"):
        compiled(a, a, a)
    with pytest.raises(KeyError, match=r"No orchestration 'orch_sub' under .*next_levels\. Available: "
                                       r"\['orch_add', 'orch_mul'\]"):
        compiled["orch_sub"]
    with pytest.raises(AttributeError, match="'CompiledProgram' object has no attribute 'orch_sub'"):
        compiled.orch_sub  # noqa: B018


def test_a_single_orchestration_program_is_called_directly(tmp_path: Path) -> None:
    compiled = ir.compile(Scale, output_dir=str(tmp_path))
    assert isinstance(compiled, CompiledProgram)
    assert compiled.orchestration_names == [] and compiled.param_names == ["a", "f", "s"]


def test_a_program_with_no_entry_is_refused_at_its_class() -> None:
    @pl.program
    class OnlyKernels:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: pl.Tensor[[ROWS, COLS], pl.FP32]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return a

    with pytest.raises(FrontendError) as caught:
        ir.compile(OnlyKernels)
    assert caught.value.line == _line("class OnlyKernels")
    assert "neither a HOST orchestrator nor an Orchestration" in caught.value.message


def test_two_host_orchestrators_are_refused_at_the_second() -> None:
    @pl.program
    class TwoHosts:
        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def first(self, a: pl.Tensor[[ROWS, COLS], pl.FP32]):
            pass

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def second(self, a: pl.Tensor[[ROWS, COLS], pl.FP32]):
            pass

    with pytest.raises(FrontendError, match="needs exactly one HOST orchestrator") as caught:
        ir.compile(TwoHosts)
    assert caught.value.line == _line("def second(")
    with pytest.raises(FrontendError, match="found 0") as no_host:
        AddOrMul.host()
    assert (no_host.value.file, no_host.value.line) == (__file__, _line("class AddOrMul"))


def test_output_dir_is_honoured_for_a_distributed_program(tmp_path: Path) -> None:
    compiled = ir.compile(PerRankAddOne, output_dir=str(tmp_path / "out"),
                          distributed_config=DistributedConfig(device_ids=[0, 1]))
    assert isinstance(compiled, DistributedCompiledProgram) and compiled.output_dir == tmp_path / "out"
    assert str(compiled) == str(tmp_path / "out") and (tmp_path / "out" / "PLDEMU.txt").is_file()


# -- calls (one job each) ----------------------------------------------------------------------------

def _trace_ranks(path: Path) -> set[int]:
    events = json.loads(path.read_text())["traceEvents"]
    return {e["pid"] for e in events if e.get("ph") == "X"}


@pytest.mark.launcher
def test_each_orchestration_runs_on_one_device_and_traces_when_asked(tmp_path: Path) -> None:
    compiled = ir.compile(AddOrMul, output_dir=str(tmp_path))
    a = np.full((ROWS, COLS), 2.0, np.float32)
    b = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    f = np.zeros((ROWS, COLS), np.float32)
    compiled["orch_add"](a, b, f, config=RunConfig(enable_chip_swimlane=True))
    np.testing.assert_array_equal(f, a + b)
    compiled.orch_mul(a, b, f, config=RunConfig(enable_dep_gen=True))  # no effect: nothing traced
    np.testing.assert_array_equal(f, a * b)
    traces = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("pldemu_trace_call*.json"))
    assert traces == [Path("next_levels/orch_add/dfx_outputs/pldemu_trace_call0.json")], traces
    assert _trace_ranks(tmp_path / traces[0]) == {0}


@pytest.mark.launcher
def test_a_single_orchestration_call_with_a_scalar(tmp_path: Path) -> None:
    compiled = ir.compile(Scale, output_dir=str(tmp_path))
    a = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    f = np.zeros_like(a)
    compiled(a, f, 3.0)
    np.testing.assert_array_equal(f, a * 3)
    with pytest.raises(TypeError, match=r"config= takes a pypto\.runtime\.RunConfig, got dict"):
        compiled(a, f, 3.0, config={"enable_chip_swimlane": 1})


@pytest.mark.launcher
def test_the_swimlane_switch_traces_each_call_of_a_distributed_program(tmp_path: Path) -> None:
    compiled = ir.compile(PerRankAddOne, output_dir=str(tmp_path),
                          distributed_config=DistributedConfig(device_ids=[0, 1], num_sub_workers=1))
    x = np.random.default_rng(7).standard_normal((2, ROWS, COLS)).astype(np.float32)
    y = np.zeros_like(x)
    traced = RunConfig(enable_chip_swimlane=2, ring_task_window=64, ring_heap=1 << 20, ring_dep_pool=256)
    compiled(x, y, config=traced)
    compiled(x, y)  # the switch is per call: this one writes nothing
    compiled(x, y, config=traced)
    np.testing.assert_array_equal(y, x + 1)
    dfx = tmp_path / "dfx_outputs"
    assert sorted(p.name for p in dfx.iterdir()) == ["pldemu_trace_call0.json", "pldemu_trace_call1.json"]
    assert _trace_ranks(dfx / "pldemu_trace_call0.json") == {0, 1}


def test_set_backend_type_is_checked_and_changes_nothing() -> None:
    from pldemu.pypto.surface.backend import BackendType, set_backend_type

    set_backend_type(BackendType.Ascend910B)
    set_backend_type(BackendType.Ascend950)
    with pytest.raises(TypeError, match=r"must be a pypto\.backend\.BackendType"):
        set_backend_type("Ascend910B")  # type: ignore[arg-type]
