"""The kinds of ``pl.jit`` function and what a jit function object is to the rest of the room.

:class:`JitFunctionLike` is what discovery and specialisation read of a decorated function (the
attributes pypto-lib reads too), so that they need not import the decorator that calls them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Protocol, TypeGuard

from pldemu.pypto.capture import Kind


class JitKind(enum.Enum):
    """pypto's ``_func_type`` of a ``pl.jit`` function, and the kind of function it specialises to."""

    ORCHESTRATION = "orchestration"
    HOST = "host"
    INCORE = "incore"
    INLINE = "inline"
    OPAQUE = "opaque"

    @property
    def kind(self) -> Kind:
        return _KINDS[self]


_KINDS = {JitKind.ORCHESTRATION: Kind.ORCHESTRATION, JitKind.HOST: Kind.HOST, JitKind.INCORE: Kind.INCORE,
          JitKind.INLINE: Kind.INLINE, JitKind.OPAQUE: Kind.OPAQUE}


class JitFunctionLike(Protocol):
    """A ``pl.jit`` function object (:class:`~pldemu.pypto.jit.decorator.JITFunction`)."""

    __name__: str
    _func: Callable[..., Any]
    _kind: JitKind
    _cache: dict[Any, Any]
    _memo: dict[str, Any]


def is_jit_function(value: Any) -> TypeGuard[JitFunctionLike]:
    """``value`` is a ``pl.jit`` function object."""
    return isinstance(getattr(value, "_kind", None), JitKind) and callable(getattr(value, "_func", None))


__all__ = ["JitFunctionLike", "JitKind", "is_jit_function"]
