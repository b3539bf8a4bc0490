"""Helpers of the single-process runtime tests (a unique module name: test dirs share sys.path)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mpi4py import MPI

from pldemu.ir import Program, format_program
from pldemu.runtime import ProgramInstance, RuntimeOptions


@contextmanager
def instance(program: Program, **options: Any) -> Iterator[ProgramInstance]:
    """The program instantiated on COMM_SELF (one rank), closed afterwards even when a test fails."""
    inst = ProgramInstance(program, MPI.COMM_SELF, RuntimeOptions(**options))
    try:
        yield inst
    finally:
        inst.close()  # one rank: the collective free cannot hang


def printed_line(program: Program, line: int) -> str:
    """Line ``line`` (1-based) of the printed program, stripped, without a trailing block brace."""
    text = format_program(program).splitlines()[line - 1].strip()
    return text.removesuffix("{").rstrip()
