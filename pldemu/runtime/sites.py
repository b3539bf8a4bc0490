"""Program locations and call sites.

A location names a statement as ``FUNC:LINE TEXT [FILE:LINE]`` where LINE is the statement's line in the
printed program (``pldemu.ir.format_program``; ``pldemu run --dump`` writes that text next to the
buffers), TEXT the statement as printed, and ``[FILE:LINE]`` the line of the user's ``.pld`` or Python
builder file it came from (``, lowered from OP`` when LowerCompositeOps expanded a composite there). A call site is one op application in the program: its op, decoded
attributes, location and a small integer id that every rank agrees on (the status board publishes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pldemu.ir import Call, Op, SourcePos


@dataclass(frozen=True, slots=True)
class Location:
    """Where a statement is: function, printed-program line, printed text, and the user's line it
    came from (``origin``: the ``.pld`` or Python builder file's line, and the composite it was lowered
    from), when known."""

    func: str
    line: int
    text: str
    origin: SourcePos | None = None

    @property
    def printed(self) -> str:
        """``FUNC:LINE TEXT`` alone (a program error's prefix, followed by its message)."""
        return f"{self.func}:{self.line} {self.text}"

    def __str__(self) -> str:
        return f"{self.printed} [{self.origin}]" if self.origin is not None else self.printed


@dataclass(frozen=True, eq=False, slots=True)
class CallSite:
    """One op application in the program (``attrs`` decoded for the handler)."""

    id: int
    op: Op
    call: Call
    location: Location
    attrs: Mapping[str, Any]

    @property
    def where(self) -> str:
        return str(self.location)


@dataclass(frozen=True, slots=True)
class OpEvent:
    """What a listener sees for every executed op: the rank, the op, its evaluated arguments (scalars,
    offset tuples, ``TensorRef``/``Tile`` values, in signature order) and the call site."""

    rank: int
    op: Op
    args: tuple[Any, ...]
    site: CallSite

    @property
    def location(self) -> Location:
        return self.site.location


__all__ = ["CallSite", "Location", "OpEvent"]
