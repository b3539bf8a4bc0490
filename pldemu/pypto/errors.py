"""The one error a pypto program gets from the front end: a message at the user's file:line; and how a
front door (the pytest plugin, ``pldemu python``) names the user's line and a pypto name the layer lacks."""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


class FrontendError(Exception):
    """Unsupported or bad pypto input, reported at ``file:line`` of the user's program (never a
    traceback from inside pldemu: the surface raises it with its context suppressed)."""

    def __init__(self, message: str, file: str = "", line: int = 0) -> None:
        self.message = message
        self.file = file
        self.line = line
        where = f"{file}:{line}: " if file else ""
        super().__init__(where + message)


class AnnotationError(FrontendError, TypeError):
    """A malformed annotation (``pl.Tensor[64, pl.FP32]``), at the line where Python evaluates it; a
    ``TypeError`` too, as Python's own subscript errors are."""


def call_site(err: BaseException, is_user: Callable[[Path], bool], *, innermost: bool = False) -> str:
    """``file:line: code`` and a newline: the user's own line that led to ``err``, the outermost frame of its
    traceback in a file ``is_user`` accepts (a test's line), or the innermost (a script's call; the
    class-body line inside a class statement); ``""`` when no frame is the user's."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_user(Path(f.filename))]
    if not frames:
        return ""
    frame = frames[-1 if innermost else 0]
    return f"{frame.filename}:{frame.lineno}: {frame.line}\n"


_SURFACE = "pldemu.pypto.surface"
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)'")


def missing_pypto_name(err: BaseException) -> str | None:
    """The pypto name (``pypto.runtime.SubWorker``) whose absence from the layer raised ``err``, or None
    when ``err`` is about something else."""
    if isinstance(err, ModuleNotFoundError):
        return err.name if err.name is not None and err.name.partition(".")[0] == "pypto" else None
    if isinstance(err, ImportError):
        found = _CANNOT_IMPORT.match(str(err))
        if found is None or not (err.name or "").startswith(_SURFACE):
            return None
        return f"{_pypto_module(err.name or '')}.{found.group(1)}"
    if not isinstance(err, AttributeError) or err.name is None:
        return None
    if isinstance(err.obj, ModuleType) and err.obj.__name__.startswith(_SURFACE):
        return f"{_pypto_module(err.obj.__name__)}.{err.name}"
    if isinstance(err.obj, type) and err.obj.__module__.startswith(_SURFACE):  # an enum member
        return f"{_pypto_module(err.obj.__module__)}.{err.obj.__qualname__}.{err.name}"
    return None


def _pypto_module(name: str) -> str:
    return "pypto" + name[len(_SURFACE):]


def not_provided(name: str) -> str:
    """What a pypto name the layer lacks is told as (after the user's ``file:line: ``)."""
    return f"{name} is not provided by pldemu's pypto layer (out of scope: see docs/pypto-frontend.md)"


__all__ = ["AnnotationError", "FrontendError", "call_site", "missing_pypto_name", "not_provided"]
