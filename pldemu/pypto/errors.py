"""The one error a pypto program gets from the front end: a message at the user's file:line; and how a
front door (the pytest plugin, ``pldemu python``) names the user's line and a pypto name the layer lacks."""

from __future__ import annotations

import re
import sys
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


class ConfigError(FrontendError, ValueError):
    """A config value pypto refuses with a ``ValueError`` (``RunConfig(ring_heap=1000)``), at the line
    that built the config; a ``ValueError`` too, so ``pytest.raises(ValueError, match=...)`` holds."""


class ConfigTypeError(FrontendError, TypeError):
    """A config value pypto refuses with a ``TypeError`` (a swimlane level that is no int), at the line
    that built the config."""


def user_frame(depth: int) -> tuple[str, int]:
    """``(file, line)`` of the first frame at or above ``depth`` (counted from the caller) that is not
    generated code (a dataclass's ``__init__`` is ``<string>``) or the ``dataclasses`` module
    (``dataclasses.replace``): the user's line that built a config."""
    frame = sys._getframe(depth + 1)
    while frame.f_back is not None and (frame.f_code.co_filename.startswith("<")
                                        or Path(frame.f_code.co_filename).name == "dataclasses.py"):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


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


SIMPLER_MODULES = frozenset({"simpler", "simpler_setup"})
"""simpler's packages (pypto's simulator and device runtime): a test that imports them drives simpler's
own API, which pldemu does not emulate."""


def missing_pypto_name(err: BaseException) -> str | None:
    """The pypto name (``pypto.runtime.SubWorker``), or simpler module (``simpler.worker``), whose absence
    from the layer raised ``err``, or None when ``err`` is about something else."""
    if isinstance(err, ModuleNotFoundError):
        root = (err.name or "").partition(".")[0]
        return err.name if root == "pypto" or root in SIMPLER_MODULES else None
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


_NOT_EMULATED = (
    ("pypto.runtime.device_runner", "out of scope, simpler's device runner (compile_and_assemble, ChipCallable): "
                                    "pypto's boundary to simpler's runtime, which pldemu does not emulate"),
    *((root, "out of scope, simpler's own runtime API (Worker, TaskArgs, make_tensor_arg), not pypto's: pldemu "
             "runs pypto's DSL and does not emulate simpler") for root in sorted(SIMPLER_MODULES)),
)
"""Name prefixes that are out of scope for a reason of their own (simpler's API), and the reason."""


def not_provided(name: str) -> str:
    """What a pypto name the layer lacks is told as (after the user's ``file:line: ``)."""
    reason = next((why for prefix, why in _NOT_EMULATED if name == prefix or name.startswith(prefix + ".")),
                  "out of scope")
    return f"{name} is not provided by pldemu's pypto layer ({reason}: see docs/pypto-frontend.md)"


__all__ = ["SIMPLER_MODULES", "AnnotationError", "ConfigError", "ConfigTypeError", "FrontendError", "call_site",
           "missing_pypto_name", "not_provided", "user_frame"]
