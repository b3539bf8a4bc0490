"""pypto's sort / gather / arange family in a device body: ``pl.arange`` / ``ci``, ``pl.sort32``, ``pl.mrgsort``
(format 1 ``block_len=`` and format 2, 2-4 lists), ``pl.gather`` (index and mask forms) and ``pl.tile.gather`` /
``pl.tile.gather_mask``, ``pl.scatter`` (index and mask forms) and ``pl.tile.scatter``, in the unified, tensor and
tile spellings.

Each is one pldemu tile op (``pldemu/ir/sort_signatures.py``: pypto's deducers; ``pldemu/runtime/ops/sort.py``:
the numerics); a tensor operand is loaded whole first, as pypto's ConvertTensorToTileOps keeps the value on core.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import Const, ScalarType, TileType, Var
from pldemu.ir.ops import Op
from pldemu.ir.sort_signatures import SCATTER_DTYPES
from pldemu.pypto.translate.evaluator import bind_call
from pldemu.pypto.translate.level import DeviceLevel
from pldemu.pypto.translate.regions import on_core
from pldemu.pypto.translate.regions import tensor_level as tensor_level_value
from pldemu.pypto.types import PyDType

Rule = Callable[[DeviceLevel, ast.Call], Any]


def _emit(tr: DeviceLevel, op: Op, args: list[Any], attrs: dict[str, Any], hint: str) -> Var:
    out = tr.fb.op(op, args, attrs, hint=tr.hint(hint))
    assert out is not None
    return out


def _tile(tr: DeviceLevel, v: Any, name: str, what: str, node: ast.AST) -> Var:
    v = on_core(tr, v, node, name)
    if not (isinstance(v, Var) and isinstance(v.type, TileType)):
        raise tr.error(f"{name}: {what} must be a tile or a tensor, got {v!r}", node)
    return v


def _tt(v: Var) -> TileType:
    """The tile type of a Var :func:`_tile` accepted."""
    assert isinstance(v.type, TileType)
    return v.type


def _dtype(tr: DeviceLevel, v: Any, name: str, what: str, node: ast.AST) -> DType:
    if not isinstance(v, PyDType):
        raise tr.error(f"{name}: {what} must be a pl dtype, got {v!r}", node)
    return v.ir


def _arange(name: str) -> Rule:
    """``pl.arange(start, shape, dtype=INT32, descending=False)`` (pypto's ``tensor.ci`` / ``tile.ci``): a Python
    int start becomes a constant of ``dtype`` (pypto's wrapper re-stamps the literal); a device scalar must have
    that dtype (pypto's deducer)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("start", "shape", "dtype", "descending"),
                      {"dtype": PyDType("INT32", DType.INT32, 4), "descending": False}, name)
        dtype = _dtype(tr, b["dtype"], name, "dtype", node)
        start = b["start"]
        if isinstance(start, bool) or not (isinstance(start, int) or isinstance(getattr(start, "type", None),
                                                                                 ScalarType)):
            raise tr.error(f"{name}: start must be an int or an integer scalar, got {start!r}", node)
        if isinstance(start, int):
            start = Const(start, dtype)
        shape = b["shape"]
        if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) for d in shape):
            raise tr.error(f"{name}: shape must be a list of static ints, got {shape!r}", node)
        return _emit(tr, Op.TILE_CI, [start, list(shape)], {"dtype": dtype, "descending": int(bool(b["descending"]))},
                     "seq")

    return rule


