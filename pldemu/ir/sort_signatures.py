"""Signatures of the sort / gather / arange family: tile.ci (pypto's arange), tile.sort32, tile.mrgsort (format 1),
tile.mrgsort_merge (format 2), tile.gather (index form) and tile.gather_mask (mask form).

Merged into the one table ``pldemu.ir.signatures.SIGNATURES``. The rules are pypto's deducers
(src/ir/op/tile_ops/sort.cpp, src/ir/op/tensor_ops/gather.cpp, src/ir/op/tile_ops/memory.cpp ``tile.ci``);
the numerics are in ``pldemu/runtime/ops/sort.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import MemorySpace
from pldemu.ir.nodes import Arg, AttrValue, ListExpr, ScalarType, TileType, Type, static_int
from pldemu.ir.ops import Op
from pldemu.ir.tile_signatures import TileTypeError
from pldemu.ir.vocabulary import AttrSpec, IRTypeError, Kind, Signature, describe, sig

CI_DTYPES = frozenset({DType.INT16, DType.INT32, DType.UINT16, DType.UINT32})
"""tile.ci / pl.arange element types (pypto's deducer)."""

SORT_DTYPES = frozenset({DType.FP32})
"""tile.sort32 / mrgsort in pldemu: FP32. pypto also types FP16 (the last dim doubled), but the hardware's FP16
pair is (value, pad, u32 index), four FP16 slots, which the doubled shape cannot hold; pldemu refuses FP16."""

GATHER_DTYPES = frozenset({DType.FP16, DType.FP32, DType.INT16, DType.INT32})
"""The index form's source types (pypto's deducer)."""

MASK_PATTERNS: Mapping[int, tuple[int, int]] = {1: (2, 0), 2: (2, 1), 3: (4, 0), 4: (4, 1), 5: (4, 2), 6: (4, 3),
                                                 7: (1, 0)}
"""pypto's mask patterns 1..7 (P0101, P1010, P0001, P0010, P0100, P1000, P1111) as (stride, phase): the
gather keeps element ``phase`` of every group of ``stride`` (P0101 the sort32 values, P1010 their indices)."""


def _tile(a: Arg) -> TileType:
    assert not isinstance(a, ListExpr) and isinstance(a.type, TileType)
    return a.type


def _dims(t: TileType) -> list[int]:
    return list(t.shape)


def deduce_ci(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.ci(start, [shape]) {dtype, descending}: ``[0, k] = start + k`` (``- k`` descending); only the first
    row is written, so leading dims must be 1; the innermost dim is not 1; ``start`` has the dtype."""
    dtype = attrs["dtype"]
    assert isinstance(dtype, DType) and isinstance(args[1], ListExpr)
    if dtype not in CI_DTYPES:
        raise TileTypeError(op, "dtype", f"dtype must be one of INT16, INT32, UINT16, UINT32, got {dtype.value}")
    start = args[0]
    assert not isinstance(start, ListExpr)
    if not isinstance(start.type, ScalarType) or start.type.dtype is not dtype:
        raise TileTypeError(op, "start", f"start must be a {dtype.value} scalar, got {describe(start.type)}")
    shape = tuple(static_int(i) or 0 for i in args[1].items)
    if not shape or any(d <= 0 for d in shape):
        raise IRTypeError(op, "shape", "positive extents", str(list(shape)))
    if shape[-1] == 1 or any(d != 1 for d in shape[:-1]):
        raise TileTypeError(op, "shape", f"writes one row: leading dims must be 1 and the innermost not 1, got "
                            f"{list(shape)}")
    return TileType(dtype, shape, None, MemorySpace.Vec)


def deduce_sort32(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.sort32(src, idx): FP32 src; idx a 32-bit integer tile of src's shape; [..., 2N] pairs, fully valid."""
    src, idx = _tile(args[0]), _tile(args[1])
    if src.dtype not in SORT_DTYPES:
        raise TileTypeError(op, "src", f"src must be FP32 in pldemu (pypto also types FP16; see SORT_DTYPES), got "
                            f"{src.dtype.value}")
    if idx.dtype not in (DType.UINT32, DType.INT32) or idx.shape != src.shape:
        raise TileTypeError(op, "idx", f"idx must be a UINT32 / INT32 tile of src's shape {_dims(src)}, got "
                            f"{describe(idx)}")
    if src.shape[-1] % 32:
        raise TileTypeError(op, "src", f"sorts 32-element blocks: the last dim must be a multiple of 32, got "
                            f"{_dims(src)}")
    return TileType(src.dtype, (*src.shape[:-1], 2 * src.shape[-1]), None, src.memory)


def deduce_mrgsort(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.mrgsort(src) {block_len}: runs of ``block_len`` slots merged four at a time; a positive multiple of 64."""
    src = _tile(args[0])
    block = attrs["block_len"]
    assert isinstance(block, int)
    if block <= 0 or block % 64:
        raise TileTypeError(op, "block_len", f"block_len must be a positive multiple of 64, got {block}")
    if src.dtype not in SORT_DTYPES or src.shape[-1] % 2:
        raise TileTypeError(op, "src", f"src must be FP32 (value, index) pairs, got {describe(src)}")
    return TileType(src.dtype, src.shape, None, src.memory)


def deduce_mrgsort_merge(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.mrgsort_merge(src0, src1[, src2, src3]): 2-4 sorted lists of pairs, equal dtype and rank, one row;
    the result's last dim is the sum of theirs."""
    srcs = [_tile(a) for a in args]
    first = srcs[0]
    for i, t in enumerate(srcs):
        if t.dtype not in SORT_DTYPES or t.dtype is not first.dtype or len(t.shape) != len(first.shape):
            raise TileTypeError(op, f"src{i}", f"lists must be FP32 pairs of one rank, got {describe(t)}")
        if t.shape[:-1] != first.shape[:-1] or any(d != 1 for d in t.shape[:-1]) or t.shape[-1] % 2:
            raise TileTypeError(op, f"src{i}", f"merges one row of (value, index) pairs, got {_dims(t)}")
    return TileType(first.dtype, (*first.shape[:-1], sum(t.shape[-1] for t in srcs)), None, first.memory)


def deduce_gather(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.gather(src, indices) {per_row}: the result has the indices' shape and src's dtype. per_row=1
    (pypto's tensor form, ``dim=-1``): ``out[b, k] = src[b, idx[b, k]]``, equal rank >= 2, each leading dim of
    the indices at most src's (pypto's tensor.gather: src's rows past the indices' are unused);
    per_row=0 (``pl.tile.gather``): ``out[i, j] = src.flat[idx[i, j]]``."""
    src, idx = _tile(args[0]), _tile(args[1])
    if src.dtype not in GATHER_DTYPES:
        raise TileTypeError(op, "src", f"src must be FP16, FP32, INT16 or INT32, got {src.dtype.value}")
    wide_ok = idx.dtype is DType.INT32 or (idx.dtype is DType.INT16 and src.dtype.itemsize == 2)
    if not wide_ok:
        raise TileTypeError(op, "indices", f"indices must be INT32 (or INT16 with a 16-bit src), got "
                            f"{idx.dtype.value}")
    if attrs["per_row"] and (len(idx.shape) != len(src.shape) or len(src.shape) < 2
                             or any(i > s for i, s in zip(idx.shape[:-1], src.shape[:-1], strict=True))):
        raise TileTypeError(op, "indices", f"index shape {_dims(idx)} must be at most input {_dims(src)} on every "
                            "axis but the last, at equal rank >= 2")
    return TileType(src.dtype, idx.shape, idx.valid_shape, src.memory)


def deduce_gather_mask(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.gather_mask(src) {pattern, dtype}: 2-D; the last dim / 2 (P0101, P1010), / 4 (P0001..P1000) or kept
    (P1111); ``dtype`` reinterprets the bits (same width)."""
    src = _tile(args[0])
    pattern, dtype = attrs["pattern"], attrs["dtype"]
    assert isinstance(pattern, int) and isinstance(dtype, DType)
    if pattern not in MASK_PATTERNS:
        raise TileTypeError(op, "mask_pattern", f"mask_pattern must be 1..7, got {pattern}")
    if len(src.shape) != 2:
        raise TileTypeError(op, "src", f"takes a 2-D input, got {_dims(src)}")
    stride = MASK_PATTERNS[pattern][0]
    if src.shape[-1] % stride:
        raise TileTypeError(op, "src", f"the last dim {src.shape[-1]} is not a multiple of {stride}")
    if dtype.itemsize != src.dtype.itemsize:
        raise TileTypeError(op, "output_dtype", f"output_dtype must have the bit width of {src.dtype.value}, got "
                            f"{dtype.value}")
    return TileType(dtype, (src.shape[0], src.shape[1] // stride), None, src.memory)


def deduce_scatter_mask(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.scatter_mask(src, dst) {pattern}: the inverse of gather_mask: ``dst`` (2-D, one dtype, ``src``'s
    rows, ``src.cols * stride`` columns) with the pattern's columns replaced by ``src``'s; typed as ``dst``."""
    src, dst = _tile(args[0]), _tile(args[1])
    pattern = attrs["pattern"]
    assert isinstance(pattern, int)
    if pattern not in MASK_PATTERNS:
        raise TileTypeError(op, "mask_pattern", f"mask_pattern must be 1..7, got {pattern}")
    if len(src.shape) != 2 or len(dst.shape) != 2 or src.dtype != dst.dtype:
        raise TileTypeError(op, "dst", f"takes 2-D src and dst of one dtype, got {_dims(src)} {src.dtype.value} and "
                            f"{_dims(dst)} {dst.dtype.value}")
    stride = MASK_PATTERNS[pattern][0]
    if dst.shape != (src.shape[0], src.shape[1] * stride):
        raise TileTypeError(op, "dst", f"dst must be [{src.shape[0]}, {src.shape[1] * stride}] (src cols x {stride}), "
                            f"got {_dims(dst)}")
    return dst


SCATTER_DTYPES = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.FP16, DType.FP32, DType.BF16})
"""pypto's scatter element types (tensor.scatter / tile.scatter)."""


def deduce_scatter(op: Op, args: Sequence[Arg], attrs: Mapping[str, AttrValue]) -> Type:
    """tile.scatter(dst, src, indexes) {per_row}: ``dst`` with ``src``'s elements written where ``indexes`` (``src``'s
    shape) points; typed as ``dst``. per_row=1 (pypto's tensor form, ``dim=-1``): ``out[b, idx[b, k]] = src[b, k]``,
    ``src`` no larger than ``dst``; per_row=0 (``pl.tile.scatter``): ``out.flat[idx[i, j]] = src[i, j]``. 2-D, one
    element type; the index element as wide as the element (INT16 for a 1-byte one), as pypto's deducers require."""
    dst, src, idx = _tile(args[0]), _tile(args[1]), _tile(args[2])
    if dst.dtype not in SCATTER_DTYPES or src.dtype != dst.dtype:
        raise TileTypeError(op, "src", f"dst and src of one type in I8, I16, I32, FP16, FP32, BF16, got "
                            f"{dst.dtype.value} and {src.dtype.value}")
    if idx.dtype not in (DType.INT16, DType.INT32) or idx.dtype.itemsize != max(dst.dtype.itemsize, 2):
        raise TileTypeError(op, "indexes", f"indexes must be INT32 for a 4-byte element, INT16 for a 1- or 2-byte "
                            f"one, got {idx.dtype.value} for {dst.dtype.value}")
    if len(dst.shape) != 2 or len(src.shape) != 2 or idx.shape != src.shape:
        raise TileTypeError(op, "indexes", f"2-D dst and src, indexes of src's shape, got dst {_dims(dst)}, src "
                            f"{_dims(src)}, indexes {_dims(idx)}")
    if attrs["per_row"] and (src.shape[0] > dst.shape[0] or src.shape[1] > dst.shape[1]):
        raise TileTypeError(op, "src", f"src {_dims(src)} must be no larger than dst {_dims(dst)}")
    return dst


TL, S, SL = Kind.TILE, Kind.SCALAR, Kind.STATIC_LIST

SORT_SIGNATURES: Mapping[Op, Signature] = {
    Op.TILE_CI: sig([("start", S), ("shape", SL)], deduce_ci,
                    [AttrSpec("dtype", DType, None), AttrSpec("descending", int, 0)]),
    Op.TILE_SORT32: sig([("src", TL), ("idx", TL)], deduce_sort32),
    Op.TILE_MRGSORT: sig([("src", TL)], deduce_mrgsort, [AttrSpec("block_len", int, None)]),
    Op.TILE_MRGSORT_MERGE: sig([("src0", TL), ("src1", TL), ("src2", TL, True), ("src3", TL, True)],
                               deduce_mrgsort_merge),
    Op.TILE_GATHER: sig([("src", TL), ("index_tile", TL)], deduce_gather, [AttrSpec("per_row", int, 0)]),
    Op.TILE_GATHER_MASK: sig([("src", TL)], deduce_gather_mask,
                             [AttrSpec("pattern", int, None), AttrSpec("dtype", DType, None)]),
    Op.TILE_SCATTER_MASK: sig([("src", TL), ("dst", TL)], deduce_scatter_mask, [AttrSpec("pattern", int, None)]),
    Op.TILE_SCATTER: sig([("dst", TL), ("src", TL), ("indexes", TL)], deduce_scatter, [AttrSpec("per_row", int, 1)]),
}
"""Entries of the one signature table (merged there)."""

__all__ = ["CI_DTYPES", "GATHER_DTYPES", "MASK_PATTERNS", "SCATTER_DTYPES", "SORT_DTYPES", "SORT_SIGNATURES"]
