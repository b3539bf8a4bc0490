"""Signatures of pypto's fused and generator tile ops: the three-operand adds (tile.addc, tile.addsc), the
triangular mask (tile.tri), the pad into a larger tile (tile.fillpad_expand), and the cube's bias and GEMV
forms (tile.matmul_bias, tile.gemv, tile.gemv_acc, tile.gemv_bias).

Merged into the one table ``pldemu.ir.signatures.SIGNATURES``. The rules are pypto e2d0f78's deducers
(src/ir/op/tile_ops/elementwise.cpp, memory.cpp, matmul.cpp), narrowed where pldemu's add is (one shape and
dtype for the tile operands: pypto promotes and broadcasts, the device's TADDC has one tile type).

    tile.addc(lhs, rhs, rhs2)          -> lhs's type       (lhs + rhs) + rhs2
    tile.addsc(lhs, scalar, rhs2)      -> lhs's type       (lhs + scalar) + rhs2
    tile.tri(diagonal, [R, C][, valid], dtype=int32, upper=0) -> dtype [R, C] valid `valid`
    tile.fillpad_expand(src, [R, C], pad=zero)             -> src's dtype [R, C], fully valid
    tile.matmul_bias(lhs, rhs, bias)   -> tile.matmul's type (bias [1, N] in Bias, the accumulator dtype)
    tile.gemv(lhs [1, K], rhs [K, N], acc_phase=unspecified) -> acc dtype [16, N] valid [1, valid N], Acc
    tile.gemv_acc(acc, lhs, rhs)       -> tile.gemv's type (acc exactly that type)
    tile.gemv_bias(lhs, rhs, bias)     -> tile.gemv's type
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import MemorySpace, PadValue
from pldemu.ir.nodes import (
    Arg,
    AttrValue,
    Const,
    Expr,
    ListExpr,
    ScalarType,
    TileType,
    Type,
    format_attr,
    format_dims,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.tile_signatures import (
    FLOAT_MATH_DTYPES,
    TileTypeError,
    matmul_product,
    valid_of,
)
from pldemu.ir.vocabulary import AttrSpec, IRTypeError, Region, Signature, describe, sig
from pldemu.ir.vocabulary import Kind as K

TL, S, SL, L = K.TILE, K.SCALAR, K.STATIC_LIST, K.LIST


def _tile(a: Arg) -> TileType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TileType)
    return a.type


def _numeric(op: Op, arg: str, t: TileType) -> None:
    if not (t.dtype.is_int or t.dtype in FLOAT_MATH_DTYPES):
        raise IRTypeError(op, arg, "a numeric tile", describe(t))


def _like(op: Op, arg: str, a: TileType, b: TileType) -> None:
    """``b`` has ``a``'s dtype and physical shape (pldemu's rule for the operands of one add)."""
    if b.dtype is not a.dtype or b.shape != a.shape:
        raise IRTypeError(op, arg, f"a tile {a.dtype.value}{list(a.shape)} like lhs (pldemu: pypto promotes and "
                          "broadcasts, the device adds tiles of one type)", describe(b))


def deduce_addc(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.addc(lhs, rhs, rhs2) = TADDC: three numeric tiles of one dtype and shape; lhs's type (pypto's
    deducer keeps lhs's valid box)."""
    a = _tile(args[0])
    _numeric(op, "lhs", a)
    _like(op, "rhs", a, _tile(args[1]))
    _like(op, "rhs2", a, _tile(args[2]))
    return a


def deduce_addsc(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.addsc(lhs, scalar, rhs2) = TADDSC: numeric tiles of one dtype and shape and a scalar the kernel takes
    in the tile's dtype; a float scalar on an integer tile is refused (pypto types the result as the promoted
    float, which TADDSC, one element type throughout, cannot write). lhs's type."""
    a = _tile(args[0])
    _numeric(op, "lhs", a)
    scalar = args[1]
    assert not isinstance(scalar, ListExpr)
    if not isinstance(scalar.type, ScalarType) or (a.dtype.is_int and not scalar.type.dtype.is_int):
        raise TileTypeError(op, "rhs", f"of an {a.dtype.value.upper()} tile requires an integer scalar, but got "
                            f"{describe(scalar.type)}: pypto types the result as the promoted float, which TADDSC "
                            "(dst and sources of one type) cannot write")
    _like(op, "rhs2", a, _tile(args[2]))
    return a


TRI_DTYPES = frozenset({DType.INT8, DType.UINT8, DType.INT16, DType.INT32, DType.UINT16, DType.UINT32, DType.FP16,
                        DType.BF16, DType.FP32})
"""tile.tri's element types (pypto's deducer; A2/A3's TTRI has INT16, INT32, UINT16, UINT32, FP16, FP32)."""


def _static_extents(op: Op, arg: str, items: Sequence[Expr]) -> tuple[int, ...]:
    dims = tuple(static_int(i) for i in items)
    if any(d is None for d in dims):
        raise IRTypeError(op, arg, "compile-time constant extents", format_dims(tuple(items)))
    return tuple(d for d in dims if d is not None)


