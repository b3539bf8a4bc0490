"""Read a user's program from a file: ``.pld`` text, or a Python file that builds it.

Every command that takes a program (``pldemu run``, ``pldemu stress``, ``pldemu lower``) reads it
here, so a program written with the Python builder gets every schedule, check and trace option a
``.pld`` file gets. A Python program file defines, at module level, either

* ``program``: a :class:`~pldemu.ir.nodes.Program`, or
* ``build_program()``: a function without arguments that returns one.

The file is executed with ``__name__ == "__pldemu_program__"`` (not ``"__main__"``), so code under
``if __name__ == "__main__":`` (printing, running it some other way) does not run. It is executed
on every rank of a job: it must build the same program everywhere and touch no MPI.
"""

from __future__ import annotations

import os
import runpy
import traceback
from pathlib import Path

from pldemu.ir.nodes import Program
from pldemu.ir.parser import ParseError, parse_file

RUN_NAME = "__pldemu_program__"
"""``__name__`` of a Python program file while pldemu executes it."""

PYTHON_SUFFIXES = (".py",)


class SourceError(ValueError):
    """The file cannot give a program: missing, unreadable, a parse error, or a Python file that fails
    or defines no program. The message names the file."""


def load_source(path: str | os.PathLike[str]) -> Program:
    """The program in ``path`` (``.pld`` text, or a Python file; see the module docstring)."""
    file = Path(path)
    if not file.exists():
        raise SourceError(f"{path}: no such file")
    if file.is_dir():
        raise SourceError(f"{path}: is a directory, not a program file")
    if not file.is_file():
        # Every rank reads the program again: a pipe or terminal can be read only once.
        raise SourceError(f"{path}: not a regular file (a pipe or device); write the program to a file")
    if file.suffix in PYTHON_SUFFIXES:
        return _from_python(file)
    try:
        return parse_file(file)
    except ParseError as err:
        raise SourceError(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SourceError(f"{path}: {err}") from None


def _from_python(file: Path) -> Program:
    try:
        scope = runpy.run_path(str(file), run_name=RUN_NAME)
    except SystemExit as err:
        raise SourceError(f"{file}: the program file called exit({err.code})") from None
    except Exception as err:
        # The user's own code failed: show where, without pldemu's frames around it.
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == str(file)]
        where = f" (line {frames[-1].lineno})" if frames else ""
        raise SourceError(f"{file}{where}: building the program raised {type(err).__name__}: {err}") from None
    found = scope.get("program")
    if found is None and callable(scope.get("build_program")):
        try:
            found = scope["build_program"]()
        except Exception as err:
            raise SourceError(f"{file}: build_program() raised {type(err).__name__}: {err}") from None
    if found is None:
        raise SourceError(f"{file}: defines neither `program` (a pldemu Program) nor `build_program()`")
    if not isinstance(found, Program):
        what = "build_program() returned a value" if "program" not in scope else "`program` is"
        raise SourceError(f"{file}: {what} of type {type(found).__name__}, not a pldemu Program "
                          "(ProgramBuilder.build() makes one)")
    return found


__all__ = ["RUN_NAME", "SourceError", "load_source"]
