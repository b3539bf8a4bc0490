"""``pypto.runtime.runner``: ``RunConfig``, single-device execution (not used by distributed programs), and
the names pypto's test harness runs a build folder with (``RunResult``, ``_DfxOpts``, ``_execute_on_device``,
``validate_persisted_outputs``: :mod:`pldemu.pypto.harness_build`)."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pldemu.pypto.errors import ConfigError, ConfigTypeError, user_frame
from pldemu.pypto.harness_build import execute_on_device, validate_persisted_outputs
from pldemu.pypto.surface.backend import BackendType, backend_for

PLATFORMS = ("a2a3sim", "a2a3", "a5sim", "a5")

RING_DEPTH = 4
"""The scope-depth rings of simpler's runtime: a per-ring sizing list has exactly this many entries."""
SWIMLANE_FULL = 4
"""The chip swimlane level ``True`` requests (pypto's levels run 0-4)."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _pow2_at_least(low: int) -> Callable[[object], bool]:
    return lambda v: _is_int(v) and v >= low and (v & (v - 1)) == 0  # type: ignore[operator]


RING_RULES: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("ring_task_window", "be a power of 2 >= 4", _pow2_at_least(4)),
    ("ring_heap", "be a power of 2 >= 1024 (bytes per ring)", _pow2_at_least(1024)),
    ("ring_dep_pool", "be in [4, INT32_MAX]", lambda v: _is_int(v) and 4 <= v <= 2**31 - 1),  # type: ignore[operator]
)
"""pypto's ring-sizing rules (``RunConfig._validate_ring_overrides``): field, what each value must be,
the test. They size simpler's runtime rings, which pldemu has not: checked, then without effect."""


@dataclasses.dataclass
class RunConfig:
    """pypto's ``RunConfig``, field for field (pypto-lib filters its keywords through
    ``dataclasses.fields``). What pldemu reads: ``platform`` (validated as pypto validates it, and
    recorded) and ``distributed_config`` (the devices, at compile time). Every other field is accepted
    and has no effect: it tunes pypto's compiler passes, kernel code generation, the device runtime's
    rings, or its profiling outputs, none of which pldemu has (docs/pypto-frontend.md). pldemu's own
    run options come from the ``pldemu python`` / ``pldemu pytest`` flags (``pldemu.pypto.session``).

    Checked as pypto checks them (the same error types and texts, at the line that built the config):
    ``platform``, the ring sizes (:data:`RING_RULES`; a 4-list is per ring, 0 keeping a ring's default;
    a tuple becomes a list) and the swimlane level (``True`` is 4). A call's DFX switches are answered by
    :mod:`pldemu.pypto.dfx` (``enable_chip_swimlane``: pldemu's own trace of the call)."""

    platform: str = "a2a3sim"
    device_id: int = 0
    rtol: float = 1e-5
    atol: float = 1e-5
    strategy: Any = None
    backend_type: BackendType = BackendType.Ascend910B
    dump_passes: Any = False
    save_kernels: bool = False
    save_kernels_dir: str | None = None
    codegen_only: bool = False
    enable_chip_swimlane: int | bool = 0
    enable_dump_args: int = 0
    enable_pmu: int = 0
    enable_dep_gen: bool = False
    enable_scope_stats: bool = False
    compile_profiling: bool = False
    diagnostic_phase: Any = None
    disabled_diagnostics: Any = None
    golden_data_dir: str | None = None
    aicpu_thread_num: int | None = None
    ring_task_window: int | list[int] | tuple[int, ...] | None = None
    ring_heap: int | list[int] | tuple[int, ...] | None = None
    ring_dep_pool: int | list[int] | tuple[int, ...] | None = None
    distributed_config: Any = None
    analyze_auto_scopes_for_deps: bool = False
    memory_planner: Any = None
    dump_ptoas_passes: bool = False

    def __post_init__(self) -> None:
        __tracebackhide__ = True
        if self.platform not in PLATFORMS:
            raise ConfigError(f"Invalid platform {self.platform!r}. Expected 'a2a3sim', 'a2a3', 'a5sim', or 'a5'.",
                              *user_frame(1))
        self.backend_type = backend_for(self.platform)
        self.enable_chip_swimlane = _swimlane_level(self.enable_chip_swimlane)
        if self.any_dfx_enabled():
            self.save_kernels = True  # pypto keeps the output folder whenever a DFX switch is on
        for name, phrase, ok in RING_RULES:
            setattr(self, name, _ring_value(name, phrase, ok, getattr(self, name)))

    def any_dfx_enabled(self) -> bool:
        """At least one of the five DFX switches is on (pypto's ``RunConfig.any_dfx_enabled``)."""
        return bool(self.enable_chip_swimlane > 0 or self.enable_dump_args > 0 or self.enable_pmu > 0
                    or self.enable_dep_gen or self.enable_scope_stats)