def deduce_tri(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.tri(diagonal, shape[, valid_shape], dtype=, upper=) = TTRI, pypto's deducer: an INT32 diagonal, a
    static positive 2-D shape, a static valid box with ``0 < valid <= shape``; the dtype from pypto's set."""
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType)
    if dtype not in TRI_DTYPES:
        raise TileTypeError(op, "dtype", f"requires dtype to be one of {{INT8, UINT8, INT16, INT32, UINT16, UINT32, "
                            f"FP16, BF16, FP32}}, but got {dtype.value.upper()}")
    diagonal = args[0]
    assert not isinstance(diagonal, ListExpr)
    if not isinstance(diagonal.type, ScalarType) or diagonal.type.dtype is not DType.INT32:
        raise IRTypeError(op, "diagonal", "an INT32 scalar", describe(diagonal.type))
    assert isinstance(args[1], ListExpr)
    shape = _static_extents(op, "shape", args[1].items)
    if len(shape) != 2 or any(d <= 0 for d in shape):
        raise IRTypeError(op, "shape", "a 2-D shape of positive extents", str(list(shape)))
    valid: tuple[Expr, ...] | None = None
    if len(args) > 2:
        assert isinstance(args[2], ListExpr)
        items = args[2].items
        extents = tuple(static_int(i) for i in items)
        # a static box is pypto's rule, checked here; one of the rank count (NR) is checked by the precheck
        # (Signature.regions) once NR is known, as tile.full's valid box is
        if len(extents) != 2 or any(v is not None and not 0 < v <= d for v, d in zip(extents, shape, strict=True)):
            raise TileTypeError(op, "valid_shape", f"requires 0 < valid_shape[i] <= shape[i], but got "
                                f"{format_dims(tuple(items))} and {list(shape)}")
        valid = None if extents == shape else tuple(items)
    return TileType(dtype, shape, valid, MemorySpace.Vec)


