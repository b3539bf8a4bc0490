"""One table of op signatures: parameter kinds, attributes with defaults, and a result-type deducer.

``make_call`` is the only way IR calls are built (builder, parser, lowering all use it), so every
call in every program has checked arguments, canonical attributes (defaults filled, table order)
and a deduced result type.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import (
    AllreduceMode,
    AtomicType,
    Layout,
    MemorySpace,
    NotifyOp,
    PadValue,
    ReduceOp,
    WaitCmp,
)
from pldemu.ir.nodes import (
    COMM_CTX,
    INT32,
    NONE,
    Arg,
    AttrValue,
    Call,
    CommCtxType,
    Expr,
    ListExpr,
    ScalarType,
    TensorType,
    TileType,
    TupleType,
    Type,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.printer import format_attr


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


Deducer = Callable[[Op, Sequence[Arg], Mapping[str, AttrValue]], Type]


@dataclass(frozen=True)
class Region:
    """A region an op accesses, as data: the launcher's precheck refuses every one whose values are
    known before the run and that leaves what it accesses (``pldemu.runtime.precheck``).

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


# ----------------------------------------------------------------------------------------------
# Kind checks
# ----------------------------------------------------------------------------------------------


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


def _check_kind(op: Op, p: Param, a: Arg) -> None:
    if p.kind in (Kind.LIST, Kind.STATIC_LIST):
        if not isinstance(a, ListExpr):
            raise IRTypeError(op, p.name, "a [list] of scalars", type(a).__name__)
        for item in a.items:
            if not isinstance(item.type, ScalarType):
                raise IRTypeError(op, p.name, "a list of scalars", describe(item.type))
            if p.kind is Kind.STATIC_LIST and static_int(item) is None:
                raise IRTypeError(op, p.name, "a list of integer literals (static shape)")
        return
    if isinstance(a, ListExpr):
        raise IRTypeError(op, p.name, f"a {p.kind.value}", "a list")
    t = a.type
    ok = {
        Kind.TENSOR: isinstance(t, TensorType),
        Kind.WINDOW: isinstance(t, TensorType) and t.window,
        Kind.TILE: isinstance(t, TileType),
        Kind.TENSOR_OR_TILE: isinstance(t, (TensorType, TileType)),
        Kind.SCALAR: isinstance(t, ScalarType),
        Kind.CTX: isinstance(t, CommCtxType),
        Kind.TILE_OR_SCALAR: isinstance(t, (TileType, ScalarType)),
        Kind.TUPLE: isinstance(t, TupleType),
        Kind.VALUE: isinstance(t, (TileType, TensorType, ScalarType, TupleType)),
    }[p.kind]
    if not ok:
        raise IRTypeError(op, p.name, f"a {p.kind.value}", describe(t))


def _static_shape(lst: Arg) -> tuple[int, ...]:
    assert isinstance(lst, ListExpr)
    out = []
    for item in lst.items:
        v = static_int(item)
        assert v is not None
        out.append(v)
    return tuple(out)


def _items(lst: Arg) -> tuple[Expr, ...]:
    assert isinstance(lst, ListExpr)
    return lst.items


def _tensor(a: Arg) -> TensorType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TensorType)
    return a.type


def _tile(a: Arg) -> TileType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TileType)
    return a.type


# ----------------------------------------------------------------------------------------------
# Deducers
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SameAsArg:
    """Deducer: the result is argument ``index`` (its type, and for a tensor the memory it names)."""

    index: int

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        a = args[self.index]
        assert not isinstance(a, ListExpr)
        return a.type