def _sort32(name: str) -> Rule:
    """``pl.sort32(src, idx)``: 32-element blocks sorted descending into (value, index) pairs."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("src", "idx"), {}, name)
        src, idx = (_tile(tr, b[k], name, k, node) for k in ("src", "idx"))
        return _emit(tr, Op.TILE_SORT32, [src, idx], {}, "sorted")

    return rule


def _mrgsort(name: str) -> Rule:
    """``pl.mrgsort(src0, block_len=L)`` (format 1) or ``pl.mrgsort(src0, src1[, src2, src3])`` (format 2).
    ``tmp`` is the tile op's scratch (required for a tile-level format 2, refused on tensors: pypto's checks);
    ``exhausted=True`` (stop at the first exhausted list) is not modelled and refused."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("src0", "src1", "src2", "src3", "tmp", "exhausted"),
                      {"src1": None, "src2": None, "src3": None, "tmp": None, "exhausted": False, "block_len": None},
                      name)
        srcs = [b[k] for k in ("src0", "src1", "src2", "src3") if b[k] is not None]
        # a tensor, or a window / op of one, takes the tensor form (pypto's dispatch); pl.tile.mrgsort is the tile op
        tensor_level = tensor_level_value(tr, b["src0"]) and not name.startswith("pl.tile.")
        if b["tmp"] is not None and tensor_level:
            raise tr.error(f"pypto refuses it: {name}: tmp is Tile-only (at tensor level the scratch is "
                           "synthesised)", node)
        if b["block_len"] is not None:
            if len(srcs) > 1 or b["exhausted"]:
                raise tr.error(f"pypto refuses it: {name}() format1 (block_len=...) and format2 (src1, ...) are "
                               "mutually exclusive", node)
            block = b["block_len"].value if isinstance(b["block_len"], Const) else b["block_len"]
            if isinstance(block, bool) or not isinstance(block, int):
                raise tr.error(f"{name}: pldemu needs a compile-time block_len, got {block!r}", node)
            return _emit(tr, Op.TILE_MRGSORT, [_tile(tr, srcs[0], name, "src0", node)], {"block_len": block}, "merged")
        if len(srcs) < 2:
            raise tr.error(f"pypto refuses it: {name}() requires either block_len=<int> for format1, or at least "
                           "(src0, src1) for format2", node)
        if not tensor_level and b["tmp"] is None:
            raise tr.error(f"pypto refuses it: {name}: format2 on tiles needs tmp (a scratch tile)", node)
        if b["exhausted"]:
            raise tr.error(f"{name}: exhausted=True is not supported by pldemu (it merges every list to its end)",
                           node)
        tiles = [_tile(tr, s, name, f"src{i}", node) for i, s in enumerate(srcs)]
        return _emit(tr, Op.TILE_MRGSORT_MERGE, tiles, {}, "merged")

    return rule


def _gather(name: str) -> Rule:
    """``pl.gather(input, dim, index)`` (``out[b, k] = input[b, index[b, k]]``, ``dim`` the last axis) or
    ``pl.gather(input, mask_pattern=P, output_dtype=None)``; the compare form is refused."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("input", "dim", "index"),
                      {"dim": None, "index": None, "mask_pattern": None, "output_dtype": None, "kvalue": None,
                       "cmp_mode": None, "out_cols": None, "offset": 0, "count_dtype": None}, name)
        forms = [b["dim"] is not None or b["index"] is not None, b["mask_pattern"] is not None,
                 any(b[k] is not None for k in ("kvalue", "cmp_mode", "out_cols"))]
        if sum(forms) != 1:
            raise tr.error(f"pypto refuses it: {name}() index form (dim, index), mask form (mask_pattern=...) and "
                           "compare form (kvalue=..., cmp_mode=..., out_cols=...) are mutually exclusive, and one "
                           "is needed", node)
        if forms[2]:
            raise tr.error(f"{name}: the compare form (kvalue, cmp_mode, out_cols) is not supported by pldemu", node)
        src = _tile(tr, b["input"], name, "input", node)
        if forms[1]:
            return _mask(tr, src, b["mask_pattern"], b["output_dtype"], name, node)
        rank = len(src.type.shape) if isinstance(src.type, TileType) else 0
        if b["dim"] not in (-1, rank - 1) or b["index"] is None:
            raise tr.error(f"pypto refuses it: {name}: the index form gathers along the last axis only (dim=-1 "
                           f"with index=), got dim={b['dim']!r}", node)
        index = _tile(tr, b["index"], name, "index", node)
        return _emit(tr, Op.TILE_GATHER, [src, index], {"per_row": 1}, "gathered")

    return rule


def _mask(tr: DeviceLevel, src: Var, pattern: Any, out: Any, name: str, node: ast.AST) -> Var:
    if isinstance(pattern, bool) or not isinstance(pattern, int):
        raise tr.error(f"{name}: mask_pattern must be a compile-time int (pl.tile.MaskPattern.X), got {pattern!r}",
                       node)
    assert isinstance(src.type, TileType)
    dtype = src.type.dtype if out is None else _dtype(tr, out, name, "output_dtype", node)
    return _emit(tr, Op.TILE_GATHER_MASK, [src], {"pattern": pattern, "dtype": dtype}, "picked")


def _tile_gather(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.gather(src, indices, tmp)``: ``dst[i, j] = src.flat[indices[i, j]]`` (the flat offsets of pypto's
    tile form; ``tmp`` is the instruction's workspace)."""
    name = "pl.tile.gather"
    b = bind_call(tr, node, ("src", "indices", "tmp"), {}, name)
    src, idx = (_tile(tr, b[k], name, k, node) for k in ("src", "indices"))
    return _emit(tr, Op.TILE_GATHER, [src, idx], {"per_row": 0}, "gathered")


