"""Helpers of the single-process runtime tests (a unique module name: test dirs share sys.path)."""

from __future__ import annotations

from pldemu.ir import Program, format_program


def printed_line(program: Program, line: int) -> str:
    """Line ``line`` (1-based) of the printed program, stripped, without a trailing block brace."""
    text = format_program(program).splitlines()[line - 1].strip()
    return text.removesuffix("{").rstrip()
