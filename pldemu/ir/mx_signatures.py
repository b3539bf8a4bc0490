"""Signatures of MX quantisation (tile.tquant_mx and what it lowers to), the zero-copy views and tuples.

Merged into the one table ``pldemu.ir.signatures.SIGNATURES``. The constraints and result types are the
reference's (shared/reference/tile-ops.md section 4); the geometry formulas the lowering also needs live
here once (:func:`mx_geometry`, :func:`x2zz_tmp_bytes`).

    tile.tquant_mx(src [M, K], dtype=fp8e4m3fn, group_axis=1) -> (quant fp8e4m3fn [M, K] ND,
                                                                 scale fp8e8m0 [M, K/32] ZZ)
    tile.tquant_mx(src [N, K], group_axis=0)                  -> (quant [K, N] ND, scale [K/32, N] NN)
    tile.tquant_mx_raw(src [R, C], max, scaling)              -> (int8 [R, C], uint8 exp)
        exp: axis 1 [1, R*C/32] ("legacy flat"), axis 0 [R/32, C]; max/scaling are written (workspaces)
    tile.tmov_x2zz(exp, tmp, group_axis, dst_rows, dst_cols)  -> uint8 ZZ: axis 1 [align16(R), C],
                                                                 axis 0 [C_src, R_src]

A pldemu extension, outside the spec (the pass never emits nor lowers it; it is not a composite):

    tile.dequant_mx(quant, scale, group_axis[, scale_layout]) -> fp32 [quant shape] ND
        the decode of tile.tquant_mx's public pair: quant * 2^(e8m0 - 127), e8m0 0xFF -> NaN; the scale is
        read in its public byte layout (axis 1 ZZ [M, K/32], axis 0 NN [K/32, N]); an ND scale tile (its
        bytes loaded back from a buffer) names that layout with scale_layout=ZZ / NN (the default, ND,
        means "the scale tile's own layout")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import TileLayout, enum_text
from pldemu.ir.nodes import (
    Arg,
    AttrValue,
    Const,
    ListExpr,
    TileType,
    TupleType,
    Type,
    format_dims,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.tile_signatures import TileTypeError, valid_of
from pldemu.ir.vocabulary import AttrSpec, Kind, Signature, sig, static_numel

MX_GROUP = 32
"""Elements sharing one E8M0 scale (kMXGroupSize)."""
ZZ_ROWS, ZZ_COLS = 16, 2
"""One ZZ box: 16 rows x 2 scale bytes (kMXSFractalRows / kMXSFractalCols)."""
MX_SRC_DTYPES = (DType.FP16, DType.FP32, DType.BF16)
TMP_ALIGN = 32


def align(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class MxGeometry:
    """The (possibly transposed) source the raw op quantises and its groups (groups of 32 along
    rows for axis 0, along columns for axis 1)."""

    axis: int
    rows: int
    cols: int

    @property
    def group_rows(self) -> int:
        return self.rows // MX_GROUP if self.axis == 0 else self.rows

    @property
    def group_cols(self) -> int:
        return self.cols if self.axis == 0 else self.cols // MX_GROUP

    @property
    def groups(self) -> int:
        return self.group_rows * self.group_cols

    @property
    def exp_shape(self) -> tuple[int, int]:
        """The raw op's exponent tile: axis 1 legacy flat [1, G], axis 0 DN [rows/32, cols]."""
        return (1, self.groups) if self.axis == 1 else (self.group_rows, self.group_cols)

    def workspace_shape(self, dtype: DType) -> tuple[int, int]:
        """Physical shape of the max / scaling workspaces (valid: ``exp_shape``). Axis 1 pads the row to
        64 (FP32) / 128 (B16) elements, doubled for the FP32 "unroll" path that stores each scaling twice."""
        if self.axis == 0:
            return self.exp_shape
        return 1, align(self.groups * (2 if self.scaling_twice(dtype) else 1), 64 if dtype is DType.FP32 else 128)

    def scaling_twice(self, dtype: DType) -> bool:
        """The FP32 axis-1 "unroll" path, which stores every scaling value twice (vintlv(s, s))."""
        n = self.rows * self.cols
        return self.axis == 1 and dtype is DType.FP32 and n > 1024 and n % 256 == 0

    @property
    def tmp_bytes(self) -> int:
        """The x2zz scratch allocation: axis 1 ``64 + ceil(rows/16) * cols`` bytes, axis 0 a 32-byte pad;
        32-byte aligned (the spec's "33-byte-aligned" is a typo: pypto's comment and the ISA say 32)."""
        return align(x2zz_tmp_bytes(self.axis, self.group_rows, self.group_cols), TMP_ALIGN)


