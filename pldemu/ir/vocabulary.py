"""The vocabulary of an op signature, shared by the three signature tables (core, tile, MX).

``Kind`` (what an argument must be), ``Param``, ``AttrSpec``, ``Signature`` (parameters, attributes,
result-type deducer) and ``IRTypeError``, plus the helpers every table's deducers use (``describe``,
``static_numel``, ``sig``). It imports no table, so the tables import it without a circle.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pldemu.ir.nodes import (
    Arg,
    AttrValue,
    CommCtxType,
    Expr,
    ScalarType,
    TensorType,
    TileType,
    TupleType,
    Type,
    static_int,
)
from pldemu.ir.ops import Op


class IRTypeError(ValueError):
    """A call whose arguments do not fit its op. The message names op, argument and expectation."""

    def __init__(self, op: Op, arg: str, expected: str, got: str = "", *, message: str = "") -> None:
        self.op, self.arg, self.expected = op, arg, expected
        tail = f", got {got}" if got else ""
        super().__init__(message or f"{op.text}: argument '{arg}' must be {expected}{tail}")

    @classmethod
    def arity(cls, op: Op, names: str, given: int) -> IRTypeError:
        """A call with too few or too many arguments."""
        plural = "argument" if given == 1 else "arguments"
        return cls(op, "arguments", f"({names})", message=f"{op.text} takes ({names}), got {given} {plural}")


class Kind(enum.Enum):
    """Parameter kinds."""

    TENSOR = "tensor"
    WINDOW = "window tensor"
    TILE = "tile"
    TENSOR_OR_TILE = "tensor or tile"
    SCALAR = "scalar"
    LIST = "list"
    STATIC_LIST = "list of integer literals"
    CTX = "comm context"
    TILE_OR_SCALAR = "tile or scalar"
    TUPLE = "tuple"
    VALUE = "value"


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    optional: bool = False  # optional params are trailing and come together or not at all
    writes: bool = False
    """ArgEffect::Write: the op writes this (workspace) argument, so the call is never dead code."""


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: type  # an IntEnum subclass, DType, int, float or str
    default: AttrValue | None  # None: required
    implicit: bool = False
    """An attribute added to an op after programs were written with it: left out of the call (and so of
    its text) while it holds its default, so those programs and their printed form stay as they were."""


Deducer = Callable[[Op, Sequence[Arg], Mapping[str, AttrValue]], Type]


@dataclass(frozen=True)
class Region:
    """A region an op accesses, as data: the launcher's precheck refuses every one whose values are
    known before the run and that leaves what it accesses (``pldemu.job.precheck``).

    ``of`` names the parameter accessed: a tensor (its view's shape), a tile (its shape), or a list of
    extents (a valid shape must fit in that shape). ``offsets``: the parameter holding the region's
    start (None: the origin). ``extent``: the parameter holding its extent, a list (fitted to the rank
    of ``of``: leading unit dims dropped or added, as a put's shape is) or a tile, whose valid region
    it is (a store writes its tile's valid region); None: one element (an index). ``valid``: a
    parameter that, when given, is the extent instead (a load reads its valid shape). A region whose
    parameters are optional and not given is not accessed."""

    of: str
    offsets: str | None = None
    extent: str | None = None
    valid: str | None = None

    def params(self) -> tuple[str, ...]:
        """Every parameter the region names."""
        return tuple(p for p in (self.of, self.offsets, self.extent, self.valid) if p is not None)

    @staticmethod
    def fit(extent: tuple[int, ...], rank: int) -> tuple[int, ...] | None:
        """``extent`` with ``rank`` dims, leading unit dims dropped or added (a put may give its shape
        in the source's rank or the destination's); None if it cannot address a ``rank``-D region."""
        n = len(extent)
        if n == rank:
            return extent
        if n > rank and all(e == 1 for e in extent[: n - rank]):
            return extent[n - rank:]
        return (1,) * (rank - n) + extent if n < rank else None


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]
    attrs: tuple[AttrSpec, ...]
    deduce: Deducer
    regions: tuple[Region, ...] = ()
    """The regions of its operands the op accesses (see :class:`Region`)."""

    def index(self, name: str) -> int:
        """The position of parameter ``name``."""
        return next(i for i, p in enumerate(self.params) if p.name == name)


def describe(t: Type) -> str:
    """Short human description of a type for error messages."""
    if isinstance(t, TensorType):
        what = "window" if t.window else "tensor"
        return f"{what} {t.dtype.value}[{len(t.shape)}-d]"
    if isinstance(t, TileType):
        return f"tile {t.dtype.value}{list(t.shape)}"
    if isinstance(t, ScalarType):
        return f"scalar {t.dtype.value}"
    if isinstance(t, CommCtxType):
        return "comm context"
    if isinstance(t, TupleType):
        return "tuple(" + ", ".join(describe(e) for e in t.elements) + ")"
    return "nothing"


def static_numel(shape: Sequence[Expr]) -> int | None:
    """The element count of a shape whose every extent is static, else None."""
    n = 1
    for d in shape:
        v = static_int(d)
        if v is None:
            return None
        n *= v
    return n


def sig(params: Sequence[tuple[str, Kind] | tuple[str, Kind, bool]], deduce: Deducer,
        attrs: Sequence[AttrSpec] = (), regions: Sequence[Region] = (), writes: Sequence[str] = ()) -> Signature:
    """A signature from ``(name, kind[, optional])`` rows; ``regions``: the operand regions the op
    accesses; ``writes``: the parameters the op writes."""
    ps = tuple(Param(p[0], p[1], bool(p[2]) if len(p) > 2 else False, p[0] in writes) for p in params)
    return Signature(ps, tuple(attrs), deduce, tuple(regions))


__all__ = ["AttrSpec", "Deducer", "IRTypeError", "Kind", "Param", "Region", "Signature", "describe", "sig", "static_numel"]
