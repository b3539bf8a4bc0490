"""``pypto.ir``: ``compile(program, output_dir=, platform=, distributed_config=)`` returns a callable program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pldemu.pypto.capture import CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.surface.ir.compiled_program import CompiledProgram
from pldemu.pypto.surface.ir.distributed_compiled_program import (
    DistributedCompiledProgram,
    DistributedConfig,
    ParamDirection,
)


def compile(program: Any, output_dir: str | None = None, *_compiler_options: Any, platform: str | None = None,
            distributed_config: DistributedConfig | None = None,
            **_ignored: Any) -> DistributedCompiledProgram | CompiledProgram:
    """Compile a ``@pl.program``: a :class:`DistributedCompiledProgram` for the devices of
    ``distributed_config`` (default: device 0) when some function is at HOST level, else (an L2-only
    program, as pypto decides) a :class:`CompiledProgram`. ``output_dir``: where the artifacts go (default
    a fresh temporary folder). pypto's compiler options (positional after ``output_dir``, or by keyword:
    strategy, passes, ptoas, ...) tune code generation pldemu does not do: accepted, no effect. The program
    is translated now when its host annotations tell everything a call would (static shapes but ``NR``, no
    unspecialised host scalar), so what pldemu refuses is reported here; else ``compiled.untranslated``
    says what only a call tells."""
    __tracebackhide__ = True
    if not isinstance(program, CapturedProgram):
        raise TypeError(f"ir.compile takes a @pl.program class, got {type(program).__name__}")
    folder = Path(output_dir) if output_dir is not None else None
    try:
        if not program.distributed:
            from pldemu.pypto.execute import new_output_dir

            return CompiledProgram(program, folder or new_output_dir(program), platform)
        from pldemu.pypto.execute import annotation_samples

        config = distributed_config or DistributedConfig(device_ids=[0])
        compiled = DistributedCompiledProgram(program, config, platform, output_dir=folder)
        compiled.translate_ahead(annotation_samples(program, compiled.nranks))
        return compiled
    except FrontendError as err:
        raise err.with_traceback(None) from None


__all__ = ["CompiledProgram", "DistributedCompiledProgram", "DistributedConfig", "ParamDirection", "compile"]