def _swimlane_level(value: object) -> int:
    """pypto's swimlane level: ``True`` is the full level, ``False`` 0, an int must be in 0-4."""
    if isinstance(value, bool):
        return SWIMLANE_FULL if value else 0
    if not isinstance(value, int):
        raise ConfigTypeError(f"enable_chip_swimlane must be an int collection level (0-{SWIMLANE_FULL}) or a "
                              f"bool, got {type(value).__name__}", *user_frame(2))
    if not 0 <= value <= SWIMLANE_FULL:
        raise ConfigError(f"enable_chip_swimlane must be a collection level in [0, {SWIMLANE_FULL}] (0=off, "
                          "1=AICore timing, 2=+dispatch/finish, 3=+sched phases, 4=+orch phases), got "
                          f"{value}", *user_frame(2))
    return value


def _ring_value(name: str, phrase: str, ok: Callable[[object], bool], value: Any) -> Any:
    """``value`` of one ring-sizing field, checked by its rule (None: unset; a tuple becomes a list)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        if not ok(value):
            raise ConfigError(f"{name} must {phrase}, got {value!r}", *user_frame(2))
        return value
    if len(value) != RING_DEPTH:
        raise ConfigError(f"{name} must have exactly {RING_DEPTH} entries (one per scope-depth ring), got "
                          f"{len(value)}", *user_frame(2))
    for v in value:  # a non-int (False too) is refused before 0, the "keep the default" entry, is accepted
        if not _is_int(v) or (v != 0 and not ok(v)):
            raise ConfigError(f"{name} entries must {phrase} (or 0 to keep default), got {v!r}", *user_frame(2))
    return list(value)


def execute_compiled(work_dir: str | Path, args: Sequence[Any], *, platform: str, device_id: int,
                     dfx: Any = None, level: int = 2, aicpu_thread_num: int | None = None,
                     analyze_auto_scopes_for_deps: bool = False) -> None:
    """pypto's single-device runner: the program ``pypto.ir.compile`` built into ``work_dir`` (in this
    process, while pldemu's layer is on: pldemu runs the program it holds, not artifacts on disk) called
    with ``args`` in its Orchestration's parameter order, Out / InOut tensors written in place; a ctypes
    scalar passes its value. ``device_id``, ``dfx`` and the thread count change nothing computed here."""
    from pldemu.pypto.finder import compiled_at

    if level != 2:
        raise ValueError(f"execute_compiled: level={level} is not supported (pypto runs level 2 only)")
    if platform not in PLATFORMS:
        raise ValueError(f"execute_compiled: platform must be one of {PLATFORMS}, got {platform!r}")
    compiled = compiled_at(Path(work_dir))
    if compiled is None:
        raise FileNotFoundError(f"execute_compiled: {work_dir} is not a program pypto.ir.compile built in this "
                                "process among its latest builds (pldemu runs the compiled program it holds, not a build on disk)")
    compiled(*[a.value if isinstance(a, ctypes._SimpleCData) else a for a in args])


@dataclasses.dataclass
class RunResult:
    """pypto's result of a harness run: passed, the test's name, the error when not, the seconds it took."""

    __test__ = False

    passed: bool
    test_name: str | None = None
    error: str | None = None
    execution_time: float | None = None
    profile: dict[str, Any] | None = None

    def __str__(self) -> str:
        name = f": {self.test_name}" if self.test_name else ""
        took = f" ({self.execution_time:.2f}s)" if self.execution_time else ""
        return f"{'PASS' if self.passed else 'FAIL'}{name}{took}" + ("" if self.passed else f"\n  {self.error}")


@dataclasses.dataclass(frozen=True)
class _DfxOpts:
    """pypto's bundle of a run's DFX switches (a ``RunConfig``'s five): pldemu's harness run records them
    and has none of simpler's DFX outputs to write."""

    enable_chip_swimlane: int | bool = 0
    enable_dump_args: int = 0
    enable_pmu: int = 0
    enable_dep_gen: bool = False
    enable_scope_stats: bool = False

    def any(self) -> bool:
        return bool(self.enable_chip_swimlane or self.enable_dump_args or self.enable_pmu or self.enable_dep_gen
                    or self.enable_scope_stats)

    @classmethod
    def from_run_config(cls, cfg: RunConfig) -> _DfxOpts:
        return cls(cfg.enable_chip_swimlane, cfg.enable_dump_args, cfg.enable_pmu, cfg.enable_dep_gen,
                   cfg.enable_scope_stats)


def _execute_on_device(work_dir: Path, golden_path: Path, chip_callable: Any, runtime_name: str, platform: str,
                       device_id: int, dfx: _DfxOpts = _DfxOpts(), validate: bool = True,
                       actual_out_dir: Path | None = None, enable_sdma: bool = False) -> None:
    """pypto's harness run of a build folder: ``chip_callable`` (from ``compile_and_assemble``) on the
    folder's inputs, its outputs compared with the golden ones at ``golden.py``'s tolerances (AssertionError
    on a mismatch). The device, platform, runtime name, SDMA and DFX switches change nothing computed."""
    execute_on_device(work_dir, golden_path, chip_callable, validate=validate, actual_out_dir=actual_out_dir)


__all__ = ["PLATFORMS", "RING_DEPTH", "RING_RULES", "RunConfig", "RunResult", "_DfxOpts", "_execute_on_device",
           "execute_compiled", "validate_persisted_outputs"]
