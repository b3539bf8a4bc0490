"""One table of op signatures: parameter kinds, attributes with defaults, and a result-type deducer.

The vocabulary of a signature (``Kind``, ``Param``, ``AttrSpec``, ``Signature``, ``IRTypeError``) is
:mod:`pldemu.ir.vocabulary`; the tile and MX families' entries are in ``tile_signatures`` and
``mx_signatures``. This module holds the core entries and merges the three into ``SIGNATURES``.

``make_call`` is the only way IR calls are built (builder, parser, lowering all use it), so every
call in every program has checked arguments, canonical attributes (defaults filled, table order)
and a deduced result type.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from pldemu.ir import nodes as ir
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
from pldemu.ir.fused_signatures import FUSED_SIGNATURES
from pldemu.ir.mx_signatures import MX_SIGNATURES
from pldemu.ir.nodes import format_attr
from pldemu.ir.ops import Op
from pldemu.ir.sort_signatures import SORT_SIGNATURES
from pldemu.ir.tile_signatures import TILE_SIGNATURES
from pldemu.ir.vocabulary import (
    AttrSpec,
    IRTypeError,
    Kind,
    Param,
    Region,
    Signature,
    describe,
    sig,
    static_numel,
)

# ----------------------------------------------------------------------------------------------
# Kind checks
# ----------------------------------------------------------------------------------------------


def _check_kind(op: Op, p: Param, a: ir.Arg) -> None:
    if p.kind in (Kind.LIST, Kind.STATIC_LIST):
        if not isinstance(a, ir.ListExpr):
            raise IRTypeError(op, p.name, "a [list] of scalars", type(a).__name__)
        for item in a.items:
            if not isinstance(item.type, ir.ScalarType):
                raise IRTypeError(op, p.name, "a list of scalars", describe(item.type))
            if p.kind is Kind.STATIC_LIST and ir.static_int(item) is None:
                raise IRTypeError(op, p.name, "a list of integer literals (static shape)")
        return
    if isinstance(a, ir.ListExpr):
        raise IRTypeError(op, p.name, f"a {p.kind.value}", "a list")
    t = a.type
    ok = {
        Kind.TENSOR: isinstance(t, ir.TensorType),
        Kind.WINDOW: isinstance(t, ir.TensorType) and t.window,
        Kind.TILE: isinstance(t, ir.TileType),
        Kind.TENSOR_OR_TILE: isinstance(t, (ir.TensorType, ir.TileType)),
        Kind.SCALAR: isinstance(t, ir.ScalarType),
        Kind.CTX: isinstance(t, ir.CommCtxType),
        Kind.TILE_OR_SCALAR: isinstance(t, (ir.TileType, ir.ScalarType)),
        Kind.TUPLE: isinstance(t, ir.TupleType),
        Kind.VALUE: isinstance(t, (ir.TileType, ir.TensorType, ir.ScalarType, ir.TupleType)),
    }[p.kind]
    if not ok:
        raise IRTypeError(op, p.name, f"a {p.kind.value}", describe(t))


def _static_shape(lst: ir.Arg) -> tuple[int, ...]:
    assert isinstance(lst, ir.ListExpr)
    out = []
    for item in lst.items:
        v = ir.static_int(item)
        assert v is not None
        out.append(v)
    return tuple(out)


def _items(lst: ir.Arg) -> tuple[ir.Expr, ...]:
    assert isinstance(lst, ir.ListExpr)
    return lst.items


def _tensor(a: ir.Arg) -> ir.TensorType:
    assert not isinstance(a, ir.ListExpr) and isinstance(a.type, ir.TensorType)
    return a.type


def _tile(a: ir.Arg) -> ir.TileType:
    assert not isinstance(a, ir.ListExpr) and isinstance(a.type, ir.TileType)
    return a.type


# ----------------------------------------------------------------------------------------------
# Deducers
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SameAsArg:
    """Deducer: the result is argument ``index`` (its type, and for a tensor the memory it names)."""

    index: int

    def __call__(self, op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
        a = args[self.index]
        assert not isinstance(a, ir.ListExpr)
        return a.type


def _none(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    return ir.NONE


def _int32(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    return ir.INT32


def _ctx(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    return ir.COMM_CTX


def _region_rank(op: Op, name: str, lst: ir.Arg, rank: int) -> None:
    if len(_items(lst)) != rank:
        raise IRTypeError(op, name, f"a list of {rank} entries (one per dimension)", f"{len(_items(lst))}")


def _deduce_put(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    dst, src, stage = _tensor(args[0]), args[2], _tile(args[3])
    assert not isinstance(src, ir.ListExpr)
    src_t = src.type
    assert isinstance(src_t, (ir.TensorType, ir.TileType))
    if src_t.dtype != dst.dtype or stage.dtype != dst.dtype:
        raise IRTypeError(op, "src", f"the dtype of dst ({dst.dtype.value}) for src and stage")
    if len(args) > 4:
        _region_rank(op, "dst_offsets", args[4], len(dst.shape))
        _region_rank(op, "src_offsets", args[5], len(src_t.shape))
        if len(_items(args[6])) not in (len(dst.shape), len(src_t.shape)):
            raise IRTypeError(op, "shape", "a list with one entry per dimension")
    return ir.NONE


def _deduce_get(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    dst, src, stage = _tensor(args[0]), _tensor(args[2]), _tile(args[3])
    if src.dtype != dst.dtype or stage.dtype != dst.dtype:
        raise IRTypeError(op, "src", f"the dtype of dst ({dst.dtype.value}) for src and stage")
    if len(args) > 4:
        _region_rank(op, "dst_offsets", args[4], len(dst.shape))
        _region_rank(op, "src_offsets", args[5], len(src.shape))
    return ir.NONE


def _valid_or_none(shape: tuple[int, ...], valid: ir.Arg | None) -> tuple[ir.Expr, ...] | None:
    if valid is None:
        return None
    items = _items(valid)
    if tuple(ir.static_int(i) for i in items) == shape:
        return None  # fully valid: canonical form has no valid_shape
    return items


def _deduce_load_like(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
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
    return ir.TileType(t.dtype, shape, _valid_or_none(shape, valid), MemorySpace.Vec)


def _deduce_store(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    tile, t = _tile(args[0]), _tensor(args[2])
    if tile.dtype != t.dtype:
        raise IRTypeError(op, "tile", f"dtype {t.dtype.value} (the tensor's)", tile.dtype.value)
    _region_rank(op, "offsets", args[1], len(t.shape))
    if len(tile.shape) != len(t.shape):
        raise IRTypeError(op, "tile", f"rank {len(t.shape)} (the tensor's)", str(len(tile.shape)))
    return ir.NONE


def _deduce_create(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    dtype = attrs["dtype"]
    mem = attrs.get("mem", MemorySpace.Vec)
    assert isinstance(dtype, DType) and isinstance(mem, MemorySpace)
    shape = _static_shape(args[0])
    if any(s <= 0 for s in shape):
        raise IRTypeError(op, "shape", "positive extents", str(list(shape)))
    return ir.TileType(dtype, shape, None, mem)


def _deduce_set_valid(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    t = _tile(args[0])
    _region_rank(op, "valid_shape", args[1], len(t.shape))
    return ir.TileType(t.dtype, t.shape, _valid_or_none(t.shape, args[1]), t.memory)


def _deduce_fillpad(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    t = _tile(args[0])
    return ir.TileType(t.dtype, t.shape, None, t.memory)


def _deduce_binary_tile(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    a, b = _tile(args[0]), _tile(args[1])
    if a.shape != b.shape or a.dtype != b.dtype:
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value}{list(a.shape)} like lhs", describe(b))
    if not a.dtype.is_float and op is not Op.TILE_ADD and not a.dtype.is_int:
        raise IRTypeError(op, "lhs", "a numeric tile", describe(a))
    return a


def _deduce_view(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    t = _tensor(args[0])
    if t.strides is not None:
        raise IRTypeError(op, "tensor", "a packed tensor (tensor.view cannot view strided data)")
    shape = _items(args[1])
    old, new = static_numel(t.shape), static_numel(shape)
    if old is not None and new is not None and old != new:
        raise IRTypeError(op, "shape", f"{old} elements (the tensor's)", f"{new}")
    valid = _items(args[2]) if len(args) > 2 else None
    if valid is not None and len(valid) != len(shape):
        raise IRTypeError(op, "valid_shape", f"a list of {len(shape)} entries")
    return ir.TensorType(t.dtype, shape, valid, t.window, t.layout, None)


def _deduce_tensor_create(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType)
    shape = _items(args[0])
    if not shape or any((v := ir.static_int(d)) is not None and v <= 0 for d in shape):
        raise IRTypeError(op, "shape", "positive extents", ir.format_dims(shape))
    return ir.TensorType(dtype, shape)


def _deduce_read(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    t = _tensor(args[0])
    _region_rank(op, "indices", args[1], len(t.shape))
    return ir.ScalarType(t.dtype)


def _deduce_write(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    t = _tensor(args[0])
    _region_rank(op, "indices", args[1], len(t.shape))
    return ir.NONE


def _deduce_signal_op(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    sig = _tensor(args[0])
    if sig.dtype != DType.INT32:
        raise IRTypeError(op, "signal", "an INT32 window", describe(sig))
    cells = args[2] if op is Op.NOTIFY else args[1]
    _region_rank(op, "offsets", cells, len(sig.shape))
    return ir.NONE


def _deduce_cacheinvalid(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue]) -> ir.Type:
    # Arity 0 (the whole global memory) or 3 (tensor, shapes, offsets: the region form).
    if len(args) not in (0, 3):
        raise IRTypeError.arity(op, "tensor, shapes, offsets) or (", len(args))
    if args:
        rank = len(_tensor(args[0]).shape)
        _region_rank(op, "shapes", args[1], rank)
        _region_rank(op, "offsets", args[2], rank)
    return ir.NONE


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



_REDUCE = AttrSpec("op", ReduceOp, ReduceOp.Sum)
_TRANSFER_REGIONS = (Region("dst", "dst_offsets", "shape"), Region("src", "src_offsets", "shape"))
_LOAD_REGIONS = (Region("tensor", "offsets", "shape", valid="valid_shape"), Region("shape", extent="valid_shape"))

SIGNATURES: Mapping[Op, Signature] = MappingProxyType(
    {
        # Collectives: kinds only; their semantic contracts are checked by LowerCompositeOps.
        # lanes: pypto's core_num (a HOST builtin's SPMD grid); 1 is the InCore recipe of the spec.
        Op.ALLREDUCE: sig([("target", T), ("signal", T)], SameAsArg(0),
                           [_REDUCE, AttrSpec("mode", AllreduceMode, AllreduceMode.mesh), AttrSpec("lanes", int, 1)]),
        Op.ALLGATHER: sig([("local_data", T), ("target", T), ("signal", T)], SameAsArg(1)),
        Op.REDUCE_SCATTER: sig([("target", T), ("signal", T)], SameAsArg(0), [_REDUCE]),
        Op.BROADCAST: sig([("target", T), ("signal", T)], SameAsArg(0), [AttrSpec("root", int, None)]),
        Op.BARRIER: sig([("signal", T)], SameAsArg(0)),
        Op.ALL_TO_ALL: sig([("input", T), ("target", T), ("signal", T)], SameAsArg(1)),
        Op.ALL_TO_ALL_V: sig(
            [("input", T), ("target", T), ("signal", T), ("send_counts", T), ("recv_counts", T)],
            SameAsArg(1),
        ),
        # Distributed primitives.
        Op.PUT: sig(
            [("dst", W), ("peer", S), ("src", TT), ("stage", TL), ("dst_offsets", L, True),
             ("src_offsets", L, True), ("shape", L, True)],
            _deduce_put, [AttrSpec("atomic", AtomicType, AtomicType.None_)], _TRANSFER_REGIONS,
        ),
        Op.GET: sig(
            [("dst", T), ("peer", S), ("src", W), ("stage", TL), ("dst_offsets", L, True),
             ("src_offsets", L, True), ("shape", L, True)],
            _deduce_get, regions=_TRANSFER_REGIONS,
        ),
        Op.REMOTE_LOAD: sig([("window", W), ("peer", S), ("offsets", L), ("shape", SL),
                              ("valid_shape", L, True)], _deduce_load_like,
                             regions=(Region("window", "offsets", "shape", valid="valid_shape"), _LOAD_REGIONS[1])),
        Op.NOTIFY: sig([("signal", W), ("peer", S), ("offsets", L), ("value", S)], _deduce_signal_op,
                        [AttrSpec("op", NotifyOp, NotifyOp.AtomicAdd)], [Region("signal", "offsets")]),
        Op.WAIT: sig([("signal", W), ("offsets", L), ("expected", S)], _deduce_signal_op,
                      [AttrSpec("cmp", WaitCmp, WaitCmp.Ge)], [Region("signal", "offsets")]),
        Op.DEFER_WAIT: sig([("signal", W), ("offsets", L), ("expected", S)], _deduce_signal_op,
                            [AttrSpec("cmp", WaitCmp, WaitCmp.Ge)], [Region("signal", "offsets")]),
        Op.FENCE: sig([], _none),
        Op.BAR_ALL: sig([], _none),
        Op.HOST_TASK: sig([], _none, [AttrSpec("task", int, None)]),
        Op.DISPATCH_END: sig([], _none),
        Op.AIV_LANE: sig([], _none, [AttrSpec("lane", int, None), AttrSpec("sync", int, 0)]),
        Op.CACHEINVALID: sig([("tensor", T, True), ("shapes", L, True), ("offsets", L, True)],
                              _deduce_cacheinvalid, regions=[Region("tensor", "offsets", "shapes")]),
        Op.GET_COMM_CTX: sig([("window", W)], _ctx),
        Op.RANK: sig([("ctx", C)], _int32),
        Op.NRANKS: sig([("ctx", C)], _int32),
        # Local ops.
        Op.TENSOR_CREATE: sig([("shape", L)], _deduce_tensor_create, [AttrSpec("dtype", DType, None), AttrSpec("name", str, "created")]),
        Op.TENSOR_VIEW: sig([("tensor", T), ("shape", L), ("valid_shape", L, True)], _deduce_view,
                             regions=[Region("shape", extent="valid_shape")]),
        Op.TENSOR_READ: sig([("tensor", T), ("indices", L)], _deduce_read, regions=[Region("tensor", "indices")]),
        Op.TENSOR_WRITE: sig([("tensor", T), ("indices", L), ("value", S)], _deduce_write,
                              regions=[Region("tensor", "indices")]),
        Op.TILE_CREATE: sig([("shape", SL)], _deduce_create,
                             [AttrSpec("dtype", DType, None), AttrSpec("mem", MemorySpace, MemorySpace.Vec)]),
        Op.TILE_LOAD: sig([("tensor", T), ("offsets", L), ("shape", SL), ("valid_shape", L, True)],
                           _deduce_load_like, regions=_LOAD_REGIONS),
        # atomic=Add: pypto's pl.assemble(..., atomic=pl.AtomicType.Add), an element-wise add into the region
        Op.TILE_STORE: sig([("tile", TL), ("offsets", L), ("tensor", T)], _deduce_store,
                            [AttrSpec("atomic", AtomicType, AtomicType.None_, implicit=True)],
                            regions=[Region("tensor", "offsets", "tile")]),
        Op.TILE_SET_VALIDSHAPE: sig([("tile", TL), ("valid_shape", L)], _deduce_set_valid,
                                     regions=[Region("tile", extent="valid_shape")]),
        Op.TILE_FILLPAD: sig([("tile", TL)], _deduce_fillpad, [AttrSpec("pad", PadValue, PadValue.zero)]),
        Op.TILE_ADD: sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_SUB: sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MUL: sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MAXIMUM: sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_MINIMUM: sig([("lhs", TL), ("rhs", TL)], _deduce_binary_tile),
        Op.TILE_ADDS: sig([("tile", TL), ("scalar", S)], SameAsArg(0)),
        Op.TILE_MULS: sig([("tile", TL), ("scalar", S)], SameAsArg(0)),
        **TILE_SIGNATURES,
        **SORT_SIGNATURES,
        **MX_SIGNATURES,
        **FUSED_SIGNATURES,
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


def has_write_effects(call: ir.Call) -> bool:
    """True when ``call`` writes an argument: such a call stays even if its result is unused."""
    return bool(writes_args(call.op))


def _shown(value: ir.AttrValue) -> str:
    """An attribute value as a refusal shows it: as the ``.pld`` printer writes it (a name as typed)."""
    return repr(value) if isinstance(value, str) else format_attr(value)


def _coerce_attr(op: Op, spec: AttrSpec, value: ir.AttrValue) -> ir.AttrValue:
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


def make_call(op: Op, args: Sequence[ir.Arg], attrs: Mapping[str, ir.AttrValue] | None = None) -> ir.Call:
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
    out: dict[str, ir.AttrValue] = {}
    for spec in sig.attrs:
        if spec.name in given:
            value = _coerce_attr(op, spec, given.pop(spec.name))
            if not (spec.implicit and value == spec.default):
                out[spec.name] = value
        elif spec.implicit:
            continue
        elif spec.default is None:
            raise IRTypeError(op, spec.name, "given (required attribute)")
        else:
            out[spec.name] = spec.default
    if given:
        raise IRTypeError(op, sorted(given)[0], "a known attribute: " + ", ".join(s.name for s in sig.attrs))
    result = sig.deduce(op, tuple(args), out)
    return ir.Call(op, tuple(args), tuple(out.items()), result)


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
