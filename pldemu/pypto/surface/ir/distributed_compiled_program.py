"""``pypto.ir.distributed_compiled_program``: the config and the compiled program a call runs.

Calling a :class:`DistributedCompiledProgram` goes through
``pypto.runtime.distributed_runner.execute_distributed`` (looked up at call time), which is the one
execution edge pypto's ``--codegen-only`` conftest patches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pldemu.pypto.capture import CapturedProgram


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """The devices of one program (``device_ids``: one rank each); the rest is accepted and unused."""

    device_ids: Sequence[int] = (0,)
    num_sub_workers: int = 0
    aicpu_thread_num: int | None = None

    def __post_init__(self) -> None:
        ids = list(self.device_ids)
        if not ids:
            raise ValueError("DistributedConfig.device_ids must not be empty")
        if len(set(ids)) != len(ids):
            raise ValueError(f"DistributedConfig.device_ids must be distinct, got {ids}")
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise ValueError(f"DistributedConfig.device_ids must be non-negative ints, got {ids}")
        if self.num_sub_workers:
            raise ValueError("SubWorkers (num_sub_workers > 0) are out of scope for pldemu's pypto layer")


class DistributedCompiledProgram:
    """A compiled program: call it with the host tensors; Out / InOut ones are written in place."""

    def __init__(self, program: CapturedProgram, config: DistributedConfig, platform: str | None) -> None:
        from pldemu.pypto.artifacts import write_compile_artifacts
        from pldemu.pypto.execute import new_output_dir

        self.program = program
        self.config = config
        self.platform = platform
        self.output_dir: Path = new_output_dir(program)
        self.last: Any = None
        write_compile_artifacts(program, self.output_dir, platform or "a2a3sim")

    @property
    def nranks(self) -> int:
        return len(self.config.device_ids)

    def __call__(self, *args: Any) -> Any:
        __tracebackhide__ = True
        from pldemu.pypto.surface.runtime import distributed_runner

        return distributed_runner.execute_distributed(self, *args)

    def prepare(self, *args: Any, **kwargs: Any) -> Any:
        """pypto's persistent-worker API: out of scope here."""
        raise NotImplementedError("DistributedCompiledProgram.prepare (persistent workers) is out of scope for "
                                  "pldemu's pypto layer")


__all__ = ["DistributedCompiledProgram", "DistributedConfig"]
