"""Errors of the runtime, and how an error raised while executing a statement gets its program location.

Out-of-bounds accesses stay the windows layer's ``WindowAccessError`` (also for rank-local buffers and
tiles, so one ``except`` catches every refused access); the interpreter re-raises them with the
program location in front of the windows layer's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


ROOT_CAUSE_ORDER = ("invariant", "race", "wrong-data")
"""Which known failure a deadlock report names first (``pldemu.job.outcome.PRIORITY``'s order)."""


@dataclass(frozen=True)
class Cause:
    """A failure already known when a wait gave up: its kind (``invariant``, ``race``), the 0-based
    iteration it happened in (-1: not known) and its report line."""

    kind: str
    iteration: int
    text: str


class DeadlockError(Exception):
    """A wait passed its deadline. The message holds the wait-for report of every rank.

    ``primary`` is False when a lower rank had already timed out when this one looked: that rank
    prints the report, this one only needs to say where it was stuck. ``causes``: the invariant
    violations and races known when the wait gave up (the likely root cause, named first).
    """

    def __init__(self, message: str, *, rank: int, location: str, report: str, primary: bool,
                 causes: tuple[Cause, ...] = ()) -> None:
        self.rank = rank
        self.location = location
        self.report = report
        self.primary = primary
        self.message = message
        self.causes = causes
        head = f"{causes[0].text}\nthen {message}" if causes else message
        known = [f"root causes known when the wait gave up ({len(causes)}):", *(f"  {c.text}" for c in causes)]
        super().__init__("\n".join([head, *(known if len(causes) > 1 else []), report]))

    def with_causes(self, more: tuple[Cause, ...]) -> DeadlockError:
        """The same deadlock with ``more`` causes (known to the harness, e.g. races found at an earlier
        checkpoint) added; root causes first: invariants, then races, then wrong data."""
        mine = {c.kind for c in self.causes}
        # The status board already holds every rank's first violation: the harness's own line of the
        # same kind would say it twice.
        extra = tuple(c for c in more if c.kind not in mine)
        causes = tuple(sorted((*self.causes, *extra), key=lambda c: ROOT_CAUSE_ORDER.index(c.kind)
                              if c.kind in ROOT_CAUSE_ORDER else len(ROOT_CAUSE_ORDER)))
        return DeadlockError(self.message, rank=self.rank, location=self.location, report=self.report,
                             primary=self.primary, causes=causes)


LOCATED = "pld_location"
"""Attribute set on an exception once it carries a program location (so outer statements keep it)."""

ORIGIN = "pld_origin"
"""Attribute set with ``LOCATED`` when the statement's user line (``FILE:LINE``) is known: a rank's failure
text names it after the message (:func:`user_line`), the prefix staying the printed location."""

_PROGRAM_FAULTS = (ArithmeticError, TypeError, ValueError, IndexError)
"""Python errors that, raised while evaluating a statement, mean the program did something illegal."""


def user_line(err: BaseException) -> str | None:
    """The user's ``FILE:LINE`` of the statement ``err`` was raised at, when known."""
    return getattr(err, ORIGIN, None)


def locate(err: BaseException, location: str, origin: str | None = None) -> BaseException:
    """The exception to raise for ``err`` raised at ``location`` (``origin``: the user's line of it): the same
    one if it is already located; access errors re-created with the location in front of their message;
    scalar/numpy faults turned into ``ProgramError``; anything else (an interpreter bug) annotated with a
    note only."""
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
    if origin is not None:
        setattr(out, ORIGIN, origin)
    return out


def failure_key(err: BaseException) -> str:
    """What makes two ranks' ``err`` the same failure: its type and program location (their messages
    may differ, e.g. each names its own rank), or, when it has no location, its text with every rank
    number masked (``rank 3`` -> ``rank #``), so that ranks whose messages differ only by the rank
    they name are one failure."""
    location = getattr(err, LOCATED, None) or getattr(err, "location", None)
    if location:
        return f"{type(err).__name__} at {location}"
    return f"{type(err).__name__}: " + _RANK_NUMBER.sub(r"\1#", str(err))


_RANK_NUMBER = re.compile(r"\b(ranks? )\d+")


__all__ = [
    "AllocationError", "Cause", "DeadlockError", "ProgramError", "WindowAccessError", "failure_key", "locate"]