def _tile_gather_mask(tr: DeviceLevel, node: ast.Call) -> Var:
    name = "pl.tile.gather_mask"
    b = bind_call(tr, node, ("src", "mask_pattern", "output_dtype"), {"output_dtype": None}, name)
    return _mask(tr, _tile(tr, b["src"], name, "src", node), b["mask_pattern"], b["output_dtype"], name, node)


def _scatter(name: str) -> Rule:
    """``pl.scatter`` / ``pl.tensor.scatter``: the index form ``(input, dim, index, src)``, ``out[b, index[b, k]] =
    src[b, k]`` on a copy of ``input`` (``tile.scatter {per_row=1}``, pypto's ``tensor.scatter``), or the mask form
    ``(input, *, mask_pattern=P, dst=D)``, ``dst`` with the pattern's columns (P0101: 0, 2, 4, ...) replaced by
    ``input``'s (``tile.scatter_mask``). The two forms' keywords are not mixed (pypto's wrapper)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("input", "dim", "index", "src"),
                      {"dim": None, "index": None, "src": None, "mask_pattern": None, "dst": None}, name)
        is_index = any(b[k] is not None for k in ("dim", "index", "src"))
        is_mask = b["mask_pattern"] is not None or b["dst"] is not None
        form_error = _scatter_form_error(is_index, is_mask, b)
        if form_error:
            raise tr.error(f"pypto refuses it: {form_error}", node)
        if is_index:
            return _scatter_index(tr, b, name, node)
        pattern = b["mask_pattern"]
        if isinstance(pattern, bool) or not isinstance(pattern, int):
            raise tr.error(f"{name}: mask_pattern must be a compile-time int (pl.tile.MaskPattern.X), got "
                           f"{pattern!r}", node)
        src, dst = _tile(tr, b["input"], name, "input", node), _tile(tr, b["dst"], name, "dst", node)
        return _emit(tr, Op.TILE_SCATTER_MASK, [src, dst], {"pattern": pattern}, "scattered")

    return rule


def _scatter_form_error(is_index: bool, is_mask: bool, b: Mapping[str, Any]) -> str | None:
    """pypto's wrapper's ValueError for a call that is neither form, or both."""
    if is_index and is_mask:
        return ("scatter() index form (dim, index, src) and mask form (mask_pattern, dst) are mutually exclusive; "
                "do not mix kwargs from different forms")
    if is_mask and (b["mask_pattern"] is None or b["dst"] is None):
        return "scatter() mask form requires both mask_pattern and dst"
    if not is_index and not is_mask:
        return "scatter() requires (dim, index, src) for index form, or (mask_pattern=<int>, dst=...) for mask form"
    if is_index and any(b[k] is None for k in ("dim", "index", "src")):
        return "scatter() index form requires dim, index and src"
    return None


_INT16_FLAT_LIMIT = 32768
"""pypto's conversion builds INT16 flat indices ``row * cols + col`` for a 1- or 2-byte element: rows * cols must
stay within INT16."""


def _scatter_index(tr: DeviceLevel, b: Mapping[str, Any], name: str, node: ast.Call) -> Var:
    """The index form, checked as pypto's ``tensor.scatter`` deducer and conversion check it (their words)."""
    op = "The operator tensor.scatter"
    dim = b["dim"]
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise tr.error(f"{name}: dim must be a compile-time int, got {dim!r}", node)
    dst, src, idx = (_tile(tr, b[k], name, k, node) for k in ("input", "src", "index"))
    t = _tt(dst)
    rank = len(t.shape)
    if rank != 2:
        raise tr.error(f"pypto refuses it: {op} currently supports rank-2 input only, got rank {rank}", node)
    if (dim + rank if dim < 0 else dim) != rank - 1:
        raise tr.error(f"pypto refuses it: {op} currently supports dim=-1 (last axis) only, got dim={dim}", node)
    i = _tt(idx).dtype
    need = max(t.dtype.itemsize, 2)
    if i in (DType.INT16, DType.INT32) and i.itemsize != need:
        raise tr.error(f"pypto refuses it: {op} with input dtype {t.dtype.value} ({t.dtype.itemsize} bytes) requires "
                       f"index dtype of {need} bytes, but got {i.value} ({i.itemsize} bytes)", node)
    rows, cols = _tt(src).shape[0], t.shape[1]
    if i is DType.INT16 and rows * cols > _INT16_FLAT_LIMIT:
        raise tr.error(f"pypto refuses it: tensor.scatter with element dtype {t.dtype.value} uses INT16 flattened "
                       f"indices, but the destination is too large: rows({rows}) * cols({cols}) exceeds the INT16 "
                       f"index range (max flat index 32767, rows <= {_INT16_FLAT_LIMIT // cols}). Use a smaller "
                       "tile or split the scatter into chunks.", node)
    return _emit(tr, Op.TILE_SCATTER, [dst, src, idx], {"per_row": 1}, "scattered")


