"""Signatures of the tile-math and select ops (sin, cos, exp, log, sqrt, rsqrt, recip, neg, abs, div, divs,
maximums, minimums, part_add / part_mul / part_max / part_min, rem, rems, prelu, lrelu,
move, matmul, matmul_acc, batch_matmul, the row / column reductions and expands, cast, cmp/cmps, select, sel/sels).

Merged into the one table ``pldemu.ir.signatures.SIGNATURES``; this module only holds their deducers
and the facts they share with the lowering (the packed predicate mask, the TSELS dtype contract).
Imported by ``signatures`` after its base classes exist, so it may use them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import CastMode, CmpType, MemorySpace, TileLayout
from pldemu.ir.nodes import (
    NONE,
    Arg,
    AttrValue,
    Const,
    Expr,
    ListExpr,
    ScalarType,
    TileType,
    Type,
    ceildiv,
    format_dims,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.vocabulary import AttrSpec, IRTypeError, Kind, Region, Signature, describe, sig

MASK_COL_ALIGN = 32
"""Packed predicate mask rows are padded to 32 bytes (kA2A3PredicateColAlignment)."""

SELS_MASK_DTYPES = frozenset({DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32})
SELS_SRC_DTYPES = frozenset(SELS_MASK_DTYPES | {DType.FP16, DType.FP32})
"""Element types tile.sels (TSELS) has a form for on any target: no BF16."""

_SELS_SCALAR = {DType.UINT8: DType.INT8, DType.UINT16: DType.INT16, DType.UINT32: DType.INT32}


class TileTypeError(IRTypeError):
    """A tile-op refusal whose message is a sentence of its own (the reference's deducer messages)."""

    def __init__(self, op: Op, arg: str, message: str) -> None:
        ValueError.__init__(self, f"{op.text} {message}")
        self.op, self.arg, self.expected = op, arg, message


def sels_scalar_dtype(src: DType) -> DType:
    """The scalar dtype TSELS pairs with a source dtype (unsigned sources take the signed scalar)."""
    return _SELS_SCALAR.get(src, src)


def _tile(a: Arg) -> TileType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TileType)
    return a.type


def _canonical_valid(shape: tuple[int, ...], valid: Sequence[Expr]) -> tuple[Expr, ...] | None:
    items = tuple(valid)
    return None if tuple(static_int(v) for v in items) == shape else items


def valid_of(t: TileType) -> tuple[Expr, ...]:
    """The valid extents of a tile type, fully valid written out as literals."""
    return t.valid_shape if t.valid_shape is not None else tuple(Const(d) for d in t.shape)


