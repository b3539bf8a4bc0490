"""``pypto.runtime.runner``: ``RunConfig``, and single-device execution (not used by distributed programs)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pldemu.pypto.surface.backend import BackendType, backend_for

PLATFORMS = ("a2a3sim", "a2a3", "a5sim", "a5")


@dataclasses.dataclass
class RunConfig:
    """pypto's ``RunConfig``, field for field (pypto-lib filters its keywords through
    ``dataclasses.fields``). What pldemu reads: ``platform`` (validated as pypto validates it, and
    recorded) and ``distributed_config`` (the devices, at compile time). Every other field is accepted
    and has no effect: it tunes pypto's compiler passes, kernel code generation, the device runtime's
    rings, or its profiling outputs, none of which pldemu has (docs/pypto-frontend.md). pldemu's own
    run options come from the ``pldemu python`` / ``pldemu pytest`` flags (``pldemu.pypto.session``)."""

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
        if self.platform not in PLATFORMS:
            raise ValueError(f"Invalid platform {self.platform!r}. Expected 'a2a3sim', 'a2a3', 'a5sim', or 'a5'.")
        self.backend_type = backend_for(self.platform)


def execute_compiled(*args: Any, **kwargs: Any) -> Any:
    """pypto's single-device runner: out of scope (distributed programs run through distributed_runner)."""
    raise NotImplementedError("single-device pypto execution is out of scope for pldemu's pypto layer")


__all__ = ["PLATFORMS", "RunConfig", "execute_compiled"]