def x2zz_tmp_bytes(axis: int, dst_rows: int, dst_cols: int) -> int:
    """The least tmp capacity tile.tmov_x2zz accepts: (16 + rowBlocks * C/2 + 16) * 2 bytes on axis 1."""
    return 64 + -(-dst_rows // ZZ_ROWS) * dst_cols if axis == 1 else 32


def mx_geometry(src: TileType, axis: int) -> MxGeometry:
    """The geometry of the raw op for a public source (axis 0 transposes [N, K] to [K, N] first)."""
    rows, cols = src.shape
    return MxGeometry(axis, cols, rows) if axis == 0 else MxGeometry(axis, rows, cols)


def _tile(a: Arg) -> TileType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TileType)
    return a.type


def _nbytes(t: TileType) -> int:
    n = t.dtype.itemsize
    for d in t.shape:
        n *= d
    return n


def _axis(op: Op, attrs: Mapping[str, AttrValue]) -> int:
    axis = attrs["group_axis"]
    if axis not in (0, 1):
        raise TileTypeError(op, "group_axis", f"group_axis must be 0 or 1, but got {axis}")
    assert isinstance(axis, int)
    return axis


def _check_mx_dtype(op: Op, attrs: Mapping[str, AttrValue]) -> None:
    if attrs["dtype"] is not DType.FP8E4M3FN:
        got = attrs["dtype"].value.upper() if isinstance(attrs["dtype"], DType) else attrs["dtype"]
        raise TileTypeError(op, "dtype", f"requires dtype FP8E4M3FN (MXFP8-only), but got {got}; FP8E5M2 and "
                            "FP4 MX formats are not supported")


def _check_src(op: Op, src: TileType) -> None:
    if len(src.shape) != 2:
        raise TileTypeError(op, "src", f"requires a rank-2 src tile, but got rank {len(src.shape)}")
    if src.dtype not in MX_SRC_DTYPES:
        raise TileTypeError(op, "src", f"requires src dtype FP16, FP32 or BF16, but got {src.dtype.value.upper()}")
    if any(d <= 0 for d in src.shape):
        raise TileTypeError(op, "src", f"requires static positive dims, but got {list(src.shape)}")
    if src.valid_shape is not None:
        raise TileTypeError(op, "src", "does not support a partial src valid_shape: the src must be fully "
                            f"valid, but got valid {format_dims(src.valid_shape)} of {list(src.shape)}")


