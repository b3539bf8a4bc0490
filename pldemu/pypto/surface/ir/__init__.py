"""``pypto.ir``: ``compile(program, platform=, distributed_config=)`` returns a callable program."""

from __future__ import annotations

from typing import Any

from pldemu.pypto.capture import CapturedProgram
from pldemu.pypto.surface.ir.distributed_compiled_program import (
    DistributedCompiledProgram,
    DistributedConfig,
    ParamDirection,
)


def compile(program: Any, platform: str | None = None, distributed_config: DistributedConfig | None = None,
            **_ignored: Any) -> DistributedCompiledProgram:
    """Compile a ``@pl.program`` for the devices of ``distributed_config`` (default: device 0)."""
    __tracebackhide__ = True
    if not isinstance(program, CapturedProgram):
        raise TypeError(f"ir.compile takes a @pl.program class, got {type(program).__name__}")
    config = distributed_config or DistributedConfig(device_ids=[0])
    return DistributedCompiledProgram(program, config, platform)


__all__ = ["DistributedCompiledProgram", "DistributedConfig", "ParamDirection", "compile"]
