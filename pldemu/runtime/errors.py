"""Errors of the runtime, and how an error raised while executing a statement gets its program location.

Out-of-bounds accesses stay the windows layer's ``WindowAccessError`` (also for rank-local buffers and
tiles, so one ``except`` catches every refused access); the interpreter re-raises them with the
program location in front of the windows layer's message.
"""

from __future__ import annotations

from pldemu.windows import WindowAccessError, WindowError


class ProgramError(Exception):
    """A program that cannot be instantiated or executed: malformed, not lowered, bad shapes, a scalar
    fault (division by zero, a float where an index is needed), an illegal region or valid shape.

    ``location`` is the program location (``main:12 <statement>``) when the error happened while
    executing a statement, else ``None``.
    """

    def __init__(self, message: str, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class AllocationError(Exception):
    """The machine could not give this rank its buffers (out of memory, an address-space limit, MPI
    refusing the window). Unlike a ``ProgramError`` it need not happen on every rank alike, so the
    windows cannot be freed collectively: the caller reports it and ends the job."""


class DeadlockError(Exception):
    """A wait passed its deadline. The message holds the wait-for report of every rank.

    ``primary`` is False when a lower rank had already timed out when this one looked: that rank
    prints the report, this one only needs to say where it was stuck.
    """

    def __init__(self, message: str, *, rank: int, location: str, report: str, primary: bool) -> None:
        self.rank = rank
        self.location = location
        self.report = report
        self.primary = primary
        super().__init__(f"{message}\n{report}")


LOCATED = "pld_location"
"""Attribute set on an exception once it carries a program location (so outer statements keep it)."""

_PROGRAM_FAULTS = (ArithmeticError, TypeError, ValueError, IndexError)
"""Python errors that, raised while evaluating a statement, mean the program did something illegal."""


def locate(err: BaseException, location: str) -> BaseException:
    """The exception to raise for ``err`` raised at ``location``: the same one if it is already located;
    access errors re-created with the location in front of their message; scalar/numpy faults turned
    into ``ProgramError``; anything else (an interpreter bug) annotated with a note only."""
    if getattr(err, LOCATED, None) is not None:
        return err
    out: BaseException
    if isinstance(err, DeadlockError):
        out = err
    elif isinstance(err, ProgramError):
        out = err if err.location else ProgramError(str(err), location)
    elif isinstance(err, WindowError):
        try:
            out = type(err)(f"{location}: {err}")
        except TypeError:  # an error class with a richer constructor: keep it, add a note
            out = err
            err.add_note(f"at {location}")
    elif isinstance(err, _PROGRAM_FAULTS):
        out = ProgramError(f"{type(err).__name__}: {err}", location)
    else:
        out = err
        err.add_note(f"at {location}")
    setattr(out, LOCATED, location)
    return out


__all__ = [
    "AllocationError","DeadlockError", "ProgramError", "WindowAccessError", "locate"]