def deduce_fillpad_expand(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.fillpad_expand(src, shape, pad=) = TFILLPAD_EXPAND, pypto's deducer: a shape of the source's rank,
    static positive extents no smaller than the source's; the result fully valid, the source's dtype and
    memory (its valid box copied to the top left, the rest the pad)."""
    t = _tile(args[0])
    assert isinstance(args[1], ListExpr)
    shape = _static_extents(op, "shape", args[1].items)
    if len(shape) != len(t.shape):
        raise TileTypeError(op, "shape", f"rank ({len(shape)}) must match source rank ({len(t.shape)})")
    for axis, (new, old) in enumerate(zip(shape, t.shape, strict=True)):
        if new <= 0 or new < old:
            raise TileTypeError(op, "shape", f"destination dimension {axis} ({new}) must be positive and >= source "
                                f"dimension ({old})")
    return TileType(t.dtype, shape, None, t.memory)


def _bias(op: Op, bias: TileType, product: TileType) -> None:
    """pypto's DeduceTileMatMulBiasType on the bias: [1, N] of the product's N, in Bias memory, its valid box
    at least one row and covering the product's valid N, the accumulator dtype."""
    if bias.memory is not MemorySpace.Bias:
        raise TileTypeError(op, "bias", f"takes its bias in Bias memory (pypto's input memory), but got a "
                            f"{bias.memory.name} tile; tile.move it to Bias first")
    if len(bias.shape) != 2 or bias.shape[0] != 1 or bias.shape[1] != product.shape[-1]:
        raise TileTypeError(op, "bias", f"requires bias to have shape [1, {product.shape[-1]}] (the output's N), but "
                            f"got {list(bias.shape)}")
    rows, cols = (static_int(v) for v in valid_of(bias))
    need = static_int(valid_of(product)[-1])
    if rows == 0 or (cols is not None and need is not None and cols < need):
        raise TileTypeError(op, "bias", f"requires bias valid [1, N] to cover the output's valid N={need}, but got "
                            f"{format_dims(valid_of(bias))}")
    if bias.dtype is not product.dtype:
        raise TileTypeError(op, "bias", f"requires bias dtype {product.dtype.value} to match the accumulator, but "
                            f"got {bias.dtype.value}")


def deduce_matmul_bias(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.matmul_bias(lhs, rhs, bias) = TMATMUL_BIAS: tile.matmul's product, its bias checked (:func:`_bias`)."""
    product = matmul_product(op, _tile(args[0]), _tile(args[1]), 2)
    _bias(op, _tile(args[2]), product)
    return product


GEMV_DTYPES = frozenset({DType.INT8, DType.FP16, DType.BF16, DType.FP32})
"""tile.gemv's operand types (pypto's deducer: INT8 -> INT32, FP16 / BF16 / FP32 -> FP32)."""

GEMV_ROWS = 16
"""The physical rows of a GEMV result (pypto's BuildGemvResultType: the cube's 16-row fractal); row 0 is valid."""

GEMV_PHASES = frozenset({"unspecified", "partial", "final"})


def _gemv(op: Op, lhs: TileType, rhs: TileType, attrs: Mapping[str, AttrValue]) -> TileType:
    """The GEMV result type (pypto's DeduceTileGemvType): the matmul product's checks, the GEMV dtypes, a lhs of
    exactly one physical and one valid row; ``[16, N]`` valid ``[1, valid N]`` in Acc."""
    if attrs.get("acc_phase", "unspecified") not in GEMV_PHASES:
        raise TileTypeError(op, "acc_phase", f"requires acc_phase to be one of {{unspecified, partial, final}}, but "
                            f"got {format_attr(attrs['acc_phase'])}")
    product = matmul_product(op, lhs, rhs, 2)
    if lhs.dtype not in GEMV_DTYPES:
        raise TileTypeError(op, "lhs", f"supports only INT8 x INT8 -> INT32 and same-type FP16/BF16/FP32 inputs -> "
                            f"FP32, but got {lhs.dtype.value}")
    if lhs.shape[0] != 1 or static_int(valid_of(lhs)[0]) != 1:
        raise TileTypeError(op, "lhs", f"requires lhs physical and logical row extent to be exactly 1 (GEMV), but "
                            f"got shape {list(lhs.shape)} valid {format_dims(valid_of(lhs))}")
    shape = (GEMV_ROWS, product.shape[1])
    return TileType(product.dtype, shape, (Const(1), valid_of(product)[1]), MemorySpace.Acc)


def deduce_gemv(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.gemv(lhs, rhs, acc_phase=) = TGEMV: :func:`_gemv`."""
    return _gemv(op, _tile(args[0]), _tile(args[1]), attrs)


def deduce_gemv_acc(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.gemv_acc(acc, lhs, rhs, acc_phase=) = TGEMV_ACC: acc in Acc, of exactly the GEMV result's physical
    shape, dtype and valid box (pypto's deducer); the result is the accumulator."""
    acc = _tile(args[0])
    want = _gemv(op, _tile(args[1]), _tile(args[2]), attrs)
    if acc.memory is not MemorySpace.Acc:
        raise TileTypeError(op, "acc", f"takes its acc in Acc memory, but got a {acc.memory.name} tile; tile.move it "
                            "to Acc first")
    if (acc.shape, acc.dtype) != (want.shape, want.dtype) or valid_of(acc) != valid_of(want):
        raise TileTypeError(op, "acc", f"requires an accumulator {want.dtype.value}{list(want.shape)} valid "
                            f"{format_dims(valid_of(want))} (the GEMV result's), but got {acc.dtype.value}"
                            f"{list(acc.shape)} valid {format_dims(valid_of(acc))}")
    return acc


def deduce_gemv_bias(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.gemv_bias(lhs, rhs, bias, acc_phase=) = TGEMV_BIAS: the GEMV result type; the bias as
    tile.matmul_bias's, with exactly one valid row (pypto's deducer)."""
    result = _gemv(op, _tile(args[0]), _tile(args[1]), attrs)
    bias = _tile(args[2])
    _bias(op, bias, matmul_product(op, _tile(args[0]), _tile(args[1]), 2))
    if static_int(valid_of(bias)[0]) not in (1, None):
        raise TileTypeError(op, "bias", f"requires bias to have exactly one valid row, but got "
                            f"{format_dims(valid_of(bias))}")
    return result


_PHASE = AttrSpec("acc_phase", str, "unspecified")

FUSED_SIGNATURES: Mapping[Op, Signature] = {
    Op.TILE_ADDC: sig([("lhs", TL), ("rhs", TL), ("rhs2", TL)], deduce_addc),
    Op.TILE_ADDSC: sig([("lhs", TL), ("rhs", S), ("rhs2", TL)], deduce_addsc),
    Op.TILE_TRI: sig([("diagonal", S), ("shape", SL), ("valid_shape", L, True)], deduce_tri,
                     [AttrSpec("dtype", DType, DType.INT32), AttrSpec("upper", int, 0)],
                     [Region("shape", extent="valid_shape")]),
    Op.TILE_FILLPAD_EXPAND: sig([("tile", TL), ("shape", SL)], deduce_fillpad_expand,
                                [AttrSpec("pad", PadValue, PadValue.zero)]),
    Op.TILE_MATMUL_BIAS: sig([("lhs", TL), ("rhs", TL), ("bias", TL)], deduce_matmul_bias),
    Op.TILE_GEMV: sig([("lhs", TL), ("rhs", TL)], deduce_gemv, [_PHASE]),
    Op.TILE_GEMV_ACC: sig([("acc", TL), ("lhs", TL), ("rhs", TL)], deduce_gemv_acc, [_PHASE]),
    Op.TILE_GEMV_BIAS: sig([("lhs", TL), ("rhs", TL), ("bias", TL)], deduce_gemv_bias, [_PHASE]),
}
"""Entries of the one signature table (merged there)."""

__all__ = ["FUSED_SIGNATURES", "GEMV_DTYPES", "GEMV_ROWS", "TRI_DTYPES"]
