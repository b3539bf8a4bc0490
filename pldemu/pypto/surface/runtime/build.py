"""``pypto.runtime.compile_program``: pypto's test harness compiles a program into a build folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pldemu.pypto.harness_build import write_placeholders
from pldemu.pypto.surface.ir import compile as ir_compile


def compile_program(program: Any, work_dir: Path, **_compiler_options: Any) -> None:
    """pypto's ``runtime.compile_program``: ``ir.compile(program, work_dir)``, and the placeholder sources the
    harness looks for; the compiler options (strategy, backend, pass dumps, memory planner, ...) tune code
    generation pldemu does not do."""
    work_dir = Path(work_dir)
    ir_compile(program, str(work_dir))
    write_placeholders(program, work_dir)


__all__ = ["compile_program"]
