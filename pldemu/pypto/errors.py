"""The one error a pypto program gets from the front end: a message at the user's file:line."""

from __future__ import annotations


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


__all__ = ["AnnotationError", "FrontendError"]