def _tile_scatter(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.scatter(dst, src, indexes)``: ``dst.flat[indexes[i, j]] = src[i, j]``, pypto's DPS form: ``dst``
    is rewritten in place and the result is it."""
    name = "pl.tile.scatter"
    b = bind_call(tr, node, ("dst", "src", "indexes"), {}, name)
    dst, src, idx = (_tile(tr, b[k], name, k, node) for k in ("dst", "src", "indexes"))
    out = _emit(tr, Op.TILE_SCATTER, [dst, src, idx], {"per_row": 0}, "scattered")
    tr.fb.pld.tile.assemble(dst, out, [0] * len(_tt(dst).shape))
    return dst


def _tile_scatter_mask(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.scatter_mask(dst, src, mask_pattern)``: pypto's DPS mask form, ``dst`` with the pattern's columns
    replaced by ``src``'s (``tile.scatter_mask``), rewritten in place; the result is it."""
    name = "pl.tile.scatter_mask"
    b = bind_call(tr, node, ("dst", "src", "mask_pattern"), {}, name)
    pattern = b["mask_pattern"]
    if isinstance(pattern, bool) or not isinstance(pattern, int):
        raise tr.error(f"{name}: mask_pattern must be a compile-time int (pl.tile.MaskPattern.X), got {pattern!r}",
                       node)
    dst, src = (_tile(tr, b[k], name, k, node) for k in ("dst", "src"))
    if _tt(dst).dtype not in SCATTER_DTYPES:
        raise tr.error(f"pypto refuses it: The operator tile.scatter_mask requires dst dtype in {{I8, I16, I32, FP16, "
                       f"FP32, BF16}}, but got {_tt(dst).dtype.name}", node)
    out = _emit(tr, Op.TILE_SCATTER_MASK, [src, dst], {"pattern": pattern}, "scattered")
    tr.fb.pld.tile.assemble(dst, out, [0] * len(_tt(dst).shape))
    return dst


SORT_OPS: Mapping[str, Rule] = MappingProxyType({
    **{f"{prefix}{op}": _arange(f"{prefix}{op}") for prefix in ("pl.", "pl.tensor.", "pl.tile.")
       for op in ("arange", "ci") if (prefix, op) != ("pl.", "ci")},
    **{f"{prefix}sort32": _sort32(f"{prefix}sort32") for prefix in ("pl.", "pl.tensor.", "pl.tile.")},
    **{f"{prefix}mrgsort": _mrgsort(f"{prefix}mrgsort") for prefix in ("pl.", "pl.tensor.", "pl.tile.")},
    "pl.gather": _gather("pl.gather"),
    "pl.tensor.gather": _gather("pl.tensor.gather"),
    "pl.tile.gather": _tile_gather,
    "pl.tile.gather_mask": _tile_gather_mask,
    "pl.scatter": _scatter("pl.scatter"),
    "pl.tensor.scatter": _scatter("pl.tensor.scatter"),
    "pl.tile.scatter": _tile_scatter,
    "pl.tile.scatter_mask": _tile_scatter_mask,
})
"""pypto's spellings of the family (``pl.ci`` is not one of them)."""

__all__ = ["SORT_OPS"]