def _none(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    return NONE


def _int32(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    return INT32


def _ctx(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    return COMM_CTX


def _region_rank(op: Op, name: str, lst: Arg, rank: int) -> None:
    if len(_items(lst)) != rank:
        raise IRTypeError(op, name, f"a list of {rank} entries (one per dimension)", f"{len(_items(lst))}")


def _deduce_put(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    dst, src, stage = _tensor(args[0]), args[2], _tile(args[3])
    assert not isinstance(src, ListExpr)
    src_t = src.type
    assert isinstance(src_t, (TensorType, TileType))
    if src_t.dtype != dst.dtype or stage.dtype != dst.dtype:
        raise IRTypeError(op, "src", f"the dtype of dst ({dst.dtype.value}) for src and stage")
    if len(args) > 4:
        _region_rank(op, "dst_offsets", args[4], len(dst.shape))
        _region_rank(op, "src_offsets", args[5], len(src_t.shape))
        if len(_items(args[6])) not in (len(dst.shape), len(src_t.shape)):
            raise IRTypeError(op, "shape", "a list with one entry per dimension")
    return NONE


def _deduce_get(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    dst, src, stage = _tensor(args[0]), _tensor(args[2]), _tile(args[3])
    if src.dtype != dst.dtype or stage.dtype != dst.dtype:
        raise IRTypeError(op, "src", f"the dtype of dst ({dst.dtype.value}) for src and stage")
    if len(args) > 4:
        _region_rank(op, "dst_offsets", args[4], len(dst.shape))
        _region_rank(op, "src_offsets", args[5], len(src.shape))
    return NONE


def _valid_or_none(shape: tuple[int, ...], valid: Arg | None) -> tuple[Expr, ...] | None:
    if valid is None:
        return None
    items = _items(valid)
    if tuple(static_int(i) for i in items) == shape:
        return None  # fully valid: canonical form has no valid_shape
    return items


def _deduce_load_like(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    # tile.load(tensor, offsets, shape, [valid]) and pld.tile.remote_load(window, peer, offsets, ...)
    t = _tensor(args[0])
    base = 2 if op is Op.REMOTE_LOAD else 1
    _region_rank(op, "offsets", args[base], len(t.shape))
    shape = _static_shape(args[base + 1])
    if len(shape) != len(t.shape):
        raise IRTypeError(op, "shape", f"a list of {len(t.shape)} entries")
    if any(s <= 0 for s in shape):
        raise IRTypeError(op, "shape", "positive extents", str(list(shape)))
    valid = args[base + 2] if len(args) > base + 2 else None
    if valid is not None:
        _region_rank(op, "valid_shape", valid, len(shape))
    return TileType(t.dtype, shape, _valid_or_none(shape, valid), MemorySpace.Vec)


def _deduce_store(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    tile, t = _tile(args[0]), _tensor(args[2])
    if tile.dtype != t.dtype:
        raise IRTypeError(op, "tile", f"dtype {t.dtype.value} (the tensor's)", tile.dtype.value)
    _region_rank(op, "offsets", args[1], len(t.shape))
    if len(tile.shape) != len(t.shape):
        raise IRTypeError(op, "tile", f"rank {len(t.shape)} (the tensor's)", str(len(tile.shape)))
    return NONE


def _deduce_create(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    dtype = attrs["dtype"]
    mem = attrs.get("mem", MemorySpace.Vec)
    assert isinstance(dtype, DType) and isinstance(mem, MemorySpace)
    shape = _static_shape(args[0])
    if any(s <= 0 for s in shape):
        raise IRTypeError(op, "shape", "positive extents", str(list(shape)))
    return TileType(dtype, shape, None, mem)


def _deduce_set_valid(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tile(args[0])
    _region_rank(op, "valid_shape", args[1], len(t.shape))
    return TileType(t.dtype, t.shape, _valid_or_none(t.shape, args[1]), t.memory)


def _deduce_fillpad(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tile(args[0])
    return TileType(t.dtype, t.shape, None, t.memory)


def _deduce_binary_tile(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    a, b = _tile(args[0]), _tile(args[1])
    if a.shape != b.shape or a.dtype != b.dtype:
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value}{list(a.shape)} like lhs", describe(b))
    if not a.dtype.is_float and op is not Op.TILE_ADD and not a.dtype.is_int:
        raise IRTypeError(op, "lhs", "a numeric tile", describe(a))
    return a


def _deduce_view(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tensor(args[0])
    if t.strides is not None:
        raise IRTypeError(op, "tensor", "a packed tensor (tensor.view cannot view strided data)")
    shape = _items(args[1])
    old, new = _static_numel(t.shape), _static_numel(shape)
    if old is not None and new is not None and old != new:
        raise IRTypeError(op, "shape", f"{old} elements (the tensor's)", f"{new}")
    valid = _items(args[2]) if len(args) > 2 else None
    if valid is not None and len(valid) != len(shape):
        raise IRTypeError(op, "valid_shape", f"a list of {len(shape)} entries")
    return TensorType(t.dtype, shape, valid, t.window, t.layout, None)


def _static_numel(shape: Sequence[Expr]) -> int | None:
    n = 1
    for d in shape:
        v = static_int(d)
        if v is None:
            return None
        n *= v
    return n


def _deduce_read(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tensor(args[0])
    _region_rank(op, "indices", args[1], len(t.shape))
    return ScalarType(t.dtype)


def _deduce_write(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tensor(args[0])
    _region_rank(op, "indices", args[1], len(t.shape))
    return NONE


def _deduce_signal_op(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    sig = _tensor(args[0])
    if sig.dtype != DType.INT32:
        raise IRTypeError(op, "signal", "an INT32 window", describe(sig))
    cells = args[2] if op is Op.NOTIFY else args[1]
    _region_rank(op, "offsets", cells, len(sig.shape))
    return NONE


def _deduce_cacheinvalid(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    # Arity 0 (the whole global memory) or 3 (tensor, shapes, offsets: the region form).
    if len(args) not in (0, 3):
        raise IRTypeError.arity(op, "tensor, shapes, offsets) or (", len(args))
    if args:
        rank = len(_tensor(args[0]).shape)
        _region_rank(op, "shapes", args[1], rank)
        _region_rank(op, "offsets", args[2], rank)
    return NONE


# ----------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------

T, W, TL, TT, S, L, SL, C = (
    Kind.TENSOR,
    Kind.WINDOW,
    Kind.TILE,
    Kind.TENSOR_OR_TILE,
    Kind.SCALAR,
    Kind.LIST,
    Kind.STATIC_LIST,
    Kind.CTX,
)


def _sig(params: Sequence[tuple[str, Kind] | tuple[str, Kind, bool]], deduce: Deducer,
         attrs: Sequence[AttrSpec] = (), regions: Sequence[Region] = ()) -> Signature:
    ps = tuple(Param(p[0], p[1], bool(p[2]) if len(p) > 2 else False) for p in params)
    return Signature(ps, tuple(attrs), deduce, tuple(regions))


# The tile-math/select entries live in their own module, which needs the classes above: imported
# here, once they exist, and merged into the one table below.
from pldemu.ir.mx_signatures import MX_SIGNATURES  # noqa: E402
from pldemu.ir.tile_signatures import TILE_SIGNATURES  # noqa: E402

_REDUCE = AttrSpec("op", ReduceOp, ReduceOp.Sum)
_TRANSFER_REGIONS = (Region("dst", "dst_offsets", "shape"), Region("src", "src_offsets", "shape"))
_LOAD_REGIONS = (Region("tensor", "offsets", "shape", valid="valid_shape"), Region("shape", extent="valid_shape"))

SIGNATURES: Mapping[Op, Signature] = MappingProxyType(
    {
        # Collectives: kinds only; their semantic contracts are checked by LowerCompositeOps.
        Op.ALLREDUCE: _sig([("target", T), ("signal", T)], SameAsArg(0),
                           [_REDUCE, AttrSpec("mode", AllreduceMode, AllreduceMode.mesh)]),
        Op.ALLGATHER: _sig([("local_data", T), ("target", T), ("signal", T)], SameAsArg(1)),
        Op.REDUCE_SCATTER: _sig([("target", T), ("signal", T)], SameAsArg(0), [_REDUCE]),
        Op.BROADCAST: _sig([("target", T), ("signal", T)], SameAsArg(0), [AttrSpec("root", int, None)]),
        Op.BARRIER: _sig([("signal", T)], SameAsArg(0)),
        Op.ALL_TO_ALL: _sig([("input", T), ("target", T), ("signal", T)], SameAsArg(1)),
        Op.ALL_TO_ALL_V: _sig(
            [("input", T), ("target", T), ("signal", T), ("send_counts", T), ("recv_counts", T)],
            SameAsArg(1),
        ),
        # Distributed primitives.
        Op.PUT: _sig(
            [("dst", W), ("peer", S), ("src", TT), ("stage", TL), ("dst_offsets", L, True),
             ("src_offsets", L, True), ("shape", L, True)],
            _deduce_put, [AttrSpec("atomic", AtomicType, AtomicType.None_)], _TRANSFER_REGIONS,
        ),
        Op.GET: _sig(
            [("dst", T), ("peer", S), ("src", W), ("stage", TL), ("dst_offsets", L, True),
             ("src_offsets", L, True), ("shape", L, True)],
            _deduce_get, regions=_TRANSFER_REGIONS,
        ),
        Op.REMOTE_LOAD: _sig([("window", W), ("peer", S), ("offsets", L), ("shape", SL),
                              ("valid_shape", L, True)], _deduce_load_like,
                             regions=(Region("window", "offsets", "shape", valid="valid_shape"), _LOAD_REGIONS[1])),
        Op.NOTIFY: _sig([("signal", W), ("peer", S), ("offsets", L), ("value", S)], _deduce_signal_op,
                        [AttrSpec("op", NotifyOp, NotifyOp.AtomicAdd)], [Region("signal", "offsets")]),
        Op.WAIT: _sig([("signal", W), ("offsets", L), ("expected", S)], _deduce_signal_op,
                      [AttrSpec("cmp", WaitCmp, WaitCmp.Ge)], [Region("signal", "offsets")]),
        Op.FENCE: _sig([], _none),
        Op.CACHEINVALID: _sig([("tensor", T, True), ("shapes", L, True), ("offsets", L, True)],
                              _deduce_cacheinvalid, regions=[Region("tensor", "offsets", "shapes")]),
        Op.GET_COMM_CTX: _sig([("window", W)], _ctx),
        Op.RANK: _sig([("ctx", C)], _int32),
        Op.NRANKS: _sig([("ctx", C)], _int32),
        # Local ops.
        Op.TENSOR_VIEW: _sig([("tensor", T), ("shape", L), ("valid_shape", L, True)], _deduce_view,
                             regions=[Region("shape", extent="valid_shape")]),
        Op.TENSOR_READ: _sig([("tensor", T), ("indices", L)], _deduce_read, regions=[Region("tensor", "indices")]),
        Op.TENSOR_WRITE: _sig([("tensor", T), ("indices", L), ("value", S)], _deduce_write,
                              regions=[Region("tensor", "indices")]),
        Op.TILE_CREATE: _sig([("shape", SL)], _deduce_create,
                             [AttrSpec("dtype", DType, None), AttrSpec("mem", MemorySpace, MemorySpace.Vec)]),
        Op.TILE_LOAD: _sig([("tensor", T), ("offsets", L), ("shape", SL), ("valid_shape", L, True)],
                           _deduce_load_like, regions=_LOAD_REGIONS),
        Op.TILE_STORE: _sig([("tile", TL), ("offsets", L), ("tensor", T)], _deduce_store,
                            regions=[Region("tensor", "offsets", "tile")]),
        Op.TILE_SET_VALIDSHAPE: _sig([("tile", TL), ("valid_shape", L)], _deduce_set_valid,
                                     regions=[Region("tile", extent="valid_shape")]),
        Op.TILE_FILLPAD: _sig([("tile", TL)], _deduce_fillpad, [AttrSpec("pad", PadValue, PadValue.zero)]),
        Op.TILE_ADD: _sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_SUB: _sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MUL: _sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MAXIMUM: _sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MINIMUM: _sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_ADDS: _sig([("tile", TL), ("scalar", S)], SameAsArg(0)),
        Op.TILE_MULS: _sig([("tile", TL), ("scalar", S)], SameAsArg(0)),
        **TILE_SIGNATURES,
        **MX_SIGNATURES,
    }
)

_missing = set(Op) - set(SIGNATURES)
if _missing:  # pragma: no cover - import-time completeness check
    raise RuntimeError(f"ops without a signature: {sorted(o.text for o in _missing)}")

REDUCE_TILE_OP: Mapping[ReduceOp, Op] = MappingProxyType(
    {ReduceOp.Sum: Op.TILE_ADD, ReduceOp.Max: Op.TILE_MAXIMUM, ReduceOp.Min: Op.TILE_MINIMUM,
     ReduceOp.Prod: Op.TILE_MUL}
)
"""The tile op that implements each ReduceOp (tile.add, tile.maximum, tile.minimum, tile.mul)."""


def writes_args(op: Op) -> tuple[int, ...]:
    """Positions of the arguments ``op`` writes (its ArgEffect::Write workspaces)."""
    return tuple(i for i, p in enumerate(SIGNATURES[op].params) if p.writes)


def has_write_effects(call: Call) -> bool:
    """True when ``call`` writes an argument: such a call stays even if its result is unused."""
    return bool(writes_args(call.op))


def _shown(value: AttrValue) -> str:
    """An attribute value as a refusal shows it: as the ``.pld`` printer writes it (a name as typed)."""
    return repr(value) if isinstance(value, str) else format_attr(value)


def _coerce_attr(op: Op, spec: AttrSpec, value: AttrValue) -> AttrValue:
    kind = spec.kind
    if isinstance(kind, type) and issubclass(kind, enum.IntEnum):
        if isinstance(value, kind):
            return value
        if isinstance(value, str):
            for m in kind:  # exact spelling first, then case-insensitive ("sum" for Sum)
                if m.name.rstrip("_") == value:
                    return m
            for m in kind:
                if m.name.rstrip("_").lower() == value.lower():
                    return m
        legal = ", ".join(m.name.rstrip("_") for m in kind)
        raise IRTypeError(op, spec.name, f"one of {legal}", _shown(value))
    if kind is DType:
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            try:
                return DType.parse(value)
            except ValueError:
                pass
        raise IRTypeError(op, spec.name, "a dtype (fp32, fp16, int32, ...)", _shown(value))
    if kind is int:
        if isinstance(value, int) and not isinstance(value, (bool, enum.Enum)):
            return value
        raise IRTypeError(op, spec.name, "an integer literal", _shown(value))
    return value


def make_call(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue] | None = None) -> Call:
    """Build a checked Call: argument kinds, attribute values/defaults, deduced result type."""
    sig = SIGNATURES[op]
    given = dict(attrs or {})
    required = [p for p in sig.params if not p.optional]
    if len(args) < len(required) or len(args) > len(sig.params):
        names = ", ".join(p.name + ("?" if p.optional else "") for p in sig.params)
        raise IRTypeError.arity(op, names, len(args))
    optional = [p for p in sig.params if p.optional]
    n_opt = len(args) - len(required)
    if optional and 0 < n_opt < len(optional) and op in (Op.PUT, Op.GET):
        raise IRTypeError(op, optional[0].name, "given together with " + ", ".join(p.name for p in optional))
    for p, a in zip(sig.params, args, strict=False):
        _check_kind(op, p, a)
    out: dict[str, AttrValue] = {}
    for spec in sig.attrs:
        if spec.name in given:
            out[spec.name] = _coerce_attr(op, spec, given.pop(spec.name))
        elif spec.default is None:
            raise IRTypeError(op, spec.name, "given (required attribute)")
        else:
            out[spec.name] = spec.default
    if given:
        raise IRTypeError(op, sorted(given)[0], "a known attribute: " + ", ".join(s.name for s in sig.attrs))
    result = sig.deduce(op, tuple(args), out)
    return Call(op, tuple(args), tuple(out.items()), result)


__all__ = [
    "REDUCE_TILE_OP",
    "SIGNATURES",
    "AttrSpec",
    "IRTypeError",
    "Kind",
    "Layout",
    "Param",
    "Region",
    "SameAsArg",
    "Signature",
    "describe",
    "has_write_effects",
    "make_call",
    "writes_args",
]