def _mx_src(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> tuple[int, TileType]:
    """The checks tquant_mx and tquant_mx_raw share: the MX dtype, the axis, the source tile."""
    _check_mx_dtype(op, attrs)
    axis = _axis(op, attrs)
    src = _tile(args[0])
    _check_src(op, src)
    return axis, src


def deduce_tquant_mx(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """The public op: every constraint of the reference, then (quant, scale)."""
    axis, src = _mx_src(op, args, attrs)
    d0, k = src.shape
    m_name = "N" if axis == 0 else "M"
    if k % 64:
        raise TileTypeError(op, "src", f"requires K divisible by 64 (two 32-element groups per ZZ box), but "
                            f"got {m_name}, K = {d0}, {k}")
    if axis == 1 and d0 % ZZ_ROWS:
        raise TileTypeError(op, "src", f"with group_axis=1 requires M divisible by 16 (the ZZ box rows), but "
                            f"got M = {d0}")
    if axis == 0 and d0 % MX_GROUP:
        raise TileTypeError(op, "src", f"with group_axis=0 requires N divisible by 32, but got N = {d0}")
    g = mx_geometry(src, axis)
    quant = TileType(DType.FP8E4M3FN, (g.rows, g.cols), None, src.memory)
    if axis == 1:
        scale = TileType(DType.FP8E8M0, (g.rows, g.group_cols), None, src.memory, TileLayout.ZZ)
    else:
        scale = TileType(DType.FP8E8M0, (g.group_rows, g.cols), None, src.memory, TileLayout.NN)
    return TupleType((quant, scale))


def _valid_count(t: TileType) -> int | None:
    return static_numel(valid_of(t))


def deduce_tquant_mx_raw(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """(src, max, scaling) -> (INT8 dst [src shape], UINT8 exp); max / scaling are written workspaces."""
    axis, src = _mx_src(op, args, attrs)
    rows, cols = src.shape
    if (rows if axis == 0 else cols) % MX_GROUP:
        raise TileTypeError(op, "src", f"requires the group axis extent divisible by 32, but got {list(src.shape)}")
    g = MxGeometry(axis, rows, cols)
    for name, a in (("max", args[1]), ("scaling", args[2])):
        w = _tile(a)
        if w.dtype is not src.dtype:
            raise TileTypeError(op, name, f"requires the {name} scratch in the src dtype {src.dtype.value.upper()}, "
                                f"but got {w.dtype.value.upper()}")
        if _valid_count(w) != g.groups:
            raise TileTypeError(op, name, f"requires {name} scratch valid element count {g.groups} (one per group), "
                                f"but got {_valid_count(w)}")
    dst = TileType(DType.INT8, src.shape, None, src.memory)
    exp = TileType(DType.UINT8, g.exp_shape, None, src.memory)
    return TupleType((dst, exp))


def _int_attr(attrs: Mapping[str, AttrValue], name: str) -> int:
    v = attrs[name]
    assert isinstance(v, int)
    return v


def deduce_tmov_x2zz(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """The exponent bytes rearranged into 16x2-byte ZZ boxes (TMovNdTo2Zz / TMovDnTo2Zz)."""
    axis = _axis(op, attrs)
    src, tmp = _tile(args[0]), _tile(args[1])
    for name, t in (("src", src), ("tmp", tmp)):
        if len(t.shape) != 2 or t.dtype is not DType.UINT8 or t.layout is not TileLayout.ND:
            raise TileTypeError(op, name, f"requires a rank-2 UINT8 ND (row_major) {name} tile, but got "
                                f"{t.dtype.value.upper()}{list(t.shape)} {t.layout.name}")
    return _x2zz_axis1(op, src, tmp, attrs) if axis == 1 else _x2zz_axis0(op, src, tmp)


def _x2zz_axis1(op: Op, src: TileType, tmp: TileType, attrs: Mapping[str, AttrValue]) -> Type:
    r, c = _int_attr(attrs, "dst_rows"), _int_attr(attrs, "dst_cols")
    if r <= 0 or c <= 0:
        raise TileTypeError(op, "dst_rows", f"with group_axis=1 requires positive dst_rows and dst_cols, but got "
                            f"{r}, {c}")
    if c % ZZ_COLS:
        raise TileTypeError(op, "dst_cols", f"requires an even dst_cols (2 scale bytes per ZZ box row), but got {c}")
    valid = tuple(static_int(v) for v in valid_of(src))
    if valid not in ((1, r * c), (r, c)):
        raise TileTypeError(op, "src", f"requires src valid [1, {r * c}] or [{r}, {c}], but got {list(valid)}")
    if src.shape[0] * src.shape[1] < align(r, ZZ_ROWS) * c:
        raise TileTypeError(op, "src", f"requires at least {align(r, ZZ_ROWS) * c} physical src elements "
                            f"(align16(dst_rows) * dst_cols), but got {src.shape[0] * src.shape[1]}")
    need = x2zz_tmp_bytes(1, r, c)
    if _nbytes(tmp) < need:
        raise TileTypeError(op, "tmp", f"requires tmp capacity >= 64 + ceil(dst_rows/16) * dst_cols = {need} bytes, "
                            f"but got {_nbytes(tmp)}")
    shape = (align(r, ZZ_ROWS), c)
    vshape = None if shape == (r, c) else (Const(r), Const(c))
    return TileType(DType.UINT8, shape, vshape, src.memory, TileLayout.ZZ)


def _x2zz_axis0(op: Op, src: TileType, tmp: TileType) -> Type:
    vr, vc = (static_int(v) for v in valid_of(src))
    assert vr is not None and vc is not None
    if vr < 2 or vr % 2:
        raise TileTypeError(op, "src", f"with group_axis=0 requires an even number (>= 2) of valid src rows, but "
                            f"got {vr}")
    if vc % ZZ_ROWS or src.shape[1] != vc:
        raise TileTypeError(op, "src", f"with group_axis=0 requires src cols divisible by 16 and physical cols == "
                            f"valid cols, but got {src.shape[1]} physical, {vc} valid")
    if _nbytes(tmp) < 32:
        raise TileTypeError(op, "tmp", f"with group_axis=0 requires the minimal 32-byte tmp pad, but got "
                            f"{_nbytes(tmp)} bytes")
    return TileType(DType.UINT8, (src.shape[1], src.shape[0]), None, src.memory, TileLayout.ZZ)


def deduce_reinterpret_view(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """The same bytes seen with another dtype (and optionally another static shape), equal byte size."""
    t = _tile(args[0])
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType)
    shape = t.shape
    if len(args) > 1:
        assert isinstance(args[1], ListExpr)
        shape = tuple(static_int(i) or 0 for i in args[1].items)
    new = TileType(dtype, shape, None, t.memory, t.layout)
    if _nbytes(new) != _nbytes(t):
        raise TileTypeError(op, "dtype", f"requires an equal byte size: {t.dtype.value}{list(t.shape)} is "
                            f"{_nbytes(t)} bytes, {dtype.value}{list(shape)} is {_nbytes(new)}")
    if t.valid_shape is not None and shape != t.shape:
        raise TileTypeError(op, "data", "requires a fully valid tile to change the shape")
    valid = t.valid_shape if shape == t.shape and dtype.itemsize == t.dtype.itemsize else None
    return TileType(dtype, shape, valid, t.memory, t.layout)


def _dequant_quant(op: Op, q: TileType, axis: int) -> None:
    """The quant operand: what tile.tquant_mx returns (FP8E4M3FN, fully valid, axis 1 [M, K] with M % 16
    and K % 64 == 0, axis 0 [K, N] with K % 64 and N % 32 == 0)."""
    if len(q.shape) != 2 or q.dtype is not DType.FP8E4M3FN or q.layout is not TileLayout.ND:
        raise TileTypeError(op, "quant", f"requires a rank-2 FP8E4M3FN ND quant tile, but got "
                            f"{q.dtype.value.upper()}{list(q.shape)} {q.layout.name}")
    if q.valid_shape is not None:
        raise TileTypeError(op, "quant", "requires a fully valid quant tile")
    rows, cols = q.shape
    group, other = (cols, rows) if axis == 1 else (rows, cols)
    need = ZZ_ROWS if axis == 1 else MX_GROUP
    if group % 64 or other % need:
        dims = "[M, K] with M divisible by 16" if axis == 1 else "[K, N] with N divisible by 32"
        raise TileTypeError(op, "quant", f"with group_axis={axis} requires quant {dims} and K divisible by 64 "
                            f"(tile.tquant_mx's quant), but got {list(q.shape)}")


def deduce_dequant_mx(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """pldemu extension (see the module docstring): (quant, scale) -> FP32 [quant shape]."""
    axis = _axis(op, attrs)
    q, s = _tile(args[0]), _tile(args[1])
    _dequant_quant(op, q, axis)
    rows, cols = q.shape
    want = (rows, cols // MX_GROUP) if axis == 1 else (rows // MX_GROUP, cols)
    if s.dtype is not DType.FP8E8M0 or s.shape != want or s.valid_shape is not None:
        raise TileTypeError(op, "scale", f"requires a fully valid FP8E8M0{list(want)} scale for quant {list(q.shape)} "
                            f"on group_axis={axis}, but got {s.dtype.value.upper()}{list(s.shape)}")
    public = TileLayout.ZZ if axis == 1 else TileLayout.NN
    named = attrs["scale_layout"]
    assert isinstance(named, TileLayout)
    layout = s.layout if named is TileLayout.ND else named
    if layout is not public or s.layout not in (public, TileLayout.ND):
        raise TileTypeError(op, "scale", f"with group_axis={axis} reads the scale in its public layout "
                            f"{public.name}, but got a {s.layout.name} scale tile with scale_layout="
                            f"{enum_text(named)} (an ND tile of the stored bytes: pass scale_layout={public.name})")
    return TileType(DType.FP32, q.shape, None, q.memory)


def _rank2(op: Op, t: TileType) -> None:
    if len(t.shape) != 2:
        raise TileTypeError(op, "tile", f"requires a rank-2 tile, but got rank {len(t.shape)}")


def deduce_transpose_view(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """Zero copy: the two dims swapped, the layout its transpose dual, (i, j) = source (j, i)."""
    t = _tile(args[0])
    _rank2(op, t)
    valid = None if t.valid_shape is None else (t.valid_shape[1], t.valid_shape[0])
    return TileType(t.dtype, (t.shape[1], t.shape[0]), valid, t.memory, t.layout.transposed)


def deduce_transpose(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.transpose(tile, axis1, axis2): a real (copying) swap of two axes of an ND tile of rank >= 2 (literal,
    distinct after negative indexing, as pypto's deducer). The valid box's extents are swapped with them
    (pypto types the result fully valid; pldemu keeps the pad a pad, so a transposed pad is never read as data)."""
    t = _tile(args[0])
    rank = len(t.shape)
    axes = tuple(static_int(a) if not isinstance(a, ListExpr) else None for a in args[1:])
    norm = tuple(None if a is None or not -rank <= a < rank else a % rank for a in axes)
    if rank < 2 or None in norm or norm[0] == norm[1]:
        raise TileTypeError(op, "axis1", f"requires two distinct literal axes of a tile of rank >= 2, but got {axes} "
                            f"for rank {rank}")
    if t.layout is not TileLayout.ND:
        raise TileTypeError(op, "tile", f"requires an ND tile, but got {t.layout.name}")
    a, b = norm
    assert a is not None and b is not None
    shape, valid = list(t.shape), list(t.valid_shape) if t.valid_shape is not None else None
    shape[a], shape[b] = shape[b], shape[a]
    if valid is not None:
        valid[a], valid[b] = valid[b], valid[a]
    return TileType(t.dtype, tuple(shape), None if valid is None else tuple(valid), t.memory)


def deduce_make_tuple(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    elements = []
    for a in args:
        assert not isinstance(a, ListExpr)
        elements.append(a.type)
    return TupleType(tuple(elements))


def deduce_get_item(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    a = args[0]
    assert not isinstance(a, ListExpr) and isinstance(a.type, TupleType)
    index = _int_attr(attrs, "index")
    if not 0 <= index < len(a.type.elements):
        raise TileTypeError(op, "index", f"index {index} is out of range for a {len(a.type.elements)}-tuple")
    return a.type.elements[index]




TL, S, SL, TU, V = Kind.TILE, Kind.SCALAR, Kind.STATIC_LIST, Kind.TUPLE, Kind.VALUE
_MX_ATTRS = (AttrSpec("dtype", DType, DType.FP8E4M3FN), AttrSpec("group_axis", int, None))

MX_SIGNATURES: Mapping[Op, Signature] = {
    Op.TILE_TQUANT_MX: sig([("src", TL)], deduce_tquant_mx, _MX_ATTRS),
    Op.TILE_TQUANT_MX_RAW: sig([("src", TL), ("max", TL), ("scaling", TL)], deduce_tquant_mx_raw, _MX_ATTRS,
                                writes=("max", "scaling")),
    Op.TILE_TMOV_X2ZZ: sig([("src", TL), ("tmp", TL)], deduce_tmov_x2zz,
                            [AttrSpec("group_axis", int, None), AttrSpec("dst_rows", int, 0),
                             AttrSpec("dst_cols", int, 0)]),
    Op.TILE_REINTERPRET_VIEW: sig([("data", TL), ("shape", SL, True)], deduce_reinterpret_view,
                                   [AttrSpec("dtype", DType, None)]),
    Op.TILE_TRANSPOSE_VIEW: sig([("tile", TL)], deduce_transpose_view),
    Op.TILE_TRANSPOSE: sig([("tile", TL), ("axis1", S), ("axis2", S)], deduce_transpose),
    Op.TILE_DEQUANT_MX: sig([("quant", TL), ("scale", TL)], deduce_dequant_mx,
                             [AttrSpec("group_axis", int, None), AttrSpec("scale_layout", TileLayout, TileLayout.ND)]),
    Op.TUPLE_MAKE: sig([("first", V), ("second", V), ("third", V, True), ("fourth", V, True)],
                        deduce_make_tuple),
    Op.TUPLE_GET_ITEM: sig([("tuple", TU)], deduce_get_item, [AttrSpec("index", int, None)]),
}
"""Entries of the one signature table (merged there)."""

__all__ = ["MX_GROUP", "MX_SIGNATURES", "MxGeometry", "align", "mx_geometry", "x2zz_tmp_bytes"]