def mask_type(t: TileType) -> TileType:
    """The packed predicate mask for results shaped like ``t``: UINT8 [.., roundup(ceil(N/8), 32)],
    valid last dim ceil(valid_N/8), bit b of byte w = element 8w+b (LSB-first)."""
    carrier_bytes = -(-t.shape[-1] // 8)
    shape = (*t.shape[:-1], -(-carrier_bytes // MASK_COL_ALIGN) * MASK_COL_ALIGN)
    valid = valid_of(t)
    mvalid = (*valid[:-1], ceildiv(valid[-1], 8))
    return TileType(DType.UINT8, shape, _canonical_valid(shape, mvalid), t.memory)


def _same_valid(a: TileType, b: TileType) -> bool:
    return valid_of(a) == valid_of(b)


def _dims(t: TileType) -> str:
    return str(list(t.shape))


def _valid_text(t: TileType) -> str:
    return format_dims(valid_of(t))


# ----------------------------------------------------------------------------------------------
# Deducers
# ----------------------------------------------------------------------------------------------


def deduce_fp32_only(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """DeduceTileFP32OnlyType: the unary result of an FP32 tile; any other dtype is refused."""
    t = _tile(args[0])
    if t.dtype is not DType.FP32:
        raise TileTypeError(op, "tile", f"is FP32-only, but got input with dtype {t.dtype.value.upper()}. "
                            f"Cast the input to FP32 explicitly via tile.cast(tile, dtype=fp32) before "
                            f"applying {op.text}.")
    return t


def deduce_cast(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    t = _tile(args[0])
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType)
    if dtype is t.dtype:
        raise TileTypeError(op, "dtype", f"from {dtype.value} to {dtype.value}: a same-dtype cast is not a "
                            "valid operation")
    return TileType(dtype, t.shape, t.valid_shape, t.memory)


def _numeric(dtype: DType) -> bool:
    return dtype.is_int or dtype.is_float


def deduce_scalar_cast(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """scalar.cast: a numeric scalar as another numeric dtype (pypto's scalar Cast; a BOOL is not one)."""
    src, dtype = args[0].type if not isinstance(args[0], ListExpr) else None, attrs["dtype"]
    assert isinstance(dtype, DType)
    if not (isinstance(src, ScalarType) and _numeric(src.dtype) and _numeric(dtype)):
        got = describe(src) if src is not None else "a list"
        raise TileTypeError(op, "dtype", f"a numeric scalar to a numeric dtype, got {got} to {dtype.value}")
    return ScalarType(dtype)


def deduce_cmp(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.cmp / tile.cmps: the packed predicate mask of the lhs geometry."""
    lhs = _tile(args[0])
    rhs = args[1]
    assert not isinstance(rhs, ListExpr)
    if isinstance(rhs.type, TileType) and (rhs.type.shape != lhs.shape or rhs.type.dtype != lhs.dtype):
        raise IRTypeError(op, "rhs", f"a tile {lhs.dtype.value}{_dims(lhs)} like lhs", describe(rhs.type))
    if lhs.dtype is DType.BOOL:
        raise IRTypeError(op, "lhs", "a numeric tile", describe(lhs))
    return mask_type(lhs)


def _branch(a: Arg) -> TileType | None:
    assert not isinstance(a, ListExpr)
    return a.type if isinstance(a.type, TileType) else None


def deduce_select(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """DeduceTileSelectType (see the module docstring of lowering/select.py for the routes)."""
    cond, on_true, on_false = args
    t, f = _branch(on_true), _branch(on_false)
    if t is None and f is None:
        raise TileTypeError(op, "on_true", "requires at least one of on_true/on_false to be a TileType, but "
                            "both are scalars -- there is no shape to select into")
    if t is not None and f is not None:
        _check_tile_branches(op, t, f)
    for name, a in (("on_true", on_true), ("on_false", on_false)):
        assert not isinstance(a, ListExpr)
        if _branch(a) is None and not isinstance(a, Const):
            raise TileTypeError(op, name, f"requires the scalar {name} branch to be a compile-time constant, but "
                                f"got {describe(a.type)}; tile.full (the only scalar broadcast) takes a literal")
    result = t if t is not None else f
    assert result is not None
    model = mask_type(result)
    c = _tile(cond)
    if c.dtype is not DType.UINT8 or c.shape != model.shape or valid_of(c) != valid_of(model):
        raise TileTypeError(op, "cond", f"requires cond to be the packed predicate mask for this result: "
                            f"{_dims(model)} UINT8 with valid_shape {_valid_text(model)}, as produced by "
                            f"tile.cmp/tile.cmps; but got {c.dtype.value.upper()}{_dims(c)} valid "
                            f"{_valid_text(c)}. For a 0/1 value tile, compare it first: "
                            "tile.cmps(value, 0, cmp_type=NE)")
    return result


def _check_tile_branches(op: Op, t: TileType, f: TileType) -> None:
    if t.shape != f.shape:
        raise TileTypeError(op, "on_false", f"requires on_true and on_false to have the same shape, but got "
                            f"{_dims(t)} and {_dims(f)}; broadcast the narrower operand explicitly (tile.full "
                            "or a full-shape tile.load) first")
    if not _same_valid(t, f):
        raise TileTypeError(op, "on_false", f"requires on_true and on_false to have the same valid extents, "
                            f"but got {_valid_text(t)} and {_valid_text(f)}; narrow both explicitly "
                            "(tile.set_validshape) first")
    if t.dtype is not f.dtype:
        raise TileTypeError(op, "on_false", f"requires on_true and on_false to have the same dtype, but got "
                            f"{t.dtype.value} and {f.dtype.value}; cast one branch first (tile.cast)")


def deduce_sel(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.sel(mask, lhs, rhs, tmp) = TSEL: lhs and rhs alike; the result is lhs (its valid extents)."""
    lhs, rhs = _tile(args[1]), _tile(args[2])
    if lhs.shape != rhs.shape or lhs.dtype != rhs.dtype:
        raise IRTypeError(op, "rhs", f"a tile {lhs.dtype.value}{_dims(lhs)} like lhs", describe(rhs))
    _check_mask_covers(op, _tile(args[0]), lhs)
    return lhs


def _check_mask_covers(op: Op, mask: TileType, src: TileType) -> None:
    if mask.dtype not in SELS_MASK_DTYPES:
        raise IRTypeError(op, "mask", "an integer mask tile", describe(mask))
    m_valid, s_valid = valid_of(mask), valid_of(src)
    rows_m, rows_s = static_int(m_valid[0]), static_int(s_valid[0])
    if rows_m is not None and rows_s is not None and len(src.shape) > 1 and rows_s > rows_m:
        raise IRTypeError(op, "mask", f"at least {rows_s} valid rows (the source's)", str(rows_m))
    cols_m, cols_s = static_int(m_valid[-1]), static_int(s_valid[-1])
    if cols_m is not None and cols_s is not None and -(-cols_s // 8) > cols_m * mask.dtype.itemsize:
        raise IRTypeError(op, "mask", f"{-(-cols_s // 8)} valid bytes per row (one bit per source column)",
                          str(cols_m * mask.dtype.itemsize))


def deduce_sels(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.sels(mask, src, tmp, scalar) = TSELS: dst = mask ? src : scalar (rank 2, no BF16)."""
    mask, src, tmp = _tile(args[0]), _tile(args[1]), _tile(args[2])
    scalar = args[3]
    assert not isinstance(scalar, ListExpr) and isinstance(scalar.type, ScalarType)
    for name, t in (("mask", mask), ("src", src), ("tmp", tmp)):
        if len(t.shape) != 2:
            raise IRTypeError(op, name, "a rank-2 tile", describe(t))
    if src.dtype not in SELS_SRC_DTYPES:
        legal = ", ".join(sorted(d.value for d in SELS_SRC_DTYPES))
        raise IRTypeError(op, "src", f"a tile of {legal} (TSELS has no {src.dtype.value} form)", describe(src))
    want = sels_scalar_dtype(src.dtype)
    if scalar.type.dtype is not want:
        raise IRTypeError(op, "scalar", f"a {want.value} scalar (paired with a {src.dtype.value} source)",
                          describe(scalar.type))
    _check_mask_covers(op, mask, src)
    return src


def deduce_full(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.full(shape, value[, valid_shape]): valid_shape narrows the view only (select's re-typing)."""
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType)
    assert isinstance(args[0], ListExpr)
    shape = tuple(static_int(i) or 0 for i in args[0].items)
    if any(s <= 0 for s in shape):
        raise IRTypeError(op, "shape", "positive extents", str(list(shape)))
    valid = None
    if len(args) > 2:
        assert isinstance(args[2], ListExpr)
        if len(args[2].items) != len(shape):
            raise IRTypeError(op, "valid_shape", f"a list of {len(shape)} entries")
        valid = _canonical_valid(shape, args[2].items)
    return TileType(dtype, shape, valid, MemorySpace.Vec)




FLOAT_MATH_DTYPES = frozenset({DType.FP16, DType.BF16, DType.FP32})
"""Element types of exp / sqrt / rsqrt / recip tiles (pldemu refuses integer tiles: pypto's tensor level
casts an integer input to FP32 before these ops, so only a tile-level call can pass one)."""

LOG_DTYPES = frozenset({DType.FP16, DType.FP32})
"""tile.log: FP16 or FP32 only (pypto's deducer)."""

DIV_DTYPES = frozenset({DType.INT16, DType.INT32, DType.FP16, DType.FP32})
"""tile.div: equal operand dtypes from this set (pypto's deducer)."""


@dataclass(frozen=True)
class UnaryMath:
    """The deducer of a unary tile op: shape, dtype and valid box kept; the dtype must be in ``dtypes``
    (``None``: any numeric dtype)."""

    dtypes: frozenset[DType] | None

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        t = _tile(args[0])
        numeric = (t.dtype.is_int or t.dtype in FLOAT_MATH_DTYPES) if self.dtypes is None else t.dtype in self.dtypes
        if not numeric:
            legal = "a numeric tile" if self.dtypes is None else "a tile of " + ", ".join(
                sorted(d.value for d in self.dtypes))
            raise IRTypeError(op, "tile", legal, describe(t))
        if len(args) > 1:  # tile.rsqrt's scratch (the high-precision path): like the input
            tmp = _tile(args[1])
            if tmp.shape != t.shape or tmp.dtype is not t.dtype:
                raise IRTypeError(op, "tmp", f"a tile {t.dtype.value}{_dims(t)} like the input", describe(tmp))
        return t


def deduce_div(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.div: equal dtypes in DIV_DTYPES, equal physical shapes and valid boxes; the lhs's type."""
    a, b = _tile(args[0]), _tile(args[1])
    if a.dtype not in DIV_DTYPES:
        raise IRTypeError(op, "lhs", "a tile of " + ", ".join(sorted(d.value for d in DIV_DTYPES)), describe(a))
    if a.shape != b.shape or a.dtype is not b.dtype or not _same_valid(a, b):
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value}{_dims(a)} valid {_valid_text(a)} like lhs",
                          describe(b))
    return a


def deduce_tile_scalar(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.divs / maximums / minimums: a numeric tile and a scalar (narrowed to the tile's dtype); the
    tile's type."""
    t = _tile(args[0])
    if not (t.dtype.is_int or t.dtype in FLOAT_MATH_DTYPES):
        raise IRTypeError(op, "lhs", "a numeric tile", describe(t))
    return t


NOT_DTYPES = frozenset({DType.INT16, DType.UINT16})
"""tile.not: INT16 or UINT16 only (pypto's deducer)."""


@dataclass(frozen=True)
class Bitwise:
    """The deducer of pypto's bitwise ops and shifts (tile.and / or / xor / shl / shr and their scalar forms):
    integer tiles only, the lhs's type kept. A tile rhs has the lhs's shape and (pldemu, as for add) its dtype,
    except a shift's count, which may be any integer type (pypto's DeduceTileOpShiftBinaryType); a scalar rhs
    must be an integer (DeduceTileOpIntScalarBinaryType). xor / xors carry pypto's scratch ``tmp``."""

    shift: bool = False

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        t = _tile(args[0])
        if not t.dtype.is_int:
            raise TileTypeError(op, "lhs", f"requires integer tile dtype, but got {t.dtype.value.upper()}")
        rhs = args[1]
        assert not isinstance(rhs, ListExpr)
        if isinstance(rhs.type, TileType):
            r = rhs.type
            if r.shape != t.shape or not r.dtype.is_int or (not self.shift and r.dtype is not t.dtype):
                want = "an integer tile" if self.shift else f"a tile {t.dtype.value}"
                raise IRTypeError(op, "rhs", f"{want}{_dims(t)} like lhs", describe(r))
        elif not (isinstance(rhs.type, ScalarType) and rhs.type.dtype.is_int):
            raise TileTypeError(op, "rhs", f"requires the scalar to be an integer type, but got {describe(rhs.type)}")
        return t


def deduce_not(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.not: an INT16 or UINT16 tile, its type kept (pypto's deducer)."""
    t = _tile(args[0])
    if t.dtype not in NOT_DTYPES:
        raise TileTypeError(op, "tile", f"requires int16 or uint16 tile dtype, but got {t.dtype.value.upper()}")
    return t


def deduce_fmod(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.fmod: numeric tiles of one shape and dtype (pldemu, as for add: pypto promotes and broadcasts);
    the lhs's type."""
    a, b = _tile(args[0]), _tile(args[1])
    if not (a.dtype.is_int or a.dtype in FLOAT_MATH_DTYPES):
        raise IRTypeError(op, "lhs", "a numeric tile", describe(a))
    if a.shape != b.shape or a.dtype is not b.dtype:
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value}{_dims(a)} like lhs", describe(b))
    return a


def _numeric_tile(op: Op, arg: str, t: TileType) -> None:
    if not (t.dtype.is_int or t.dtype in FLOAT_MATH_DTYPES):
        raise IRTypeError(op, arg, "a numeric tile", describe(t))


def _static_past(inner: Sequence[Expr], outer: Sequence[Expr]) -> int | None:
    """The first axis where a static extent of ``inner`` is larger than ``outer``'s, if any."""
    for axis, (i, o) in enumerate(zip(inner, outer, strict=True)):
        si, so = static_int(i), static_int(o)
        if si is not None and so is not None and si > so:
            return axis
    return None


def deduce_partial(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.part_add / part_mul / part_max / part_min (TPARTADD ...): the lhs's type, as pypto's deducer types it,
    so its valid box is the device's dst. The rhs has the lhs's dtype (the device's rule; pypto promotes), rank
    and, per axis, the lhs's extent or 1 (pypto broadcasts; the device reads such an rhs as a partial operand);
    its static valid extents stay within the lhs's (pto-isa leaves a source valid beyond dst
    implementation-defined; a run-time extent is checked when the op runs)."""
    a, b = _tile(args[0]), _tile(args[1])
    _numeric_tile(op, "lhs", a)
    if b.dtype is not a.dtype or len(b.shape) != len(a.shape) or any(
            e not in (d, 1) for e, d in zip(b.shape, a.shape, strict=True)):
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value} of lhs's rank, each extent lhs's {_dims(a)} or 1",
                          describe(b))
    axis = _static_past(valid_of(b), valid_of(a))
    if axis is not None:
        raise TileTypeError(op, "rhs", f"requires rhs's valid_shape {_valid_text(b)} within lhs's {_valid_text(a)}, "
                            f"but axis {axis} is larger: the result is valid on lhs's box (pypto's deducer) and "
                            "pto-isa leaves a source valid beyond it implementation-defined; narrow rhs "
                            "(set_validshape) or pass the larger operand first")
    return a


REM_DTYPES = frozenset({DType.FP32, DType.INT32})
"""tile.rem / rems: the element types pto-isa's TREM / TREMS have on A2/A3 (A5 has more; pypto's deducer checks
none). pldemu computes them as A2/A3's kernel does."""


def _rem_dtype(op: Op, t: TileType) -> None:
    if t.dtype not in REM_DTYPES:
        raise TileTypeError(op, "lhs", f"requires an FP32 or INT32 tile (pto-isa's {op.text[5:].upper()} on A2/A3 "
                            f"supports only float and int32), but got {t.dtype.value.upper()}")


def deduce_rem(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.rem(lhs, rhs, tmp) = TREM: FP32 or INT32 tiles of one dtype and shape (pldemu, as for add: pypto
    promotes and broadcasts) whose static valid extents agree (pto-isa: src0, src1 and dst share their valid
    rows and columns; run-time extents are checked when it runs); ``tmp`` any tile (pypto's deducer). The lhs's
    type."""
    a, b = _tile(args[0]), _tile(args[1])
    _rem_dtype(op, a)
    if a.shape != b.shape or a.dtype is not b.dtype or _static_past(valid_of(a), valid_of(b)) is not None or \
            _static_past(valid_of(b), valid_of(a)) is not None:
        raise IRTypeError(op, "rhs", f"a tile {a.dtype.value}{_dims(a)} valid {_valid_text(a)} like lhs", describe(b))
    return a


def deduce_rems(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.rems(lhs, scalar, tmp) = TREMS: an FP32 or INT32 tile; pypto types the result as the promotion of
    the tile, the scalar and ``tmp``, and TREMS writes the tile's own dtype, so a float scalar on an INT32 tile
    and a ``tmp`` of another dtype are refused (an integer scalar is narrowed to the tile's dtype, as for
    divs). The lhs's type."""
    t, tmp = _tile(args[0]), _tile(args[2])
    _rem_dtype(op, t)
    scalar = args[1]
    assert not isinstance(scalar, ListExpr) and isinstance(scalar.type, ScalarType)
    if t.dtype.is_int and not scalar.type.dtype.is_int:
        raise TileTypeError(op, "rhs", f"of an {t.dtype.value.upper()} tile requires an integer scalar, but got "
                            f"{scalar.type.dtype.value.upper()}: pypto types the result as the promoted float, "
                            "which TREMS (dst and src of one type) cannot write")
    if tmp.dtype is not t.dtype:
        raise IRTypeError(op, "tmp", f"a {t.dtype.value} tile (pypto's docstring: the tmp tile has the input's dtype; "
                          "another one would promote the result's)", describe(tmp))
    return t


PRELU_DTYPES = frozenset({DType.FP16, DType.FP32})
"""tile.prelu (pypto's deducer) and tile.lrelu (pto-isa's TLRELU: floating point only on every target)."""


def deduce_prelu(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.prelu(tile, slope, tmp) = TPRELU, pypto's deducer: an FP16 / FP32 rank-2 tile; a slope of its dtype,
    physical shape and valid box; a rank-2 ``tmp`` (A2/A3's code generator also wants it UINT8, a row more
    than the valid rows and ceil(valid columns / 8) valid columns; A5 ignores it: not checked here). The
    tile's type."""
    src, slope, tmp = _tile(args[0]), _tile(args[1]), _tile(args[2])
    if src.dtype not in PRELU_DTYPES:
        raise TileTypeError(op, "tile", f"requires src dtype in {{FP16, FP32}}, but got {src.dtype.value.upper()}")
    if slope.dtype is not src.dtype:
        raise TileTypeError(op, "slope", f"requires slope dtype to match src dtype, but got "
                            f"{slope.dtype.value.upper()} and {src.dtype.value.upper()}")
    if len(src.shape) != 2:
        raise TileTypeError(op, "tile", f"requires a rank-2 src tile, but got rank {len(src.shape)}")
    if slope.shape != src.shape or not _same_valid(slope, src):
        raise TileTypeError(op, "slope", f"requires slope and src to have the same physical shape and valid_shape, "
                            f"but got slope {_dims(slope)} valid {_valid_text(slope)} and src {_dims(src)} valid "
                            f"{_valid_text(src)}")
    if len(tmp.shape) != 2:
        raise TileTypeError(op, "tmp", f"requires a rank-2 tmp tile, but got rank {len(tmp.shape)}")
    return src


def deduce_lrelu(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.lrelu(tile, slope) = TLRELU: an FP16 / FP32 tile (pypto's deducer takes any, TLRELU has only
    floating-point forms) and a numeric scalar slope; the tile's type."""
    t = _tile(args[0])
    if t.dtype not in PRELU_DTYPES:
        raise TileTypeError(op, "tile", f"requires an FP16 or FP32 tile (pto-isa's TLRELU has floating-point forms "
                            f"only), but got {t.dtype.value.upper()}")
    return t


REDUCE_DTYPES = frozenset({DType.INT16, DType.INT32, DType.FP16, DType.BF16, DType.FP32})
"""Element types of the sum / max reductions (pldemu's set: the integer and float types pypto-lib reduces)."""

ROW_MIN_DTYPES = frozenset({DType.INT16, DType.INT32, DType.FP16, DType.FP32})
"""tile.row_min: pypto's deducer's set."""


@dataclass(frozen=True)
class Reduce:
    """A row (``axis`` -1: ``[..., R, C] -> [..., R, 1]``) or column (``axis`` -2: ``-> [..., 1, C]``)
    reduction; the reduced axis's valid extent becomes 1, the other extents are kept. An optional second
    argument is pypto's ``tmp_tile`` scratch: same dtype and rank, each dim at least the input's."""

    axis: int
    dtypes: frozenset[DType]
    index: bool = False
    """An arg reduction (pypto's row_argmax / row_argmin, col_argmax / col_argmin): INT32 indices; a row one's
    scratch has exactly the input's shape (pypto's row deducer; its column deducer checks no scratch)."""

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        t = _tile(args[0])
        if len(t.shape) < 2 or t.dtype not in self.dtypes:
            legal = ", ".join(sorted(d.value for d in self.dtypes))
            raise IRTypeError(op, "tile", f"a tile of rank >= 2 of {legal}", describe(t))
        exact = self.index and self.axis == -1
        if len(args) > 1:
            tmp = _tile(args[1])
            if tmp.dtype is not t.dtype or len(tmp.shape) != len(t.shape) or any(
                    a < b or (exact and a != b) for a, b in zip(tmp.shape, t.shape, strict=True)):
                size = "exactly" if exact else "at least"
                raise IRTypeError(op, "tmp_tile", f"a {t.dtype.value} tile {size} {_dims(t)}", describe(tmp))
        shape = list(t.shape)
        valid = list(valid_of(t))
        shape[self.axis], valid[self.axis] = 1, Const(1)
        dtype = DType.INT32 if self.index else t.dtype
        return TileType(dtype, tuple(shape), _canonical_valid(tuple(shape), valid), t.memory)


@dataclass(frozen=True)
class Expand:
    """``x op v`` with ``v`` one row vector per row (``axis`` -1: ``v [..., M, 1]``) or one column vector
    (``axis`` -2: ``v [..., 1, N]``) broadcast over ``x``; also the plain broadcasts row_expand /
    col_expand (``x`` is the target). The result is ``x``'s type; pldemu wants equal dtypes (pypto
    promotes: cast first)."""

    axis: int

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        x, v = _tile(args[0]), _tile(args[1])
        want = list(x.shape)
        want[self.axis] = 1
        # pypto's deducer compares the trailing pair only: leading axes of one element on either side are
        # the same cells (a [16, 1] vector of a [1, 1, 16, 128] tile)
        if len(x.shape) < 2 or len(v.shape) < 2 or _lead_free(tuple(want)) != _lead_free(v.shape) \
                or v.dtype is not x.dtype:
            raise IRTypeError(op, "vec", f"a tile {x.dtype.value}{want} (one value per "
                              f"{'row' if self.axis == -1 else 'column'} of {_dims(x)})", describe(v))
        return x


def _lead_free(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading axes of one element (the trailing pair kept)."""
    lead = next((i for i, d in enumerate(shape[:-2]) if d != 1), len(shape) - 2)
    return shape[lead:]


MATMUL_DTYPES = frozenset({DType.FP16, DType.BF16, DType.FP32, DType.INT8, DType.UINT8, DType.INT16,
                           DType.UINT16, DType.INT32, DType.UINT32, DType.INT64})
"""Operand types of the cube ops: pypto's deducer wants equal lhs / rhs dtypes and no more; pldemu also
refuses BOOL, INDEX and the FP8 types (the MX path has its own ops)."""

ON_CHIP = frozenset(MemorySpace) - {MemorySpace.DDR}
"""The spaces ``tile.move`` goes between (a tile never lives in DDR)."""


def accumulator_dtype(dtype: DType) -> DType:
    """The cube's accumulator: FP32 for float operands, INT32 for integer ones (pypto's deducer)."""
    return DType.FP32 if dtype.is_float else DType.INT32


def deduce_move(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.move(tile, target_memory=): the same shape, dtype, valid box and layout in another on-chip space."""
    t = _tile(args[0])
    target = attrs["target_memory"]
    assert isinstance(target, MemorySpace)
    if target not in ON_CHIP:
        raise TileTypeError(op, "target_memory", "moves between on-chip spaces (Vec, Mat, Left, Right, Acc, Bias); "
                            "a tile reaches DDR by tile.store")
    return TileType(t.dtype, t.shape, t.valid_shape, target, t.layout)


def _operand(op: Op, name: str, t: TileType, space: MemorySpace, rank: int | None) -> None:
    if t.memory is not space:
        raise TileTypeError(op, name, f"takes its {name} in {space.name} memory (pypto's input memory), but got a "
                            f"{t.memory.name} tile; tile.move it to {space.name} first")
    if (rank is not None and len(t.shape) != rank) or len(t.shape) < 2:
        raise IRTypeError(op, name, "a rank-2 tile" if rank == 2 else "a tile of rank >= 2", describe(t))
    if t.layout is not TileLayout.ND:
        raise TileTypeError(op, name, f"requires an ND (row-major) tile, but got {t.layout.name}")


def _batch(op: Op, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast of two batch shapes (tensor.matmul's rule)."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        raise TileTypeError(op, "rhs", f"requires broadcastable batch dims, but got {list(a)} and {list(b)}")
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def matmul_product(op: Op, lhs: TileType, rhs: TileType, rank: int | None) -> TileType:
    """The product tile of ``lhs @ rhs`` (pypto's DeduceMatmulProductInfo): equal dtypes and physical K, rhs valid
    K covering lhs valid K; physical ``[..., lhs M, rhs N]``, valid ``[..., lhs valid M, rhs valid N]``, the
    accumulator dtype, in Acc."""
    _operand(op, "lhs", lhs, MemorySpace.Left, rank)
    _operand(op, "rhs", rhs, MemorySpace.Right, rank)
    if lhs.dtype is not rhs.dtype or lhs.dtype not in MATMUL_DTYPES:
        raise TileTypeError(op, "rhs", f"requires identical lhs and rhs data types from "
                            f"{', '.join(sorted(d.value for d in MATMUL_DTYPES))}, but got {lhs.dtype.value} and "
                            f"{rhs.dtype.value}")
    if lhs.shape[-1] != rhs.shape[-2]:
        raise TileTypeError(op, "rhs", f"requires matching physical inner dimensions (physical K), but got lhs "
                            f"K={lhs.shape[-1]} and rhs K={rhs.shape[-2]}")
    lk, rk = static_int(valid_of(lhs)[-1]), static_int(valid_of(rhs)[-2])
    if lk is not None and rk is not None and rk < lk:
        raise TileTypeError(op, "rhs", f"requires rhs valid K to cover lhs valid K, but got lhs K={lk} and rhs K={rk}")
    batch = _batch(op, lhs.shape[:-2], rhs.shape[:-2])
    shape = (*batch, lhs.shape[-2], rhs.shape[-1])
    valid = (*(Const(d) for d in batch), valid_of(lhs)[-2], valid_of(rhs)[-1])
    return TileType(accumulator_dtype(lhs.dtype), shape, _canonical_valid(shape, valid), MemorySpace.Acc)


@dataclass(frozen=True)
class Matmul:
    """tile.matmul (``rank`` 2) / tile.batch_matmul (``rank`` None: rank >= 2, batch dims broadcast)."""

    rank: int | None

    def __call__(self, op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
        lhs, rhs = _tile(args[0]), _tile(args[1])
        if self.rank is None and len(lhs.shape) < 3 and len(rhs.shape) < 3:
            raise IRTypeError(op, "lhs", "an operand of rank >= 3 (tile.matmul multiplies rank-2 tiles)", describe(lhs))
        return matmul_product(op, lhs, rhs, self.rank)


def deduce_matmul_acc(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.matmul_acc(acc, lhs, rhs[, init_cond]) / tile.batch_matmul_acc(acc, lhs, rhs) (an operand of rank >= 3,
    batch dims broadcast to acc's): acc in Acc with the accumulator dtype, its physical shape the product's, its
    valid box covering the product's; the result is the accumulator (its type)."""
    acc = _tile(args[0])
    batched = op is Op.TILE_BATCH_MATMUL_ACC
    product = matmul_product(op, _tile(args[1]), _tile(args[2]), None if batched else 2)
    if batched and max(len(acc.shape), len(_tile(args[1]).shape), len(_tile(args[2]).shape)) < 3:
        raise IRTypeError(op, "lhs", "an operand of rank >= 3 (tile.matmul_acc takes rank-2 tiles)", describe(acc))
    if acc.memory is not MemorySpace.Acc:
        raise TileTypeError(op, "acc", f"takes its acc in Acc memory, but got a {acc.memory.name} tile; tile.move "
                            "it to Acc first")
    if acc.dtype is not product.dtype:
        raise TileTypeError(op, "acc", f"requires accumulator dtype {product.dtype.value}, but got {acc.dtype.value}")
    if acc.shape != product.shape:
        raise TileTypeError(op, "acc", f"requires matching physical M and N, but got acc {_dims(acc)} and product "
                            f"{_dims(product)}")
    for axis, what in ((-2, "M"), (-1, "N")):
        need, have = static_int(valid_of(product)[axis]), static_int(valid_of(acc)[axis])
        if need is not None and have is not None and have < need:
            raise TileTypeError(op, "acc", f"requires acc valid {what} to cover the product's, but got acc "
                                f"{what}={have} and product {what}={need}")
    if len(args) > 3:
        cond = args[3]
        assert not isinstance(cond, ListExpr)
        if not isinstance(cond.type, ScalarType) or cond.type.dtype is not DType.BOOL:
            raise IRTypeError(op, "init_cond", "a bool scalar", describe(cond.type))
    return acc


def reshaped_valid(shape: tuple[int, ...], valid: tuple[Expr, ...], new: tuple[int, ...]) -> tuple[Expr, ...] | None:
    """The valid box of a reshape (pypto maps it through the reshape): fully valid stays so; a partial box
    survives a reshape that only adds or drops unit axes. None: no box of ``new`` describes it."""
    if tuple(static_int(v) for v in valid) == shape:
        return tuple(Const(d) for d in new)
    if tuple(d for d in shape if d != 1) != tuple(d for d in new if d != 1):
        return None
    if any(static_int(v) != 1 for v, d in zip(valid, shape, strict=True) if d == 1):
        return None
    kept = iter([v for v, d in zip(valid, shape, strict=True) if d != 1])
    return tuple(next(kept) if d != 1 else Const(1) for d in new)


def deduce_reshape(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.reshape(tile, [shape]): a zero-copy view with the same element count; the valid box mapped through
    (refused where no box of the new shape describes it, as pypto refuses)."""
    t = _tile(args[0])
    assert isinstance(args[1], ListExpr)
    shape = tuple(static_int(i) or 0 for i in args[1].items)
    if any(d <= 0 for d in shape) or math.prod(shape) != math.prod(t.shape):
        raise IRTypeError(op, "shape", f"positive extents of {math.prod(t.shape)} elements (the tile's)",
                          str(list(shape)))
    valid = reshaped_valid(t.shape, valid_of(t), shape)
    if valid is None:
        raise TileTypeError(op, "tile", f"cannot carry the valid box {_valid_text(t)} of {_dims(t)} into "
                            f"{list(shape)}: no box of the new shape describes it (fillpad the tile first)")
    return TileType(t.dtype, shape, _canonical_valid(shape, valid), t.memory, t.layout)


def deduce_tile_slice(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.slice(tile, [shape], [offset]): a static window of the tile; its valid box is the source's
    shifted by ``offset`` and cut to the window (pypto's rule), so a window of a fully valid tile is fully
    valid. A static window must lie inside the tile; a dynamic offset is checked when it runs."""
    t = _tile(args[0])
    assert isinstance(args[1], ListExpr) and isinstance(args[2], ListExpr)
    shape = tuple(static_int(i) or 0 for i in args[1].items)
    offsets = [static_int(o) for o in args[2].items]
    if len(shape) != len(t.shape) or len(offsets) != len(t.shape) or any(d <= 0 for d in shape):
        raise IRTypeError(op, "shape", f"{len(t.shape)} positive extents and {len(t.shape)} offsets",
                          f"{list(shape)} at {len(offsets)} offsets")
    valid: list[Expr] = []
    for axis, (ext, off, dim, v) in enumerate(zip(shape, offsets, t.shape, valid_of(t), strict=True)):
        if ext > dim or (off is not None and not 0 <= off <= dim - ext):
            raise TileTypeError(op, "offset", f"window {list(shape)} at axis {axis} offset {off} runs off the "
                                f"tile's {dim}")
        have = static_int(v)
        if have == dim:
            valid.append(Const(ext))
        elif off is not None and have is not None:
            valid.append(Const(min(max(have - off, 0), ext)))
        else:
            raise TileTypeError(op, "tile", f"slice of a partly valid tile {_valid_text(t)} at a dynamic offset "
                                "is not supported by pldemu")
    return TileType(t.dtype, shape, _canonical_valid(shape, valid), t.memory, t.layout)


def deduce_tile_concat(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.concat(src0, src1): two 2-D tiles of one dtype and row count side by side, typed fully valid as
    pypto's deducer types it."""
    a, b = _tile(args[0]), _tile(args[1])
    if a.dtype != b.dtype:
        raise TileTypeError(op, "src1", f"src0 and src1 must have same dtype, got {a.dtype.value} and {b.dtype.value}")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise TileTypeError(op, "src0", f"requires 2D tiles, got {_dims(a)} and {_dims(b)}")
    if a.shape[0] != b.shape[0]:
        raise TileTypeError(op, "src1", f"row count must match, got {a.shape[0]} vs {b.shape[0]}")
    return TileType(a.dtype, (a.shape[0], a.shape[1] + b.shape[1]), None, a.memory)


def deduce_tile_element(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.read(tile, [indices]) is a scalar of the tile's dtype; tile.write(tile, [indices], value) writes
    one element in place (an effect). One index per axis; a constant index must lie inside the tile."""
    t = _tile(args[0])
    assert isinstance(args[1], ListExpr)
    if len(args[1].items) != len(t.shape):
        raise IRTypeError(op, "element", f"a list of {len(t.shape)} entries (one per dimension)",
                          str(len(args[1].items)))
    for axis, (i, dim) in enumerate(zip(args[1].items, t.shape, strict=True)):
        at = static_int(i)
        if at is not None and not 0 <= at < dim:
            raise TileTypeError(op, "element", f"index {at} of axis {axis} is outside the tile's {dim}")
    return ScalarType(t.dtype) if op is Op.TILE_READ else NONE


def deduce_tile_assemble(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.assemble(target, source, [offset]): the source's valid box written into the target tile at
    ``offset``, in place (an effect; what pypto's gather_row DMA and in-place assemble do). One dtype; the
    box's static extents must lie inside the target (its physical shape may not: gather_row's window is
    static, its transfer the valid part)."""
    t, src = _tile(args[0]), _tile(args[1])
    assert isinstance(args[2], ListExpr)
    if t.dtype != src.dtype:
        raise TileTypeError(op, "source", f"source dtype {src.dtype.value} must be the target's {t.dtype.value}")
    if len(args[2].items) != len(t.shape) or len(src.shape) != len(t.shape):
        raise TileTypeError(op, "offset", f"a source and offsets of the target's rank {len(t.shape)}")
    box = src.shape if src.valid_shape is None else tuple(static_int(v) for v in src.valid_shape)
    for axis, (o, e, d) in enumerate(zip(args[2].items, box, t.shape, strict=True)):
        at = static_int(o)
        # a run-time valid extent (gather_row's valid_shape) is checked when it runs: only its box moves
        if (e is not None and e > d) or (at is not None and not 0 <= at <= d - (e or 0)):
            raise TileTypeError(op, "offset", f"source box {[b if b is not None else '?' for b in box]} at axis "
                                f"{axis} offset {at} runs off the target's {d}")
    return NONE


TL, S, L, SL, TS = Kind.TILE, Kind.SCALAR, Kind.LIST, Kind.STATIC_LIST, Kind.TILE_OR_SCALAR
_CMP = AttrSpec("cmp_type", CmpType, None)

TILE_SIGNATURES: Mapping[Op, Signature] = {
    Op.TILE_SIN: sig([("tile", TL)], deduce_fp32_only),
    Op.TILE_COS: sig([("tile", TL)], deduce_fp32_only),
    Op.TILE_EXP: sig([("tile", TL)], UnaryMath(FLOAT_MATH_DTYPES)),
    Op.TILE_LOG: sig([("tile", TL)], UnaryMath(LOG_DTYPES)),
    Op.TILE_SQRT: sig([("tile", TL)], UnaryMath(FLOAT_MATH_DTYPES)),
    Op.TILE_RSQRT: sig([("tile", TL), ("tmp", TL, True)], UnaryMath(FLOAT_MATH_DTYPES)),
    Op.TILE_RECIP: sig([("tile", TL)], UnaryMath(FLOAT_MATH_DTYPES)),
    Op.TILE_NEG: sig([("tile", TL)], UnaryMath(None)),
    Op.TILE_ABS: sig([("tile", TL)], UnaryMath(None)),
    Op.TILE_DIV: sig([("lhs", TL), ("rhs", TL)], deduce_div),
    Op.TILE_DIVS: sig([("lhs", TL), ("rhs", S)], deduce_tile_scalar),
    Op.TILE_MAXIMUMS: sig([("lhs", TL), ("rhs", S)], deduce_tile_scalar),
    Op.TILE_MINIMUMS: sig([("lhs", TL), ("rhs", S)], deduce_tile_scalar),
    Op.TILE_ROW_SUM: sig([("tile", TL), ("tmp_tile", TL, True)], Reduce(-1, REDUCE_DTYPES)),
    Op.TILE_ROW_MAX: sig([("tile", TL), ("tmp_tile", TL, True)], Reduce(-1, REDUCE_DTYPES)),
    Op.TILE_ROW_MIN: sig([("tile", TL), ("tmp_tile", TL, True)], Reduce(-1, ROW_MIN_DTYPES)),
    Op.TILE_COL_SUM: sig([("tile", TL), ("tmp_tile", TL, True)], Reduce(-2, REDUCE_DTYPES)),
    Op.TILE_COL_MAX: sig([("tile", TL)], Reduce(-2, REDUCE_DTYPES)),
    Op.TILE_COL_MIN: sig([("tile", TL)], Reduce(-2, REDUCE_DTYPES)),
    Op.TILE_ROW_ARGMAX: sig([("tile", TL), ("tmp_tile", TL)], Reduce(-1, REDUCE_DTYPES, index=True)),
    Op.TILE_ROW_ARGMIN: sig([("tile", TL), ("tmp_tile", TL)], Reduce(-1, REDUCE_DTYPES, index=True)),
    Op.TILE_ROW_PROD: sig([("tile", TL), ("tmp_tile", TL)], Reduce(-1, REDUCE_DTYPES)),
    Op.TILE_COL_PROD: sig([("tile", TL)], Reduce(-2, REDUCE_DTYPES)),
    Op.TILE_COL_ARGMAX: sig([("tile", TL), ("tmp_tile", TL)], Reduce(-2, REDUCE_DTYPES, index=True)),
    Op.TILE_COL_ARGMIN: sig([("tile", TL), ("tmp_tile", TL)], Reduce(-2, REDUCE_DTYPES, index=True)),
    Op.TILE_RELU: sig([("tile", TL)], UnaryMath(None)),
    Op.TILE_FMOD: sig([("lhs", TL), ("rhs", TL)], deduce_fmod),
    Op.TILE_FMODS: sig([("lhs", TL), ("rhs", S)], deduce_tile_scalar),
    Op.TILE_EXPANDS: sig([("target", TL), ("scalar", S)], deduce_tile_scalar),
    **{op: sig([("lhs", TL), ("rhs", TL)], Bitwise()) for op in (Op.TILE_AND, Op.TILE_OR)},
    **{op: sig([("lhs", TL), ("rhs", TL)], Bitwise(shift=True)) for op in (Op.TILE_SHL, Op.TILE_SHR)},
    **{op: sig([("lhs", TL), ("rhs", S)], Bitwise()) for op in (Op.TILE_ANDS, Op.TILE_ORS, Op.TILE_SHLS,
                                                                 Op.TILE_SHRS)},
    Op.TILE_XOR: sig([("lhs", TL), ("rhs", TL), ("tmp", TL, True)], Bitwise()),
    Op.TILE_XORS: sig([("lhs", TL), ("rhs", S), ("tmp", TL, True)], Bitwise()),
    Op.TILE_NOT: sig([("tile", TL)], deduce_not),
    **{op: sig([("lhs", TL), ("rhs", TL)], deduce_partial) for op in (Op.TILE_PART_ADD, Op.TILE_PART_MUL,
                                                                       Op.TILE_PART_MAX, Op.TILE_PART_MIN)},
    Op.TILE_REM: sig([("lhs", TL), ("rhs", TL), ("tmp", TL)], deduce_rem),
    Op.TILE_REMS: sig([("lhs", TL), ("rhs", S), ("tmp", TL)], deduce_rems),
    Op.TILE_PRELU: sig([("tile", TL), ("slope", TL), ("tmp", TL)], deduce_prelu),
    Op.TILE_LRELU: sig([("tile", TL), ("slope", S)], deduce_lrelu),
    **{op: sig([("tile", TL), ("vec", TL)], Expand(-1 if op.text.startswith("tile.row") else -2)) for op in (
        Op.TILE_ROW_EXPAND, Op.TILE_ROW_EXPAND_ADD, Op.TILE_ROW_EXPAND_SUB, Op.TILE_ROW_EXPAND_MUL,
        Op.TILE_ROW_EXPAND_DIV, Op.TILE_ROW_EXPAND_MAX, Op.TILE_ROW_EXPAND_MIN, Op.TILE_ROW_EXPAND_EXPDIF,
        Op.TILE_COL_EXPAND, Op.TILE_COL_EXPAND_ADD, Op.TILE_COL_EXPAND_SUB, Op.TILE_COL_EXPAND_MUL,
        Op.TILE_COL_EXPAND_DIV, Op.TILE_COL_EXPAND_MAX, Op.TILE_COL_EXPAND_MIN, Op.TILE_COL_EXPAND_EXPDIF)},
    Op.TILE_RESHAPE: sig([("tile", TL), ("shape", SL)], deduce_reshape),
    Op.TILE_SLICE: sig([("tile", TL), ("shape", SL), ("offset", L)], deduce_tile_slice),
    Op.TILE_CONCAT: sig([("src0", TL), ("src1", TL)], deduce_tile_concat),
    Op.TILE_READ: sig([("tile", TL), ("element", L)], deduce_tile_element),
    Op.SCALAR_CAST: sig([("value", S)], deduce_scalar_cast, [AttrSpec("dtype", DType, None)]),
    Op.TILE_ASSEMBLE: sig([("target", TL), ("source", TL), ("offset", L)], deduce_tile_assemble),
    Op.TILE_WRITE: sig([("tile", TL), ("element", L), ("value", S)], deduce_tile_element),
    Op.TILE_MOVE: sig([("tile", TL)], deduce_move, [AttrSpec("target_memory", MemorySpace, None)]),
    Op.TILE_MATMUL: sig([("lhs", TL), ("rhs", TL)], Matmul(2)),
    Op.TILE_BATCH_MATMUL: sig([("lhs", TL), ("rhs", TL)], Matmul(None)),
    Op.TILE_MATMUL_ACC: sig([("acc", TL), ("lhs", TL), ("rhs", TL), ("init_cond", S, True)], deduce_matmul_acc),
    Op.TILE_BATCH_MATMUL_ACC: sig([("acc", TL), ("lhs", TL), ("rhs", TL)], deduce_matmul_acc),
    Op.TILE_CAST: sig([("tile", TL)], deduce_cast,
                      [AttrSpec("dtype", DType, None), AttrSpec("mode", CastMode, CastMode.None_)]),
    Op.TILE_CMP: sig([("lhs", TL), ("rhs", TL)], deduce_cmp, [_CMP]),
    Op.TILE_CMPS: sig([("lhs", TL), ("rhs", S)], deduce_cmp, [_CMP]),
    Op.TILE_SELECT: sig([("cond", TL), ("on_true", TS), ("on_false", TS)], deduce_select),
    Op.TILE_SEL: sig([("mask", TL), ("lhs", TL), ("rhs", TL), ("tmp", TL)], deduce_sel),
    Op.TILE_SELS: sig([("mask", TL), ("src", TL), ("tmp", TL), ("scalar", S)], deduce_sels),
    Op.TILE_FULL: sig([("shape", SL), ("value", S), ("valid_shape", L, True)], deduce_full,
                      [AttrSpec("dtype", DType, None)], [Region("shape", extent="valid_shape")]),
}
"""Entries of the one signature table (merged there; tile.cast and tile.full replace older forms)."""

__all__ = [
    "DIV_DTYPES",
    "FLOAT_MATH_DTYPES",
    "LOG_DTYPES",
    "MASK_COL_ALIGN",
    "MATMUL_DTYPES",
    "PRELU_DTYPES",
    "REDUCE_DTYPES",
    "REM_DTYPES",
    "ROW_MIN_DTYPES",
    "SELS_SRC_DTYPES",
    "TILE_SIGNATURES",
    "TileTypeError",
    "accumulator_dtype",
    "mask_type",
    "sels_scalar_dtype",
    "valid_of",
]
