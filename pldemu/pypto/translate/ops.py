"""The device-level op table: ``pl.*`` / ``pld.*`` name -> the rule that emits its pldemu IR.

One immutable table (:data:`DEVICE_OPS`); each rule binds the call's arguments by pypto's signature
(:func:`~pldemu.pypto.translate.evaluator.bind_call`) and emits through the function builder, so the
IR signature checks apply. ``pld.tensor.put`` / ``get`` become ``pld.tile.put`` / ``get`` through a
``tile.create`` stage of the chunk (``chunk_rows`` x ``chunk_cols``, the whole region when 0);
``remote_store`` is a put whose source is the tile; the collectives stay composites, lowered on
the ranks by pldemu's own LowerCompositeOps.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pldemu.ir.cast_paths import cast_chain
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AtomicType, CastMode, CmpType, MemorySpace, NotifyOp, PadValue, ReduceOp, WaitCmp
from pldemu.ir.nodes import (
    NR,
    BinOp,
    BinOpKind,
    Const,
    Expr,
    ExprOps,
    ScalarType,
    TensorType,
    TileType,
    Var,
    as_expr,
    binop,
    eval_nr,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.ir.tile_signatures import accumulator_dtype, sels_scalar_dtype
from pldemu.ir.walk import walk_expr
from pldemu.npdtypes import scalar_as
from pldemu.pypto.capture import Kind
from pldemu.pypto.translate import arrays
from pldemu.pypto.translate.cube_split import CUBE_SPLIT_OPS
from pldemu.pypto.translate.evaluator import bind_call
from pldemu.pypto.translate.level import Carry, DeviceLevel, fit_to_carry, fresh_buffers
from pldemu.pypto.translate.prefetch import PREFETCH_OPS
from pldemu.pypto.translate.regions import (
    Region,
    TensorView,
    aligned_tile,
    based,
    check_bounds,
    dims,
    fixpipe,
    in_kernel,
    is_tensor,
    load_view,
    on_core,
    reshape_view,
    slice_tile,
    store_region,
    tensor_dim,
    tensor_region,
    window_valid,
)
from pldemu.pypto.translate.regions import tensor_level as tensor_on_core
from pldemu.pypto.translate.sort_ops import SORT_OPS
from pldemu.pypto.translate.statics import STATIC_OPS
from pldemu.pypto.types import PyDType, SymInt, TensorLayout

Rule = Callable[[DeviceLevel, ast.Call], Any]


def is_ir(value: Any) -> bool:
    """An IR expression (as opposed to a Python value that folds)."""
    return isinstance(value, ExprOps)


def _tensor(tr: DeviceLevel, v: Any, what: str, node: ast.AST) -> Var:
    if isinstance(v, Var) and v.name in tr.emit.tensor_slices:
        raise tr.error(f"{what} must be a tensor in DDR, got {v.name}: a tensor made in the kernel (pl.create_tensor, "
                       "pl.full, a loaded slice) is a tile on the core, as pypto's conversion makes it: read it with "
                       "a subscript or pl.slice, write it with pl.assemble", node)
    if not (isinstance(v, Var) and isinstance(v.type, TensorType)):
        raise tr.error(f"{what} must be a tensor, got {v!r}", node)
    return v


def ttype(v: Var) -> TensorType:
    """The tensor type of a Var that :func:`_tensor` accepted."""
    assert isinstance(v.type, TensorType)
    return v.type


def tltype(v: Var) -> TileType:
    """The tile type of a Var that :func:`_tile` accepted."""
    assert isinstance(v.type, TileType)
    return v.type


def _tile(tr: DeviceLevel, v: Any, what: str, node: ast.AST) -> Var:
    if not (isinstance(v, Var) and isinstance(v.type, TileType)):
        raise tr.error(f"{what} must be a tile (from pl.load / remote_load), got {v!r}", node)
    return v


def _through_view(tr: DeviceLevel, t: Any, offsets: Any, extents: Sequence[int], node: ast.AST
                  ) -> tuple[Any, list[Any]]:
    """A tensor operand that is a view (a slice passed as a tensor): its base and the offsets there, the box
    at ``offsets`` of ``extents`` checked inside the view; any other operand as it is."""
    at = _index_list(offsets)
    if not isinstance(t, TensorView):
        return t, at
    region = Region(tuple(at), (1,) * (len(at) - len(extents)) + tuple(extents))
    check_bounds(tr, t, region, node)
    base, moved = based(t, region)
    return base, list(moved.offsets)


def _stored(t: TileType) -> tuple[int, ...]:
    """The extents a store of the tile writes, as far as they are static (``tile.store`` moves only the
    valid box; a run-time valid extent counts 1: only its start is checked, as for a slice)."""
    if t.valid_shape is None:
        return t.shape
    return tuple(_reach_extent(e, v) for e, v in zip(t.shape, t.valid_shape, strict=True))


def _ints(tr: DeviceLevel, v: Any, what: str, node: ast.AST) -> list[int]:
    """Static extents: Python ints, or typed integer constants (``pl.cast(rows, pl.INT32)`` of a static dim)."""
    folded = [static_int(i) if isinstance(i, Const) else i for i in v] if isinstance(v, (list, tuple)) else []
    ints = [i for i in folded if isinstance(i, int) and not isinstance(i, bool)]
    if not isinstance(v, (list, tuple)) or len(ints) != len(folded):
        raise tr.error(f"{what} must be a list of static ints, got {v!r}", node)
    return ints


def _load(tr: DeviceLevel, node: ast.Call) -> Var:
    b = bind_call(tr, node, ("tensor", "offsets", "shapes", "valid_shape", "target_memory"),
                  {"valid_shape": None, "valid_shapes": None, "target_memory": None}, "pl.load")
    shape = _ints(tr, b["shapes"], "pl.load: shape", node)
    valid = b["valid_shape"] if b["valid_shape"] is not None else b["valid_shapes"]
    # only the valid box is read: a tile may overhang its source (pypto's ragged tail), a view's too
    reach = _reach(Region((0,) * len(shape), tuple(shape)), valid).extents
    base, offsets = _through_view(tr, b["tensor"], b["offsets"], reach, node)
    valid = window_valid(b["tensor"], _index_list(b["offsets"]), shape, valid)  # a view's valid box narrows it
    t = _tensor(tr, base, "pl.load: tensor", node)
    target = MemorySpace.Vec if b["target_memory"] is None else _space(tr, b["target_memory"], "pl.load", node)
    if target not in _LOAD_SPACES:
        raise tr.error(f"pypto refuses it: pl.load: a load from DDR reaches only Vec or Mat, got {target.name} "
                       f"(load to Mat, then pl.move to {target.name})", node)
    if target is MemorySpace.Vec:
        aligned_tile(tr, "pl.load", shape, ttype(t).dtype, node)
    tile = tr.fb.pld.tile.load(t, offsets, shape, valid, hint=tr.hint("tile"))
    # pldemu's tile.load lands in Vec; a Mat load is that tile moved (the same values: spaces are bookkeeping).
    return tile if target is MemorySpace.Vec else tr.fb.pld.tile.move(tile, target)


_LOAD_SPACES = frozenset({MemorySpace.Vec, MemorySpace.Mat})
"""Where a load from DDR may land (pypto's memory table: Left / Right / Bias only by pl.move, Acc by matmul)."""


def _space(tr: DeviceLevel, v: Any, name: str, node: ast.AST) -> MemorySpace:
    if not isinstance(v, MemorySpace):
        raise tr.error(f"{name}: target_memory must be a pl.MemorySpace (pl.Mem), got {v!r}", node)
    return v


def _store(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.store(tile, offsets, output_tensor, shapes=None, *, atomic=)`` (pypto's tile.store): ``shapes``
    is the ND partition the tile covers (pypto's FlattenTileNdTo2D injects it; here the tile's own shape,
    leading 1s aside); ``atomic=pl.AtomicType.Add`` adds into the region, in a kernel only."""
    b = bind_call(tr, node, ("tile", "offsets", "output_tensor", "shapes"),
                  {"shapes": None, "atomic": AtomicType.None_}, "pl.store")
    given = _tile(tr, b["tile"], "pl.store: tile", node)
    base, offsets = _through_view(tr, b["output_tensor"], b["offsets"], _stored(tltype(given)), node)
    t = _tensor(tr, base, "pl.store: output tensor", node)
    tile = fixpipe(tr, given, ttype(t).dtype)
    _store_shapes(tr, b["shapes"], tile, offsets, node)
    atomic = _kernel_atomic(tr, b["atomic"], "pl.store", node)
    target = t
    if len(tltype(tile).shape) == 2 and len(ttype(t).shape) == 3 and len(offsets) == 3:
        # pypto stores a rank-2 tile into the two trailing dims of a rank-3 tensor: the same cells are
        # rows o0 * Y + o1 ... of the tensor viewed as [X * Y, Z].
        x, y, z = ttype(t).shape
        target = tr.fb.pld.tensor.view(t, [x * y, z])
        offsets = [as_expr(offsets[0]) * y + offsets[1], offsets[2]]
    tr.fb.pld.tile.store(tile, offsets, target, atomic=atomic)
    return b["output_tensor"]


def _store_shapes(tr: DeviceLevel, shapes: Any, tile: Var, offsets: list[Any], node: ast.AST) -> None:
    """pypto's checks of ``shapes=`` (one extent per offset), and pldemu's: the partition is the tile's shape."""
    if shapes is None:
        return
    if not isinstance(shapes, (list, tuple)) or not shapes or len(shapes) != len(offsets):
        raise tr.error(f"pypto refuses it: tile.store requires shapes and offsets to have the same number of "
                       f"dimensions, got shapes={shapes!r} and {len(offsets)} offsets", node)
    extents = [static_int(e) if is_ir(e) else e for e in shapes]
    t = tltype(tile)
    kept = list(t.shape)
    boxes = [kept] + ([[static_int(v) if is_ir(v) else v for v in t.valid_shape]] if t.valid_shape else [])
    trimmed = extents[len(extents) - len(kept):] if len(extents) >= len(kept) else None
    if trimmed not in boxes or any(e != 1 for e in extents[:len(extents) - len(kept)]):
        raise tr.error(f"pl.store: shapes={list(shapes)} is neither the tile's shape {kept} nor its valid box: "
                       "pldemu stores a tile into the partition of its own shape", node)


def _kernel_atomic(tr: DeviceLevel, value: Any, name: str, node: ast.AST) -> AtomicType:
    """``atomic=``: pypto's split-K combine, only in a kernel (a core's store into global memory)."""
    atomic = AtomicType(value)
    if atomic is not AtomicType.None_ and not in_kernel(tr):
        raise tr.error(f"{name}: atomic=pl.AtomicType.Add outside a kernel: pypto has no atomic combine at the "
                       "orchestration level (put it in a pl.at(level=pl.Level.CORE_GROUP) or pl.spmd task)", node)
    return atomic


_UNIFIED_SCALAR: Mapping[str, type[ast.operator]] = MappingProxyType({
    "pl.add": ast.Add, "pl.sub": ast.Sub, "pl.mul": ast.Mult, "pl.div": ast.Div})
"""pypto's unified ops on two scalars (unified_ops.py: ``Scalar(lhs op rhs)``): the scalar operator."""


def _scalar_like(v: Any) -> bool:
    """A Python number or a scalar IR value (pypto's ``_is_scalar_like``)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    return is_ir(v) and isinstance(as_expr(v).type, ScalarType)


def _binary(tile_op: Op, scalar_op: Op | None, name: str, negate: bool = False,
            high_precision: bool = False, scratch: bool = False) -> Rule:
    """``pl.<op>`` / ``pl.tensor.<op>`` on tiles or tensors (pypto's unified op dispatches on the operand:
    a tensor is loaded whole, as ConvertTensorToTileOps keeps the value on core). A scalar right operand
    goes to ``scalar_op``, negated first when ``negate`` (``x - s`` is ``x + -s``). ``high_precision``:
    the op takes pypto's keyword (float operands only, as pypto checks; the numerics are the same).
    ``scratch``: the op takes pypto's ``tmp`` (xor / xors), required of a tile, refused with a tensor."""
    options: dict[str, Any] = {"high_precision": False} if high_precision else {}
    if scratch:
        options["tmp"] = None

    scalar_operator = _UNIFIED_SCALAR.get(name)

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        bound = bind_call(tr, node, ("lhs", "rhs", *options), options, name)
        if scalar_operator is not None and _scalar_like(bound["lhs"]) and _scalar_like(bound["rhs"]):
            if bound.get("high_precision"):
                raise tr.error(f"pypto refuses it: {name}: high_precision is only supported for Tensor or Tile "
                               "division", node)
            return tr.binary(scalar_operator(), bound["lhs"], bound["rhs"], node)
        was_tensor = tensor_on_core(tr, bound["lhs"])
        tmp = _xor_scratch(tr, bound.pop("tmp", None), was_tensor, scratch, name, node)
        b = {k: on_core(tr, v, node, name) for k, v in bound.items()}
        lhs = b["lhs"]
        if not (isinstance(lhs, Var) and isinstance(lhs.type, TileType)):
            raise tr.error(f"{name}: lhs must be a tile or a tensor, got {lhs!r}", node)
        if b.get("high_precision") and not lhs.type.dtype.is_float:
            raise tr.error(f"pypto refuses it: {name} supports high_precision only for FP16 or FP32", node)
        rhs = b["rhs"]
        if isinstance(rhs, Var) and isinstance(rhs.type, TileType):
            expand = _row_broadcast(tr, tile_op, lhs, rhs, name, node)
            if expand is not None:
                if b.get("high_precision"):
                    raise tr.error("pypto refuses it: tensor.div(high_precision=True) does not support row "
                                   "broadcasting: the PTO high-precision row-expand division form requires an "
                                   "explicit tmp tile", node)
                return tr.fb.pld.tile.expand(expand, lhs, rhs, hint=tr.hint("acc"))
            if tmp is None:
                return tr.fb.pld.tile.binary(tile_op, lhs, rhs, hint=tr.hint("acc"))
            out = tr.fb.op(tile_op, [lhs, rhs, tmp], hint=tr.hint("acc"))
            assert out is not None
            return out
        if b.get("high_precision"):
            raise tr.error("pypto refuses it: tensor.div(high_precision=True) requires a Tensor rhs" if was_tensor
                           else f"pypto refuses it: {name}: high_precision requires a Tile rhs", node)
        if scalar_op is None:
            raise tr.error(f"{name}: rhs must be a tile", node)
        if negate:
            rhs = as_expr(0) - rhs if is_ir(rhs) else -rhs
        out = tr.fb.op(scalar_op, [lhs, as_expr(rhs), *([] if tmp is None else [tmp])], hint=tr.hint("acc"))
        assert out is not None
        return out

    return rule


def _xor_scratch(tr: DeviceLevel, tmp: Any, was_tensor: bool, scratch: bool, name: str,
                 node: ast.AST) -> Var | None:
    """pypto's ``tmp`` of xor / xors: a tile call must pass it, a tensor call must not (its conversion makes
    one); pldemu's result does not depend on it."""
    if not scratch:
        return None
    if was_tensor:
        if tmp is not None:
            raise tr.error(f"pypto refuses it: {name}: tmp is only for a Tile operand (the tensor path's "
                           "conversion allocates the scratch)", node)
        return None
    if tmp is None:
        raise tr.error(f"pypto refuses it: {name} of a tile needs tmp (a scratch tile like the input)", node)
    return _tile(tr, tmp, f"{name}: tmp", node)


def _expands(name: str, src: str) -> Rule:
    """``pl.expands(target, scalar)``: ``target``'s shape filled with ``scalar`` (``target`` is not read)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "scalar"), {}, name)
        target = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        out = tr.fb.op(Op.TILE_EXPANDS, [target, as_expr(b["scalar"])], hint=tr.hint("full"))
        assert out is not None
        return out

    return rule


def _elementwise_ops() -> dict[str, Rule]:
    """pypto's relu, fmod and the bitwise ops and shifts in their unified, tensor and tile spellings (pypto's
    ``and_`` / ``or_`` / ``not_`` keep Python's trailing underscore; the IR ops are ``tile.and`` ...)."""
    out: dict[str, Rule] = {f"pl.{p}relu": _unary(Op.TILE_RELU, f"pl.{p}relu", "tile") for p in ("", "tile.")}
    for prefix, src in (("pl.", "input"), ("pl.tensor.", "input"), ("pl.tile.", "tile")):
        out[f"{prefix}not_"] = _unary(Op.TILE_NOT, f"{prefix}not_", src)
        out[f"{prefix}expands"] = _expands(f"{prefix}expands", "target")
        for stem, op in (("fmod", "fmod"), ("and_", "and"), ("or_", "or"), ("xor", "xor"), ("shl", "shl"),
                         ("shr", "shr")):
            tile_op, scalar_op, scratch = Op(f"tile.{op}"), Op(f"tile.{op}s"), op == "xor"
            out[f"{prefix}{stem}"] = _binary(tile_op, scalar_op, f"{prefix}{stem}", scratch=scratch)
            out[f"{prefix}{op}s"] = _binary(scalar_op, scalar_op, f"{prefix}{op}s", scratch=scratch)
    return out


_ROW_BROADCAST: Mapping[Op, Op] = MappingProxyType({
    Op.TILE_ADD: Op.TILE_ROW_EXPAND_ADD, Op.TILE_SUB: Op.TILE_ROW_EXPAND_SUB,
    Op.TILE_MUL: Op.TILE_ROW_EXPAND_MUL, Op.TILE_DIV: Op.TILE_ROW_EXPAND_DIV,
})
"""pypto's conversion of a broadcasting ``[M, N] op [M, 1]`` (ConvertTensorToTileOps)."""


def _row_broadcast(tr: DeviceLevel, tile_op: Op, lhs: Var, rhs: Var, name: str, node: ast.AST) -> Op | None:
    """The row-expand op ``lhs op rhs`` becomes when one operand is ``[M, 1]`` and the other ``[M, N]``;
    None for equal shapes. pypto's conversion puts the wider operand first whatever the source order
    (so ``sub([M, 1], [M, N])`` computes ``[M, N] - [M, 1]``): pldemu refuses that order instead."""
    a, b = tltype(lhs).shape, tltype(rhs).shape
    if a == b or tile_op not in _ROW_BROADCAST or len(a) != 2 or len(b) != 2:
        return None
    if b == (a[0], 1):
        return _ROW_BROADCAST[tile_op]
    if a == (b[0], 1):
        raise tr.error(f"{name}: the [M, 1] operand comes first: pypto's conversion swaps the operands (it emits "
                       f"row_expand with the [M, N] one first, so a sub or div would compute the reverse); write "
                       f"the [M, N] operand first", node)
    return None


_HIGH_PRECISION_DTYPES = frozenset({DType.FP16, DType.FP32})


def _unary(op: Op, name: str, src: str, options: Mapping[str, Any] = MappingProxyType({}),
           to_fp32: bool = False) -> Rule:
    """``pl.<op>(input)`` / ``pl.tile.<op>(tile)`` / ``pl.tensor.<op>(input)`` (pypto's unary math): a tensor
    is loaded whole; an integer tensor goes to FP32 first when ``to_fp32`` (pypto's tensor deducers of exp,
    recip, sqrt, rsqrt). ``options``: pypto's keywords: ``high_precision`` (checked as pypto does, then
    the same numerics) and, for ``pl.tile.rsqrt``, the ``tmp`` scratch."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, *options), dict(options), name)
        was_tensor = tensor_on_core(tr, b[src])
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        if was_tensor and to_fp32 and tltype(tile).dtype.is_int:
            tile = tr.fb.pld.tile.cast(tile, DType.FP32, hint=tr.hint("cast"), mode=CastMode.ROUND)
        if b.get("high_precision"):
            _check_high_precision(tr, name, tltype(tile), was_tensor, op, node)
        tmp = b.get("tmp")
        if op is Op.TILE_RSQRT and was_tensor and b.get("high_precision"):
            # pypto's conversion synthesises the scratch of the high-precision path (same numerics here).
            tmp = tr.fb.pld.tile.create(list(tltype(tile).shape), tltype(tile).dtype, hint="tmp")
        if tmp is not None:
            tmp = _tile(tr, tmp, f"{name}: tmp", node)
        return tr.fb.pld.tile.unary(op, tile, tmp, hint=tr.hint(op.text.rsplit(".", 1)[1]))

    return rule


def _check_high_precision(tr: DeviceLevel, name: str, t: TileType, was_tensor: bool, op: Op,
                          node: ast.AST) -> None:
    if op is Op.TILE_RSQRT and not was_tensor:
        raise tr.error(f"pypto refuses it: {name}: 'high_precision' is not supported for Tile operands. The tile "
                       "form selects precision by taking a scratch tile: pl.tile.rsqrt(tile, tmp).", node)
    if t.dtype not in _HIGH_PRECISION_DTYPES:
        raise tr.error(f"pypto refuses it: {name} supports high_precision only for FP16 or FP32, got "
                       f"{t.dtype.value.upper()}", node)


def _reduce(op: Op, name: str, src: str, tmp: bool, tile_needs_tmp: bool) -> Rule:
    """``pl.row_sum(input, tmp_tile=None)`` and the other reductions (``tmp``: the op takes pypto's scratch).
    A tile without a scratch where pypto requires one is refused; a tensor gets the scratch pypto's
    conversion synthesises for its row reductions (so its sums are binary trees, as on the device)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "tmp_tile") if tmp else (src,), {"tmp_tile": None} if tmp else {}, name)
        was_tensor = tensor_on_core(tr, b[src])
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        scratch = b.get("tmp_tile")
        if scratch is None and tile_needs_tmp:
            if not was_tensor:
                raise tr.error(f"pypto refuses it: {name} of a tile needs tmp_tile (a scratch tile like the input)",
                               node)
            scratch = tr.fb.pld.tile.create(list(tltype(tile).shape), tltype(tile).dtype, hint="tmp")
        if scratch is not None:
            scratch = _tile(tr, scratch, f"{name}: tmp_tile", node)
        return tr.fb.pld.tile.reduce(op, tile, scratch, hint=tr.hint(op.text.rsplit(".", 1)[1]))

    return rule


def _expand(op: Op, name: str, params: tuple[str, str], options: Mapping[str, Any] = MappingProxyType({})) -> Rule:
    """``pl.row_expand_mul(lhs, rhs)`` and the other expands (``tmp`` of row_expand_add is accepted: the
    same result here)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (*params, *options), dict(options), name)
        x, v = (_tile(tr, on_core(tr, b[p], node, name), f"{name}: {p}", node) for p in params)
        return tr.fb.pld.tile.expand(op, x, v, hint=tr.hint("exp"))

    return rule


def _reduce_ops() -> dict[str, Rule]:
    """pypto's spellings of the reductions: ``pl.X(input, tmp_tile=)``, ``pl.tensor.X(input)`` (no scratch:
    pypto's conversion synthesises it) and ``pl.tile.X(tile, tmp_tile)``."""
    out: dict[str, Rule] = {}
    for side in ("row", "col"):
        for kind in ("sum", "max", "min"):
            op = Op(f"tile.{side}_{kind}")
            tmp = side == "row" or kind == "sum"
            for prefix, src, takes_tmp in (("pl.", "input", tmp), ("pl.tensor.", "input", False),
                                           ("pl.tile.", "tile", tmp)):
                out[f"{prefix}{side}_{kind}"] = _reduce(op, f"{prefix}{side}_{kind}", src, takes_tmp,
                                                        tile_needs_tmp=side == "row")
    # INT32 indices and row_prod: a tile call must pass the scratch, as for the row reductions; col_prod takes none
    for stem in ("row_argmax", "row_argmin", "col_argmax", "col_argmin", "row_prod", "col_prod"):
        tmp = stem != "col_prod"
        for prefix, src, takes_tmp in (("pl.", "input", tmp), ("pl.tensor.", "input", False),
                                       ("pl.tile.", "tile", tmp)):
            out[f"{prefix}{stem}"] = _reduce(Op(f"tile.{stem}"), f"{prefix}{stem}", src, takes_tmp, tile_needs_tmp=tmp)
    return out


def _expand_ops() -> dict[str, Rule]:
    """pypto's spellings of the expands: unified and tensor ``(lhs, rhs)``; tile ``(tile, row_vec)`` /
    ``(target, row_vec)`` and the ``col_vec`` forms."""
    out: dict[str, Rule] = {}
    for side in ("row", "col"):
        for suffix in ("", "_add", "_sub", "_mul", "_div", "_max", "_min", "_expdif"):
            stem = f"{side}_expand{suffix}"
            op = Op(f"tile.{stem}")
            opts = {"tmp": None} if stem == "row_expand_add" else {}
            for prefix in ("pl.", "pl.tensor."):
                out[prefix + stem] = _expand(op, prefix + stem, ("lhs", "rhs"), opts)
            first = "target" if not suffix else "tile"
            out["pl.tile." + stem] = _expand(op, "pl.tile." + stem, (first, f"{side}_vec"), opts)
    return out


def _full(name: str) -> Rule:
    """``pl.full(shape, dtype, value)`` / ``pl.tile.full`` in a kernel: ``tile.full`` (pypto's conversion of
    ``tensor.full``), fully valid; ``value`` must be a constant, as pypto's deducer requires."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("shape", "dtype", "value"), {}, name)
        shape = _ints(tr, b["shape"], f"{name}: shape", node)
        dtype, value = b["dtype"], b["value"]
        if not isinstance(dtype, PyDType):
            raise tr.error(f"{name}(shape, dtype, value): dtype must be a pl dtype, got {dtype!r}", node)
        value = value.value if isinstance(value, Const) else value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise tr.error(f"pypto refuses it: {name}: value must be a constant int or float (a literal, a closure "
                           f"number, pl.const), got {value!r}", node)
        if dtype.ir.is_int and not float(value).is_integer():
            raise tr.error(f"{name}: {value!r} is not a value of the integer type {dtype.ir.value}", node)
        if any(d <= 0 for d in shape):
            raise tr.error(f"pypto refuses it: {name}: shape must be static and positive, got {shape}", node)
        fill = int(value) if dtype.ir.is_int else float(value)
        tile = tr.fb.pld.tile.full(shape, Const(fill, dtype.ir), dtype.ir, hint=tr.hint("full"))
        if not name.startswith("pl.tile."):
            tr.emit.tensor_slices.add(tile.name)  # pypto's pl.full is tensor.full: a tensor to its dispatch
        return tile

    return rule


def _move(name: str, src: str) -> Rule:
    """``pl.move(tile, target_memory, blayout=None, slayout=None)``: ``tile.move`` (the layouts are pypto's
    boxing, not values: pldemu keeps row-major tiles and takes only the default)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "target_memory"), {"blayout": None, "slayout": None}, name)
        tile = _tile(tr, b[src], f"{name}: {src}", node)
        if b["blayout"] is not None or b["slayout"] is not None:
            raise tr.error(f"{name}: blayout= / slayout= are not supported by pldemu (its tiles are row-major)", node)
        return tr.fb.pld.tile.move(tile, _space(tr, b["target_memory"], name, node), hint=tr.hint(tile.name))

    return rule


def _in_space(tr: DeviceLevel, tile: Var, space: MemorySpace) -> Var:
    """``tile`` in ``space``: the ``tile.move`` pypto's InferTileMemorySpace inserts where a program did not."""
    return tile if tltype(tile).memory is space else tr.fb.pld.tile.move(tile, space, hint=f"{tile.name}_{space.name}")


def _transposed(tr: DeviceLevel, tile: Var, trans: Any, what: str, node: ast.AST) -> Var:
    """A tensor-level ``a_trans`` / ``b_trans``: the operand's two trailing axes swapped."""
    if not trans:
        return tile
    rank = len(tltype(tile).shape)
    if rank < 2:
        raise tr.error(f"pypto refuses it: {what}: a transpose needs an operand of rank >= 2", node)
    return tr.fb.pld.tile.transpose(tile, rank - 2, rank - 1, hint=f"{tile.name}_t")


def _transpose_view(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.transpose_view(tile)``: pypto's zero-copy NZ <-> ZN reinterpretation of a (Mat) tile, whose
    values are the tile with its two trailing axes swapped: a ``tile.transpose`` here (the same values;
    pldemu holds tiles row-major, so the view is a copy)."""
    b = bind_call(tr, node, ("tile",), {}, "pl.tile.transpose_view")
    tile = _tile(tr, b["tile"], "pl.tile.transpose_view: tile", node)
    return _transposed(tr, tile, True, "pl.tile.transpose_view", node)


_CMP_RHS = {"pl.tile.cmp": "a tile", "pl.tile.cmps": "a scalar", "pl.cmps": "a scalar"}
"""pypto's tile-level spellings take one kind of rhs each (``tile_ops.cmp`` / ``cmps``; ``pl.cmps`` is
``tile_ops.cmps``)."""


def _cmp(name: str) -> Rule:
    """``pl.cmp(lhs, rhs, cmp_type=0)`` (0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge): of tiles, ``tile.cmp`` /
    ``tile.cmps`` (a scalar rhs), the packed predicate mask; of a tensor (or a tensor-level tile), pypto's
    CmpConv: that mask selecting 1 or 0 (``tile.sel`` of two fills), a 0 / 1 tile in lhs's dtype."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("lhs", "rhs", "cmp_type"), {"cmp_type": 0}, name)
        tensor_form = tensor_on_core(tr, b["lhs"]) and not name.startswith("pl.tile.") and name not in _CMP_RHS
        lhs = _tile(tr, on_core(tr, b["lhs"], node, name), f"{name}: lhs", node)
        rhs = on_core(tr, b["rhs"], node, name)
        kind = CmpType(int(b["cmp_type"]))
        t = tltype(lhs)
        tile_rhs = isinstance(rhs, Var) and isinstance(rhs.type, TileType)
        if name in _CMP_RHS and tile_rhs != (name == "pl.tile.cmp"):
            raise tr.error(f"pypto refuses it: {name}: rhs must be {_CMP_RHS[name]}, got {rhs!r}", node)
        if tile_rhs:
            mask = tr.fb.pld.tile.cmp(lhs, rhs, kind, hint=tr.hint("mask"))
        else:
            mask = tr.fb.pld.tile.cmps(lhs, _typed(rhs, t.dtype), kind, hint=tr.hint("mask"))
        if not tensor_form:
            return mask
        one = tr.fb.pld.tile.full(list(t.shape), 1, t.dtype, hint=tr.hint("cmp_one"))
        zero = tr.fb.pld.tile.full(list(t.shape), 0, t.dtype, hint=tr.hint("cmp_zero"))
        scratch = tr.fb.pld.tile.create([1, 32], DType.UINT8, hint=tr.hint("cmp_tmp"))
        return tr.fb.pld.tile.sel(mask, one, zero, scratch, hint=tr.hint("cmp"))

    return rule


def _sel(name: str) -> Rule:
    """``pl.tile.sel(mask, lhs, rhs, tmp)`` (pypto's ``pl.sel`` is the same function): ``lhs`` where the predicate
    mask (``pl.tile.cmp`` / ``cmps``) holds, else ``rhs`` (pypto's TSEL; ``tmp`` its scratch, UINT8 [1, 32] on
    A2/A3)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("mask", "lhs", "rhs", "tmp"), {}, name)
        mask, lhs, rhs, tmp = (_tile(tr, b[k], f"{name}: {k}", node) for k in ("mask", "lhs", "rhs", "tmp"))
        return tr.fb.pld.tile.sel(mask, lhs, rhs, tmp, hint=tr.hint("sel"))

    return rule


def _sels(name: str) -> Rule:
    """``pl.tile.sels(mask, src, tmp, scalar)`` (pypto's ``pl.sels`` is the same function): ``src`` where the
    predicate mask holds, else the scalar (TSELS; ``tmp`` its scratch)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("mask", "src", "tmp", "scalar"), {}, name)
        mask, src, tmp = (_tile(tr, b[k], f"{name}: {k}", node) for k in ("mask", "src", "tmp"))
        scalar = _sels_scalar(tr, b["scalar"], tltype(src).dtype, name, node)
        return tr.fb.pld.tile.sels(mask, src, tmp, scalar, hint=tr.hint("sel"))

    return rule


def _sels_scalar(tr: DeviceLevel, value: Any, src: DType, name: str, node: ast.AST) -> Any:
    """pypto's _normalize_sels_scalar_operand: a literal or constant takes the source's dtype, an unsigned
    source's same-width signed dtype with its bits kept (65535 is INT16 -1 for a UINT16 source); a run-time
    scalar passes as it is (the deducer wants that dtype)."""
    if isinstance(value, Const):
        value = value.value
    if is_ir(value):
        return value
    dtype = sels_scalar_dtype(src)
    if not dtype.is_int:
        return Const(float(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise tr.error(f"pypto refuses it: {name}: Cannot retype non-integral floating-point constant {value} to "
                       f"integer dtype {src.value.upper()}; use an integral value or an explicit cast", node)
    bits = 8 * dtype.itemsize
    v = int(value)
    return Const(v - (1 << bits) if dtype is not src and v >= 1 << (bits - 1) else v, dtype)


def _partial_combine(op: Op, name: str, params: tuple[str, str]) -> Rule:
    """``pl.part_add(lhs, rhs)`` and the other partial combines (``pl.tensor.*``; ``pl.tile.*(src0, src1)``): a
    tensor is loaded whole, as pypto converts ``tensor.part_*`` 1:1 to ``tile.part_*``."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, params, {}, name)
        lhs, rhs = (_tile(tr, on_core(tr, b[p], node, name), f"{name}: {p}", node) for p in params)
        return tr.fb.pld.tile.binary(op, lhs, rhs, hint=tr.hint(op.text[5:]))

    return rule


def _scalar_operand(value: Any, dtype: DType) -> Any:
    """pypto's _normalize_scalar_operand: a literal takes the tile's dtype, except a float literal paired with
    an integer tile, which stays FP32; an IR scalar passes as it is."""
    if isinstance(value, Const):
        value = value.value
    if isinstance(value, float) and dtype.is_int:
        return Const(value, DType.FP32)
    return _typed(value, dtype)


def _rem(name: str, scalar: bool) -> Rule:
    """``pl.tile.rem(lhs, rhs, tmp)`` / ``pl.tile.rems(lhs, rhs, tmp)`` (pypto's ``pl.rem`` / ``pl.rems`` are the
    same functions): TREM / TREMS, the floored remainder; each spelling takes its own kind of rhs, as pypto's."""
    op = Op.TILE_REMS if scalar else Op.TILE_REM

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("lhs", "rhs", "tmp"), {}, name)
        lhs, tmp = (_tile(tr, b[k], f"{name}: {k}", node) for k in ("lhs", "tmp"))
        rhs = b["rhs"]
        if (isinstance(rhs, Var) and isinstance(rhs.type, TileType)) == scalar:
            want = "a scalar (pl.tile.rem takes a tile)" if scalar else "a tile (pl.tile.rems takes a scalar)"
            raise tr.error(f"pypto refuses it: {name}: rhs must be {want}, got {rhs!r}", node)
        if scalar:
            rhs = _scalar_operand(rhs, tltype(lhs).dtype)
        out = tr.fb.op(op, [lhs, rhs, tmp], hint=tr.hint("rem"))
        assert out is not None
        return out

    return rule


def _prelu(name: str) -> Rule:
    """``pl.tile.prelu(tile, slope, tmp)`` (and pypto's ``pl.prelu``): TPRELU, ``x > 0 ? x : x * slope``."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("tile", "slope", "tmp"), {}, name)
        tile, slope, tmp = (_tile(tr, b[k], f"{name}: {k}", node) for k in ("tile", "slope", "tmp"))
        out = tr.fb.op(Op.TILE_PRELU, [tile, slope, tmp], hint=tr.hint("prelu"))
        assert out is not None
        return out

    return rule


def _lrelu(name: str) -> Rule:
    """``pl.tile.lrelu(tile, slope)`` (and pypto's ``pl.lrelu``): TLRELU with a scalar slope. pypto makes a literal
    slope an FP32 constant (its coefficient, not a tile element), which TLRELU converts to the tile's dtype."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("tile", "slope"), {}, name)
        tile = _tile(tr, b["tile"], f"{name}: tile", node)
        slope = b["slope"]
        if isinstance(slope, Var) and isinstance(slope.type, TileType):
            raise tr.error(f"pypto refuses it: {name}: slope must be a scalar (pl.tile.prelu takes a slope tile)",
                           node)
        if isinstance(slope, (int, float)) and not isinstance(slope, bool):
            slope = Const(float(scalar_as(DType.FP32.np, slope)), DType.FP32)
        out = tr.fb.op(Op.TILE_LRELU, [tile, as_expr(slope)], hint=tr.hint("lrelu"))
        assert out is not None
        return out

    return rule


def _scalar_rhs(op: Op, name: str) -> Rule:
    """``pl.maximums(lhs, rhs)`` / ``pl.minimums`` (pypto's tile functions, also ``pl.tile.*``): a tile and a scalar;
    a tensor (pypto's deducer wants a TileType) or a tile rhs (``pl.maximum`` takes one) refused."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("lhs", "rhs"), {}, name)
        if tensor_on_core(tr, b["lhs"]):
            raise tr.error(f"pypto refuses it: {name} takes a tile (its tile function's deducer wants a TileType); "
                           f"pl.{name.rsplit('.', 1)[1][:-1]} takes a tensor", node)
        lhs = _tile(tr, b["lhs"], f"{name}: lhs", node)
        if isinstance(b["rhs"], Var) and isinstance(b["rhs"].type, TileType):
            raise tr.error(f"pypto refuses it: {name}: rhs must be a scalar (pl.{name.rsplit('.', 1)[1][:-1]} takes "
                           "a tile)", node)
        out = tr.fb.op(op, [lhs, as_expr(b["rhs"])], hint=tr.hint("acc"))
        assert out is not None
        return out

    return rule


def _addc(name: str, scalar: bool) -> Rule:
    """``pl.addc(lhs, rhs, rhs2)`` / ``pl.addsc(lhs, rhs, rhs2)`` (pypto's tile functions, also ``pl.tile.*``):
    TADDC / TADDSC, ``(lhs + rhs) + rhs2``; addsc's scalar typed as pypto's _normalize_scalar_operand types it."""
    op = Op.TILE_ADDSC if scalar else Op.TILE_ADDC

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("lhs", "rhs", "rhs2"), {}, name)
        lhs, rhs2 = (_tile(tr, b[k], f"{name}: {k}", node) for k in ("lhs", "rhs2"))
        rhs = b["rhs"]
        if (isinstance(rhs, Var) and isinstance(rhs.type, TileType)) == scalar:
            want = "a scalar (pl.addc takes a tile)" if scalar else "a tile (pl.addsc takes a scalar)"
            raise tr.error(f"pypto refuses it: {name}: rhs must be {want}, got {rhs!r}", node)
        rhs = _scalar_operand(rhs, tltype(lhs).dtype) if scalar else rhs
        out = tr.fb.op(op, [lhs, rhs, rhs2], hint=tr.hint("acc"))
        assert out is not None
        return out

    return rule


def _tri(name: str) -> Rule:
    """``pl.tri(diagonal, shape, valid_shape=None, dtype=pl.INT32, upper=False)`` (also ``pl.tile.tri``): TTRI's
    0 / 1 triangle; a literal diagonal is an INT32 constant, as pypto's builder makes it."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("diagonal", "shape", "valid_shape", "dtype", "upper"),
                      {"valid_shape": None, "dtype": None, "upper": False}, name)
        diagonal = b["diagonal"]
        if isinstance(diagonal, Const) and diagonal.type.dtype.is_int:
            diagonal = diagonal.value
        if isinstance(diagonal, int) and not isinstance(diagonal, bool):
            diagonal = Const(diagonal, DType.INT32)
        dtype = DType.INT32 if b["dtype"] is None else _dtype_arg(tr, b["dtype"], name, node)
        args: list[Any] = [diagonal, _ints(tr, b["shape"], f"{name}: shape", node)]
        if b["valid_shape"] is not None:
            args.append(_ints(tr, b["valid_shape"], f"{name}: valid_shape", node))
        out = tr.fb.op(Op.TILE_TRI, args, {"dtype": dtype, "upper": int(bool(b["upper"]))}, hint=tr.hint("tri"))
        assert out is not None
        return out

    return rule


_PHASE_DEFAULT = {"acc_phase": "unspecified"}


def _cube_bias(op: Op, name: str) -> Rule:
    """``pl.matmul_bias(lhs, rhs, bias)``, ``pl.gemv(lhs, rhs, acc_phase=)``, ``pl.gemv_acc(acc, lhs, rhs,
    acc_phase=)``, ``pl.gemv_bias(lhs, rhs, bias, acc_phase=)`` (pypto's tile functions, also ``pl.tile.*``): the
    operands moved to their spaces (lhs Left, rhs Right, bias Bias, acc Acc), as pypto's InferTileMemorySpace
    moves them."""
    spaces = {"acc": MemorySpace.Acc, "lhs": MemorySpace.Left, "rhs": MemorySpace.Right, "bias": MemorySpace.Bias}
    params = {Op.TILE_MATMUL_BIAS: ("lhs", "rhs", "bias"), Op.TILE_GEMV: ("lhs", "rhs"),
              Op.TILE_GEMV_ACC: ("acc", "lhs", "rhs"), Op.TILE_GEMV_BIAS: ("lhs", "rhs", "bias")}[op]
    phased = op is not Op.TILE_MATMUL_BIAS

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, params, dict(_PHASE_DEFAULT) if phased else {}, name)
        args = [_in_space(tr, _tile(tr, b[p], f"{name}: {p}", node), spaces[p]) for p in params]
        attrs: dict[str, Any] = {"acc_phase": str(b["acc_phase"])} if phased else {}
        out = tr.fb.op(op, args, attrs, hint=tr.hint("mm"))
        assert out is not None
        return out

    return rule


def _fused_ops() -> dict[str, Rule]:
    """pypto's tile functions it also exports as ``pl.X`` (maximums, minimums, addc, addsc, tri, matmul_bias, the
    GEMV forms) in their ``pl.`` and ``pl.tile.`` spellings; sin / cos (FP32 only) and fillpad_expand in all three."""
    out: dict[str, Rule] = {}
    for prefix in ("pl.", "pl.tile."):
        out[f"{prefix}maximums"] = _scalar_rhs(Op.TILE_MAXIMUMS, f"{prefix}maximums")
        out[f"{prefix}minimums"] = _scalar_rhs(Op.TILE_MINIMUMS, f"{prefix}minimums")
        out[f"{prefix}addc"], out[f"{prefix}addsc"] = _addc(f"{prefix}addc", False), _addc(f"{prefix}addsc", True)
        out[f"{prefix}tri"] = _tri(f"{prefix}tri")
        for stem, op in (("matmul_bias", Op.TILE_MATMUL_BIAS), ("gemv", Op.TILE_GEMV), ("gemv_acc", Op.TILE_GEMV_ACC),
                         ("gemv_bias", Op.TILE_GEMV_BIAS)):
            out[f"{prefix}{stem}"] = _cube_bias(op, f"{prefix}{stem}")
    for prefix, src in (("pl.", "input"), ("pl.tensor.", "input"), ("pl.tile.", "tile")):
        out[f"{prefix}sin"] = _unary(Op.TILE_SIN, f"{prefix}sin", src)
        out[f"{prefix}cos"] = _unary(Op.TILE_COS, f"{prefix}cos", src)
        first = {"pl.": "value", "pl.tensor.": "tensor"}.get(prefix, src)
        out[f"{prefix}fillpad_expand"] = _fillpad_expand(f"{prefix}fillpad_expand", first)
    return out


def _partial_rem_ops() -> dict[str, Rule]:
    """pypto's partial combines in their three spellings; rem, rems, prelu, lrelu and sels, which pypto has as
    tile functions exported under ``pl.`` and ``pl.tile.``."""
    out: dict[str, Rule] = {}
    spellings = (("pl.", ("lhs", "rhs")), ("pl.tensor.", ("lhs", "rhs")), ("pl.tile.", ("src0", "src1")))
    for kind in ("add", "mul", "max", "min"):
        for prefix, params in spellings:
            out[f"{prefix}part_{kind}"] = _partial_combine(Op(f"tile.part_{kind}"), f"{prefix}part_{kind}", params)
    for prefix in ("pl.", "pl.tile."):
        out[f"{prefix}rem"], out[f"{prefix}rems"] = _rem(f"{prefix}rem", False), _rem(f"{prefix}rems", True)
        out[f"{prefix}prelu"], out[f"{prefix}lrelu"] = _prelu(f"{prefix}prelu"), _lrelu(f"{prefix}lrelu")
        out[f"{prefix}sels"] = _sels(f"{prefix}sels")
    return out


def _cube_operands(tr: DeviceLevel, b: Mapping[str, Any], name: str, node: ast.AST) -> tuple[Var, Var, bool]:
    """The lhs and rhs tiles of a matmul (tensors loaded whole, transposed as asked), in Left and Right, and
    whether the call is tensor-level (pypto's dispatch: a tensor operand makes it ``tensor.matmul``)."""
    tensor_level = any(tensor_on_core(tr, b[p]) for p in ("lhs", "rhs"))
    lhs, rhs = (_tile(tr, on_core(tr, b[p], node, name), f"{name}: {p}", node) for p in ("lhs", "rhs"))
    if not tensor_level and (b.get("a_trans") or b.get("b_trans") or b.get("c_matrix_nz")):
        raise tr.error(f"pypto refuses it: {name}: a_trans / b_trans / c_matrix_nz are Tensor-only (on tiles, "
                       "transpose the operand first)", node)
    if tensor_level and min(len(tltype(lhs).shape), len(tltype(rhs).shape)) < 2:
        raise tr.error(f"{name}: pldemu multiplies operands of rank >= 2 (a vector: reshape it to [1, K] / "
                       "[K, 1] first)", node)
    lhs = _transposed(tr, lhs, b.get("a_trans"), name, node)
    rhs = _transposed(tr, rhs, b.get("b_trans"), name, node)
    if tltype(lhs).dtype is not tltype(rhs).dtype:
        raise tr.error(f"pypto refuses it: {name} requires identical lhs and rhs data types, but got "
                       f"{tltype(lhs).dtype.value} and {tltype(rhs).dtype.value} (pl.cast one first)", node)
    return _in_space(tr, lhs, MemorySpace.Left), _in_space(tr, rhs, MemorySpace.Right), tensor_level


def _out_dtype(tr: DeviceLevel, v: Any, name: str, node: ast.AST) -> DType | None:
    if v is None:
        return None
    if isinstance(v, PyDType):
        return v.ir
    raise tr.error(f"{name}: out_dtype must be a pl dtype, got {v!r}", node)


def _matmul(name: str) -> Rule:
    """``pl.matmul(lhs, rhs, out_dtype=None, a_trans=False, b_trans=False, c_matrix_nz=False)``: ``tile.matmul``
    (``tile.batch_matmul`` when an operand has rank >= 3), Left x Right -> Acc in the accumulator dtype. On
    tiles ``out_dtype`` must be that dtype (pypto's check); on tensors pypto's conversion drops it, so the
    value is the accumulator tile either way (stored into a narrower tensor, it is converted then)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("lhs", "rhs", "out_dtype", "a_trans", "b_trans", "c_matrix_nz"),
                      {"out_dtype": None, "a_trans": False, "b_trans": False, "c_matrix_nz": False}, name)
        lhs, rhs, tensor_level = _cube_operands(tr, b, name, node)
        acc = accumulator_dtype(tltype(lhs).dtype)
        out = _out_dtype(tr, b["out_dtype"], name, node)
        if not tensor_level and out not in (None, acc):
            raise tr.error(f"pypto refuses it: {name}: out_dtype {out.value} on tiles must be the accumulator "
                           f"dtype {acc.value}", node)
        # pypto's conversion does not forward out_dtype: the value is the accumulator tile; a store into a
        # narrower tensor converts it (the FIXPIPE, regions.store_region).
        return tr.fb.pld.tile.matmul(lhs, rhs, hint=tr.hint("mm"))

    return rule


def _matmul_acc(name: str) -> Rule:
    """``pl.matmul_acc(acc, lhs, rhs, a_trans=False, b_trans=False, init_cond=None)``: ``tile.matmul_acc``; the
    accumulator (a tile, or a tensor loaded whole) must have the accumulator dtype (pypto's check). pypto's
    ``pl.tile.matmul_acc(acc, lhs, rhs, init_cond=None)`` has no transposes: its fourth positional is init_cond."""
    tile = name.startswith("pl.tile.")
    positional = ("acc", "lhs", "rhs", *(("init_cond",) if tile else ("a_trans", "b_trans", "init_cond")))
    if name == "pl.tile.batch_matmul_acc":  # pypto's tile function takes (acc, lhs, rhs) only
        positional = ("acc", "lhs", "rhs")

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, positional, {"a_trans": False, "b_trans": False, "init_cond": None}, name)
        lhs, rhs, _ = _cube_operands(tr, b, name, node)
        acc = _tile(tr, on_core(tr, b["acc"], node, name), f"{name}: acc", node)
        want = accumulator_dtype(tltype(lhs).dtype)
        if tltype(acc).dtype is not want:
            raise tr.error(f"pypto refuses it: {name}: acc must be {want.value} (the accumulator dtype of "
                           f"{tltype(lhs).dtype.value} operands), got {tltype(acc).dtype.value}", node)
        cond = b["init_cond"]
        ranks = [len(tltype(v).shape) for v in (acc, lhs, rhs)]
        if cond is not None and max(ranks) > 2:
            raise tr.error(f"pypto refuses it: tensor.matmul_acc does not support init_cond on operands of rank > 2 "
                           f"(got acc rank {ranks[0]}, lhs rank {ranks[1]}, rhs rank {ranks[2]}). Loop over the batch "
                           "dimension and accumulate with 2D operands instead.", node)
        if cond is not None and not is_ir(cond):
            cond = Const(bool(cond), DType.BOOL)
        out = tr.fb.pld.tile.matmul_acc(_in_space(tr, acc, MemorySpace.Acc), lhs, rhs, cond, hint=tr.hint("acc"))
        _write_through(tr, acc, out)
        return out

    return rule


def _write_through(tr: DeviceLevel, operand: Var, result: Var) -> None:
    """An op that writes ``operand`` in place (the cube's MAD into its accumulator), when ``operand`` is a window
    of another tile (``pl.tile.slice`` of an Acc tile, pypto's ``pto.subview``): the result is written into
    the parent there, and its parent's parent, as the shared buffer would hold it; the result stays a window."""
    window = tr.windows.get(operand)
    if window is None:
        return
    tr.windows[result] = window
    value = result
    while window is not None:
        tr.fb.pld.tile.assemble(window.parent, value, list(window.offsets))
        value, window = window.parent, tr.windows.get(window.parent)


def _create_tile(name: str) -> Rule:
    """``pl.create_tile(shape, dtype, target_memory=Vec, transpose=None, flat_layout=None)`` / ``pl.tile.create``:
    ``tile.create`` (static positive shape, fully valid; its contents are undefined: poison here)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("shape", "dtype", "target_memory", "transpose"), {
            "target_memory": MemorySpace.Vec, "transpose": None, "flat_layout": None}, name)
        shape, dtype = _ints(tr, b["shape"], f"{name}: shape", node), _dtype_arg(tr, b["dtype"], name, node)
        space = _space(tr, b["target_memory"], name, node)
        if any(d <= 0 for d in shape):
            raise tr.error(f"pypto refuses it: {name}: shape must be static and positive, got {shape}", node)
        if (b["transpose"] or b["flat_layout"]) and space is not MemorySpace.Mat:
            raise tr.error(f"pypto refuses it: {name}: transpose / flat_layout are only for Mat tiles", node)
        if b["transpose"] or b["flat_layout"]:
            raise tr.error(f"{name}: transpose= / flat_layout= are not supported by pldemu (row-major tiles)", node)
        return tr.fb.pld.tile.create(shape, dtype, mem=space, hint=tr.hint("tile"))

    return rule


def _create_l1(name: str) -> Rule:
    """``pl.create_l1(shape, dtype, transpose=False)``: pypto's on-chip (Mat) accumulator of a kernel-driven
    gather, tensor-typed to pypto (so it composes with a tensor-level ``pl.matmul``); a Mat tile here,
    filled by ``pl.gather_row``."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("shape", "dtype", "transpose"), {"transpose": False}, name)
        shape, dtype = _ints(tr, b["shape"], f"{name}: shape", node), _dtype_arg(tr, b["dtype"], name, node)
        if any(d <= 0 for d in shape):
            raise tr.error(f"pypto refuses it: {name}: shape must be static and positive, got {shape}", node)
        tile = tr.fb.pld.tile.create(shape, dtype, mem=MemorySpace.Mat, hint=tr.hint("l1"))
        tr.emit.tensor_slices.add(tile.name)
        return tile

    return rule


def _gather_row(name: str, dst: str) -> Rule:
    """``pl.gather_row(dst, src, dst_offset, src_offset, shapes, transpose=False, *, valid_shape=None)`` (also
    ``pl.tile.gather_row``; ``pl.tensor.gather_row`` names its first parameter ``acc``): the GM window ``shapes`` of
    ``src`` at ``src_offset`` (its ``valid_shape`` part) written into ``dst`` at ``dst_offset`` in place
    (``transpose``: the window's two axes swapped, a row landing as a column); returns ``dst``, as pypto's DMA
    into L1 does."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (dst, "src", "dst_offset", "src_offset", "shapes", "transpose"),
                      {"transpose": False, "valid_shape": None}, name)
        acc = _tile(tr, b[dst], f"{name}: {dst}", node)
        view = b["src"]  # a slice passed as a tensor is read through: the DMA reads its base
        shape = _ints(tr, b["shapes"], f"{name}: shapes (a static window)", node)
        if b["transpose"] and b["valid_shape"] is not None:
            raise tr.error(f"pypto refuses it: {name}: valid_shape is not supported together with transpose=True",
                           node)
        region = Region(tuple(_offsets(tr, b["src_offset"], name, node)), tuple(shape), ())
        if not isinstance(view, TensorView):
            _tensor(tr, view, f"{name}: src", node)
        check_bounds(tr, view, region, node)
        src, region = based(view, region)
        piece = tr.fb.pld.tile.load(src, list(region.offsets), shape,
                                    None if b["valid_shape"] is None else list(b["valid_shape"]), hint=tr.hint("row"))
        if b["transpose"]:
            piece = _transposed(tr, piece, True, name, node)
        tr.fb.pld.tile.assemble(acc, piece, _offsets(tr, b["dst_offset"], name, node))
        return acc

    return rule


def _dtype_arg(tr: DeviceLevel, v: Any, name: str, node: ast.AST) -> DType:
    if not isinstance(v, PyDType):
        raise tr.error(f"{name}: dtype must be a pl dtype, got {v!r}", node)
    return v.ir


def _create_tensor(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.create_tensor(shape, dtype, layout=ND, manual_dep=False, init_value=None)``. In an orchestration
    function (outside any task): a LOCAL tensor of the rank (zeros at the start of a run, as pypto's torch
    codegen makes it; pypto leaves it undefined). In a kernel, a ``pl.spmd`` body or a ``pl.at`` region: the
    core's own tile (:func:`_created_tile`). Filled with ``init_value`` here when given. ``manual_dep`` and
    ``layout`` change no value."""
    name = "pl.create_tensor"
    b = bind_call(tr, node, ("shape", "dtype"), {"layout": None, "manual_dep": False, "init_value": None}, name)
    dtype = _dtype_arg(tr, b["dtype"], name, node)
    if _run_time_sized(b["shape"]) and not (tr.emit.tasks.depth or tr.fn.kind is Kind.INCORE):
        return _created_at_run_time(tr, b["shape"], dtype, b["init_value"], node)
    shape = [static(tr, d, node) for d in b["shape"]] if isinstance(b["shape"], (list, tuple)) else None
    if not shape or any(d <= 0 for d in shape):
        raise tr.error(f"{name}: shape must be a list of static positive extents, got {b['shape']!r}", node)
    init = b["init_value"]
    if init is not None and (isinstance(init, bool) or not isinstance(init, (int, float))):
        raise tr.error(f"pypto refuses it: {name}: init_value must be a constant int or float, got {init!r}", node)
    if init not in (None, 0) and dtype in (DType.FP16, DType.BF16):
        raise tr.error(f"pypto refuses it: {name}: a non-zero init_value of an FP16 / BF16 tensor", node)
    if in_kernel(tr):
        return _created_tile(tr, shape, dtype, init)
    hint = getattr(tr, "lhs", None) or "created"
    if fresh_buffers(tr.emit, False):
        # allocated again at every iteration, as pypto's orchestration does: one LOCAL buffer shared by the
        # iterations would let an iteration's tasks overwrite what an earlier one's still read
        t = tr.fb.pld.tensor.create(shape, dtype, hint=hint)
    else:
        t = Var(tr.fb.fresh(hint), TensorType(dtype, tuple(Const(d) for d in shape)))
        tr.emit.scratch[t.name] = (t, tuple(shape))
    if init is not None:
        fill = tr.fb.pld.tile.full(shape, Const(int(init) if dtype.is_int else float(init), dtype), dtype, hint="init")
        tr.fb.pld.tile.store(fill, [0] * len(shape), t)
    return t


def _run_time_sized(shape: Any) -> bool:
    """A shape list with an extent that is an IR scalar expression (known only when the statement runs)."""
    return isinstance(shape, (list, tuple)) and any(
        isinstance(d, (Var, BinOp)) and static_int(d) is None for d in shape)


def _created_at_run_time(tr: DeviceLevel, shape: Sequence[Any], dtype: DType, init: Any, node: ast.AST) -> Var:
    """An Orchestration ``pl.create_tensor`` whose extents are run-time scalars: pypto's orchestration codegen
    allocates it when the statement runs, at the extents evaluated then (``alloc_tensors``, no upper bound),
    so here a ``tensor.create``: a fresh rank-local buffer each time it runs, undefined until written. An
    access past its run-time extent is refused when it runs."""
    name = "pl.create_tensor"
    for d in shape:
        scalar = isinstance(d, (Const, Var, BinOp)) and isinstance(d.type, ScalarType) and d.type.dtype.is_int
        if not (scalar or (isinstance(d, int) and not isinstance(d, bool))):
            raise tr.error(f"{name}: an extent must be an int or an integer scalar, got {d!r}", node)
        fixed = static_int(as_expr(d))
        if fixed is not None and fixed <= 0:
            raise tr.error(f"{name}: extents must be positive, got {d!r}", node)
    if init is not None:
        raise tr.error(f"{name}: init_value= on a tensor of run-time extents is not supported by pldemu "
                       "(seed it with a task, as pypto-lib does)", node)
    return tr.fb.pld.tensor.create(list(shape), dtype, hint=getattr(tr, "lhs", None) or "created")


def _created_tile(tr: DeviceLevel, shape: list[int], dtype: DType, init: int | float | None) -> Var:
    """A kernel's ``pl.create_tensor``: pypto outlines a ``pl.spmd`` / ``pl.at`` body into an InCore function
    and its ConvertTensorToTileOps makes the ``tensor.create`` a Vec ``tile.create`` (op_conversion_registry.cpp),
    so each core running a block has its own: no two blocks (or tasks) share it. Still a tensor to pypto's
    DSL checks (``Emit.tensor_slices``). Undefined until written, as pypto's; ``init_value`` (which pypto's
    conversion does not forward) fills it here."""
    hint = getattr(tr, "lhs", None) or "created"
    if init is None:
        tile = tr.fb.pld.tile.create(shape, dtype, hint=hint)
    else:
        tile = tr.fb.pld.tile.full(shape, Const(int(init) if dtype.is_int else float(init), dtype), dtype, hint=hint)
    tr.emit.tensor_slices.add(tile.name)
    return tile


def _reshape(name: str, src: str) -> Rule:
    """``pl.reshape(input, shape)``: a tensor's ``tensor.view`` (zero copy); a view's (a slice passed as a
    tensor) :func:`reshape_view`; a tile's ``tile.reshape``."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var | TensorView:
        b = bind_call(tr, node, (src, "shape"), {}, name)
        return _reshaped(tr, b[src], b["shape"], name, src, node)

    return rule


def _reshaped(tr: DeviceLevel, value: Any, shape: Any, name: str, src: str, node: ast.AST) -> Var | TensorView:
    """``value`` reshaped: a tensor's ``tensor.view`` (zero copy), a view's :func:`reshape_view`, a tile's
    ``tile.reshape``."""
    if isinstance(value, TensorView) and value.valid is None:
        return reshape_view(tr, value, _ints(tr, shape, f"{name}: shape", node), node)
    if isinstance(value, TensorView):  # partly valid: its loaded tile reshaped, the valid box carried
        value = load_view(tr, value, node)
    t = value
    if is_tensor(value):
        if ttype(value).strides is None:
            return tr.fb.pld.tensor.view(value, list(shape))
        t = on_core(tr, value, node, name)
    tile = _tile(tr, t, f"{name}: {src}", node)
    return tr.fb.pld.tile.reshape(tile, _ints(tr, shape, f"{name}: shape", node), hint=tr.hint(tile.name))


def _tensor_view(tr: DeviceLevel, node: ast.Call) -> Var | TensorView:
    """``pl.tensor.view(tensor, shape=None, valid_shape=None, *, layout=None)``: pypto's zero-copy reinterpretation;
    a new ``shape`` of an ND tensor is ``pl.tensor.reshape``'s view (row-major, the element count kept), ``layout=ND``
    alone the tensor itself. A DN view (the trailing pair read column-major) and an explicit ``valid_shape`` are
    refused (pldemu's tensors are row-major views)."""
    name = "pl.tensor.view"
    b = bind_call(tr, node, ("tensor", "shape", "valid_shape"), {"shape": None, "valid_shape": None,
                                                                   "layout": None}, name)
    layout = b["layout"]
    if b["shape"] is None and layout is None:
        raise tr.error("pypto refuses it: tensor.view requires at least one of shape or layout", node)
    if layout is TensorLayout.NZ:
        raise tr.error("pypto refuses it: tensor.view: NZ layout is not allowed on TensorType (NZ is tile-only)", node)
    if layout not in (None, TensorLayout.ND):
        raise tr.error(f"{name}(layout={getattr(layout, 'name', layout)}) is not supported by pldemu: a DN view reads the trailing pair "
                       "column-major (the transposed values); pl.tensor.transpose computes them", node)
    if b["valid_shape"] is not None:
        raise tr.error(f"{name}(valid_shape=...) is not supported by pldemu (a reinterpreted view's own valid box): "
                       "view a fully valid tensor, then pl.tensor.slice(..., valid_shape=...)", node)
    if not (is_tensor(b["tensor"]) or isinstance(b["tensor"], TensorView)):
        raise tr.error(f"pypto refuses it: tensor.view: src must be TensorType, got {b['tensor']!r}", node)
    if b["shape"] is None:
        return b["tensor"]
    return _reshaped(tr, b["tensor"], b["shape"], name, "tensor", node)


def _transpose(name: str, src: str) -> Rule:
    """``pl.transpose(input, axis1, axis2)``: ``tile.transpose`` (a tensor loaded whole first, as pypto's
    conversion makes a kernel's ``tensor.transpose`` a tile one)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        # pl.tile.transpose's tmp_tile is the 2-D codegen's scratch, not an operand (pypto's deducer says so).
        b = bind_call(tr, node, (src, "axis1", "axis2", *(("tmp_tile",) if src == "tile" else ())),
                      {"tmp_tile": None} if src == "tile" else {}, name)
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        axes = _ints(tr, [b["axis1"], b["axis2"]], f"{name}: axis1 / axis2 (compile-time constants)", node)
        return tr.fb.pld.tile.transpose(tile, axes[0], axes[1], hint=tr.hint(tile.name))

    return rule


_PAD_SUGARS: Mapping[Any, PadValue] = MappingProxyType({0: PadValue.zero, math.inf: PadValue.max,
                                                        -math.inf: PadValue.min})
"""pypto's literal spellings of a pad value (``0``, ``math.inf``, ``-math.inf``)."""


def _pad(tr: DeviceLevel, value: Any, name: str, node: ast.AST) -> PadValue:
    """A ``pad_value=``: a ``pl.PadValue`` or one of pypto's literal sugars; anything else refused as pypto does."""
    pad = value
    if not isinstance(pad, PadValue):
        pad = _PAD_SUGARS.get(pad) if isinstance(pad, (int, float)) and not isinstance(pad, bool) else None
    if pad is None:
        raise tr.error(f"pypto refuses it: {name}: pad_value must be pl.PadValue.zero / max / min or 0, "
                       f"math.inf, -math.inf, got {value!r}", node)
    return pad


def _fillpad(name: str, src: str) -> Rule:
    """``pl.fillpad(input, pad_value=PadValue.zero)``: ``tile.fillpad`` (the pad filled, the tile fully valid)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "pad_value"), {"pad_value": PadValue.zero}, name)
        pad = _pad(tr, b["pad_value"], name, node)
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        return tr.fb.pld.tile.fillpad(tile, pad, hint=tr.hint(tile.name))

    return rule


def _fillpad_inplace(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.fillpad_inplace(tile, pad_value=PadValue.zero)``: ``tile.fillpad``'s value, also written over the
    input's buffer, which pypto's op shares (TFILLPAD in place): a later read of the input's pad cells sees the
    pad, while its type keeps its valid box, as in pypto."""
    name = "pl.tile.fillpad_inplace"
    b = bind_call(tr, node, ("tile", "pad_value"), {"pad_value": PadValue.zero}, name)
    pad = _pad(tr, b["pad_value"], name, node)
    tile = _tile(tr, b["tile"], f"{name}: tile", node)
    filled = tr.fb.pld.tile.fillpad(tile, pad, hint=tr.hint(tile.name))
    tr.fb.pld.tile.assemble(tile, filled, [0] * len(tltype(tile).shape))
    return filled


def _extract(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.extract(src, index_row, index_col, shape, *, target_memory)``: TEXTRACT, the 2-D window of ``src``
    at the offsets (inside it, as the ISA's bounds are hard) copied into a tile of ``target_memory``: the window's
    ``tile.slice`` (valid where ``src`` is), moved there."""
    name = "pl.tile.extract"
    b = bind_call(tr, node, ("src", "index_row", "index_col", "shape"), {"target_memory": None}, name)
    src = _tile(tr, b["src"], f"{name}: src", node)
    if b["target_memory"] is None:
        raise tr.error("pypto refuses it: extract() missing 1 required keyword-only argument: 'target_memory'", node)
    space = _space(tr, b["target_memory"], name, node)
    if len(tltype(src).shape) != 2:
        raise tr.error(f"pypto refuses it: tile.extract requires a 2D source tile, but got rank "
                       f"{len(tltype(src).shape)}", node)
    shape = _ints(tr, b["shape"], f"{name}: shape (static)", node)
    if len(shape) != 2 or any(d <= 0 for d in shape):
        raise tr.error(f"pypto refuses it: tile.extract shape must be 2D and positive, got {shape}", node)
    region = Region((b["index_row"], b["index_col"]), tuple(shape), ())
    check_bounds(tr, src, region, node)
    return _in_space(tr, slice_tile(tr, src, region, node), space)


def _fillpad_expand(name: str, src: str) -> Rule:
    """``pl.fillpad_expand(value, shape, pad_value=PadValue.zero)`` (three spellings): ``tile.fillpad_expand``, the
    source's valid box at the top left of a larger tile of ``shape``, the rest the pad (a tensor loaded whole
    first, as pypto's conversion loads it)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "shape", "pad_value"), {"pad_value": PadValue.zero}, name)
        pad = _pad(tr, b["pad_value"], name, node)
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        shape = _ints(tr, b["shape"], f"{name}: shape (static extents)", node)
        out = tr.fb.op(Op.TILE_FILLPAD_EXPAND, [tile, shape], {"pad": pad}, hint=tr.hint(tile.name))
        assert out is not None
        return out

    return rule


def _set_validshape(name: str, src: str) -> Rule:
    """``pl.set_validshape(input, valid_rows, valid_cols)``: ``tile.set_validshape`` of a 2-D tile (metadata;
    a tensor is loaded whole first). A constant extent must lie in ``[0, shape]`` (pypto's deducer)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, (src, "valid_rows", "valid_cols"), {}, name)
        tile = _tile(tr, on_core(tr, b[src], node, name), f"{name}: {src}", node)
        shape = tltype(tile).shape
        if len(shape) != 2:
            raise tr.error(f"pypto refuses it: {name} takes a 2-D value, got {list(shape)}", node)
        for extent, dim in zip((b["valid_rows"], b["valid_cols"]), shape, strict=True):
            v = static_int(extent) if is_ir(extent) else extent
            if isinstance(v, int) and not 0 <= v <= dim:
                raise tr.error(f"pypto refuses it: {name}: valid extent {v} outside [0, {dim}]", node)
        return tr.fb.pld.tile.set_validshape(tile, [b["valid_rows"], b["valid_cols"]], hint=tr.hint(tile.name))

    return rule


def _scalar_minmax(kind: BinOpKind, fn: Callable[[Any, Any], Any], name: str) -> Rule:
    def rule(tr: DeviceLevel, node: ast.Call) -> Any:
        b = bind_call(tr, node, ("lhs", "rhs"), {}, name)
        if not (is_ir(b["lhs"]) or is_ir(b["rhs"])):
            return fn(b["lhs"], b["rhs"])
        return BinOp(kind, as_expr(b["lhs"]), as_expr(b["rhs"]))

    return rule


def _const(tr: DeviceLevel, node: ast.Call) -> Const:
    b = bind_call(tr, node, ("value", "dtype"), {}, "pl.const")
    if not isinstance(b["dtype"], PyDType) or is_ir(b["value"]):
        raise tr.error("pl.const(value, dtype) takes a Python number and a pl dtype", node)
    return Const(b["value"], b["dtype"].ir)


def _cast_rule(first: str) -> Rule:
    """``pl.cast`` / ``pl.tensor.cast`` (first parameter ``input``), ``pl.tile.cast`` (``tile``)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Any:
        b = bind_call(tr, node, (first, "target_type", "mode"), {"mode": None}, "pl.cast")
        dtype, v = b["target_type"], b[first]
        if not isinstance(dtype, PyDType):
            raise tr.error("pl.cast(input, target_type): target_type must be a pl dtype", node)
        if not is_ir(v):  # pypto's cast of a number is a typed constant: a carried value keeps its dtype
            return Const(int(scalar_as(dtype.ir.np, v)) if dtype.ir.is_int else float(v), dtype.ir)
        v = on_core(tr, v, node)
        if isinstance(v, Var) and isinstance(v.type, TileType):
            return _tile_cast(tr, v, dtype.ir, _cast_mode(tr, b["mode"], node), node)
        return _scalar_cast(tr, as_expr(v), dtype.ir, b["mode"], node)

    return rule


CAST_ARCH = "a2a3"
"""The target whose native casts pldemu's chains follow: pypto's default platform (a2a3sim) and pypto-lib's
(``-p a2a3``); the a5 table is in ``pldemu.ir.cast_paths`` but the platform does not reach translation."""


def _tile_cast(tr: DeviceLevel, tile: Var, dst: DType, mode: CastMode, node: ast.AST) -> Var:
    """A tile cast as pypto's LegalizeTileCast leaves it: one ``tile.cast`` per native hop, each in ``mode``
    (a chain rounds at every hop), or pypto's refusal of a pair no chain reaches."""
    src = tltype(tile).dtype
    if src is dst:
        raise tr.error(f"pypto refuses it: pl.cast from {src.value} to {dst.value}: a same-dtype cast is not a "
                       "valid operation", node)
    chain = cast_chain(src, dst, CAST_ARCH)
    if chain is None:
        raise tr.error(f"pypto refuses it: LegalizeTileCast: no native cast path from {src.value} to {dst.value} "
                       f"for arch {CAST_ARCH}; pto.tcvt does not support this conversion", node)
    for hop in chain:
        tile = tr.fb.pld.tile.cast(tile, hop, hint=tr.hint("cast"), mode=mode)
    return tile


def _scalar_cast(tr: DeviceLevel, v: Any, dst: DType, mode: Any, node: ast.AST) -> Any:
    """``pl.cast`` of a device scalar: pypto's refusals, then a typed constant, or the value itself."""
    src = v.type.dtype if isinstance(v.type, ScalarType) else None
    if src is None:
        raise tr.error(f"pl.cast: {v!r} is neither a tile nor a scalar", node)
    if mode is not None and _cast_mode(tr, mode, node) is not CastMode.ROUND:
        raise tr.error(f"pypto refuses it: pl.cast: Scalar inputs do not support non-default mode, got mode={mode!r}",
                       node)
    if in_kernel(tr) and DType.INDEX in (src, dst) and (src.is_float or dst.is_float):
        # pypto's PTO code generator (pto_scalar_expr_codegen.cpp, VisitExpr_(Cast)), also in a pl.at / pl.spmd
        # body (outlined into an InCore kernel); an INT32 + an int literal is index-typed already (pypto
        # promotes to the wider dtype).
        raise tr.error(f"pypto refuses it: Cast between float and index types is not supported (pl.cast of an "
                       f"{src.value} scalar to {dst.value}: cast the INT32 parameter itself, then do the float "
                       "math in tile ops)", node)
    if isinstance(v, Const):
        if dst.is_int and dst is not DType.INDEX and not isinstance(v.value, float):
            return Const(int(scalar_as(dst.np, v.value)), dst)  # wraps as the register holds it
        return Const(float(v.value) if dst.is_float else int(v.value), dst)
    if src is DType.BOOL and dst.is_int:
        # 1 where the condition holds, else 0: max(cond, 0) is the condition's value typed as the integer
        # (a BOOL joins an integer as that integer; built unfolded, as the IR has no scalar cast).
        return BinOp(BinOpKind.MAX, v, Const(0, dst))
    if src is dst:
        return v
    return tr.fb.pld.tile.scalar_cast(v, dst, hint=tr.hint("cast"))  # pypto's scalar Cast: typed as dst


def _cast_mode(tr: DeviceLevel, mode: Any, node: ast.AST) -> CastMode:
    """pypto's cast mode: a name (``"rint"``), its number, or absent (``"round"``, pypto's default)."""
    if mode is None:
        return CastMode.ROUND
    try:
        return CastMode(mode) if isinstance(mode, int) else CastMode["None_" if mode == "none" else mode.upper()]
    except (KeyError, ValueError, AttributeError):
        raise tr.error(f"pl.cast: unknown mode {mode!r} (none, rint, round, floor, ceil, trunc, odd)", node) from None


def _is_tile(v: Any) -> bool:
    return isinstance(v, Var) and isinstance(v.type, TileType)


def _index_list(v: Any) -> list[Any]:
    """pypto's indices: a list, or one bare index (its flat 1-D spelling)."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _read_rule(name: str, params: tuple[str, str]) -> Rule:
    """``pl.read(src, offset)`` / ``pl.tensor.read(tensor, indices)`` / ``pl.tile.read(tile, indices)``:
    one element as a scalar (``tensor.read`` of a tensor, ``tile.read`` of a tile)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, params, {}, name)
        src, at = _through_view(tr, b[params[0]], b[params[1]], (), node)
        if _is_tile(src) and (not name.startswith("pl.tensor.") or src.name in tr.emit.tensor_slices):
            return tr.fb.pld.tile.read(src, at, hint=tr.hint("val"))  # pypto converts a tile's tensor.read so
        if name.startswith("pl.tile."):
            raise tr.error(f"{name}: {params[0]} must be a tile, got {src!r}", node)
        return tr.fb.pld.tensor.read(_tensor(tr, src, f"{name}: {params[0]}", node), at)

    return rule


def _write_rule(name: str, params: tuple[str, str, str]) -> Rule:
    """``pl.write(dst, offset, value)`` and its tensor / tile spellings: one element set (a tile's in
    place, as the core's buffer is)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> None:
        b = bind_call(tr, node, params, {}, name)
        (dst, at), value = _through_view(tr, b[params[0]], b[params[1]], (), node), b[params[2]]
        if _is_tile(dst) and (not name.startswith("pl.tensor.") or dst.name in tr.emit.tensor_slices):
            assert isinstance(dst.type, TileType)
            tr.fb.pld.tile.write(dst, at, _typed(value, dst.type.dtype))
            return
        if name.startswith("pl.tile."):
            raise tr.error(f"{name}: {params[0]} must be a tile, got {dst!r}", node)
        t = _tensor(tr, dst, f"{name}: {params[0]}", node)
        tr.fb.pld.tensor.write(t, at, _typed(value, ttype(t).dtype))

    return rule


def _slice(name: str, source: str) -> Rule:
    """``pl.slice(input, ...)`` / ``pl.tensor.slice(tensor, shape, offset, valid_shape=, drop_dims=,
    pad_value=, clamp=)`` of a tensor (or a view): in a kernel a ``tile.load`` of the region where the slice is
    made, as pypto's ConvertTensorToTileOps lowers it, at the orchestration level a view (``tensor_region``) (that path does not apply ``pad_value`` either); of a tile (``pl.slice``,
    ``pl.tile.slice``): its ``tile.slice``, narrowed by ``valid_shape=``; ``clamp=`` refused as pypto refuses it."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var | TensorView:
        b = bind_call(tr, node, (source, "shape", "offset", "valid_shape", "drop_dims", "pad_value", "clamp"),
                      {"valid_shape": None, "drop_dims": None, "pad_value": None, "clamp": False}, name)
        t = b[source]
        on_tile = source != "tensor" and isinstance(t, Var) and isinstance(t.type, TileType)
        if not (((is_tensor(t) or isinstance(t, TensorView)) and source != "tile") or on_tile):
            raise tr.error(f"{name}: {source} must be a tensor or a tile, got {t!r}", node)
        if on_tile and b["clamp"]:
            if source == "input" and tensor_on_core(tr, t):
                raise tr.error(f"{name}: clamp=True of a tensor's slice already on core is not supported by pldemu "
                               "(clamp the first slice)", node)
            raise tr.error(_TILE_CLAMP if source == "input" else f"{name}() got an unexpected keyword argument "
                           "'clamp'", node)
        shape = _ints(tr, b["shape"], f"{name}: shape (a slice extent must be static)", node)
        drop = sorted(set(_ints(tr, b["drop_dims"] or [], f"{name}: drop_dims", node)))
        if any(not 0 <= d < len(shape) or shape[d] != 1 for d in drop):
            raise tr.error(f"{name}: drop_dims {drop} must name unit axes of shape {shape}", node)
        region = Region(tuple(_offsets(tr, b["offset"], name, node)), tuple(shape), tuple(drop))
        check_bounds(tr, t, _reach(region, None if on_tile else b["valid_shape"]), node,
                     clamp=bool(b["clamp"]) and not on_tile)
        if on_tile:
            if b["pad_value"] is not None:
                raise tr.error(f"pypto refuses it: {name} of a tile with pad_value={getattr(b['pad_value'], 'name', b['pad_value'])}: a tile's "
                               "slice is pto.subview, a pure view that cannot pad; apply pl.fillpad to the slice "
                               "instead", node)
            requested = b["valid_shape"]
            if requested is not None and not isinstance(requested, (list, tuple)):
                raise tr.error(f"{name}: valid_shape must be a list of extents, got {requested!r}", node)
            return slice_tile(tr, t, region, node, requested)
        valid = _slice_valid(tr, t, region, b["valid_shape"], bool(b["clamp"]), node)
        return tensor_region(tr, t, region, node, valid)

    return rule


_TILE_CLAMP = ("pypto refuses it: pl.slice: clamp=True is not supported for a Tile. An on-chip window has no clamping "
               "mechanism, so offset + shape must stay inside the source tile. Clamp the read at the tensor boundary "
               "instead — pl.load(..., clamp=True) or pl.slice(tensor, ..., clamp=True) — and slice the resulting "
               "tile in bounds.")


def _concat(name: str) -> Rule:
    """``pl.concat(src0, src1)`` / ``pl.tile.concat``: two 2-D tiles side by side (``tile.concat``); a
    tensor operand is loaded whole first (pypto's conversion of ``tensor.concat`` in a kernel)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("src0", "src1"), {}, name)
        a, c = (_tile(tr, on_core(tr, b[k], node), f"{name}: {k}", node) for k in ("src0", "src1"))
        return tr.fb.pld.tile.concat(a, c, hint=tr.hint("cat"))

    return rule


def _offsets(tr: DeviceLevel, v: Any, name: str, node: ast.AST) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise tr.error(f"{name}: offset must be a list, got {v!r}", node)
    return list(v)


def _reach(region: Region, valid: Any) -> Region:
    """The part of a tensor slice that must lie inside the tensor: with ``valid_shape=`` only the valid
    extents (pypto's tensor.slice bounds only what it reads: a padded window over a shorter tensor is its
    idiom, pypto-lib's ``hc_fn[0:MIX_PAD]`` of MIX_HC rows); a run-time extent only its start."""
    if not isinstance(valid, (list, tuple)) or len(valid) != len(region.extents):
        return region
    return Region(region.offsets, tuple(_reach_extent(e, v) for e, v in zip(region.extents, valid, strict=True)),
                  region.drop)


def _reach_extent(window: int, valid: Any) -> int:
    fixed = valid if isinstance(valid, int) and not isinstance(valid, bool) else (
        static_int(valid) if is_ir(valid) else None)
    if fixed is None:
        return 1  # a run-time extent: only the start is checked (pypto trusts what stays symbolic)
    return max(1, min(window, fixed))


def _slice_valid(tr: DeviceLevel, t: Var, region: Region, requested: Any, clamp: bool,
                 node: ast.AST) -> list[Any] | None:
    """The valid extents of a slice: those asked for, cut to the tensor's edge when ``clamp``."""
    if requested is not None and (not isinstance(requested, (list, tuple)) or len(requested) != len(region.extents)):
        raise tr.error(f"valid_shape must be a list of {len(region.extents)} extents, got {requested!r}", node)
    if not clamp:
        return None if requested is None else list(requested)
    valid: list[Any] = []
    for axis, (off, ext, dim) in enumerate(zip(region.offsets, region.extents, dims(tr, t, node), strict=True)):
        edge = _min(ext, dim - off)
        valid.append(edge if requested is None else _min(edge, requested[axis]))
    return valid


def _min(a: Any, b: Any) -> Any:
    if not (is_ir(a) or is_ir(b)):
        return min(a, b)
    return binop(BinOpKind.MIN, as_expr(a), as_expr(b))  # folded where both are known (a typed scalar)


def _assemble(name: str) -> Rule:
    """``pl.assemble(target, source, offset, *, atomic=)``: the source (a tile, or a tensor loaded whole)
    stored into the target at ``offset`` (pypto's conversion: ``tile.store``; ``atomic=pl.AtomicType.Add``:
    the atomic-add store split-K uses, only in a kernel, as pypto requires); returns the target."""

    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, ("target", "source", "offset"), {"atomic": AtomicType.None_}, name)
        t = b["target"]
        if not (is_tensor(t) or _is_tile(t) or isinstance(t, TensorView)):
            raise tr.error(f"{name}: target must be a tensor or a tile, got {t!r}", node)
        atomic = _kernel_atomic(tr, b["atomic"], name, node)
        if atomic is not AtomicType.None_ and _is_tile(t):
            raise tr.error(f"{name}: atomic= into the tile {t.name}: pypto's tile.assemble has no atomic form "
                           "(atomic-add into a tensor in global memory)", node)
        src = on_core(tr, b["source"], node)
        if not (isinstance(src, Var) and isinstance(src.type, TileType)):
            raise tr.error(f"{name}: source must be a tensor or a tile, got {src!r}", node)
        if _is_tile(t):
            return _assembled_tile(tr, t, src, _offsets(tr, b["offset"], name, node), node)
        src = _flattened(tr, src, len(t.region.extents) if isinstance(t, TensorView) else len(ttype(t).shape))
        region = _assembled(tr, t, tltype(src), _offsets(tr, b["offset"], name, node), node)
        check_bounds(tr, t, region, node)
        store_region(tr, src, *based(t, region), node, name, atomic)
        return t

    return rule


def _tile_assemble(tr: DeviceLevel, node: ast.Call) -> Var:
    """``pl.tile.assemble(target, source, offset)``: pypto's tile form, of two tiles only (no atomic), a new
    tile value as ``pl.assemble`` into a tile makes it."""
    name = "pl.tile.assemble"
    b = bind_call(tr, node, ("target", "source", "offset"), {}, name)
    dst, src = _tile(tr, b["target"], f"{name}: target", node), _tile(tr, b["source"], f"{name}: source", node)
    return _assembled_tile(tr, dst, src, _offsets(tr, b["offset"], name, node), node)


def _assembled_tile(tr: DeviceLevel, dst: Var, src: Var, offsets: list[Any], node: ast.AST) -> Var:
    """``pl.assemble`` into a tile (a kernel's ``pl.create_tensor``): pypto's conversion makes it
    ``tile.assemble``, a new value (other names keep the old one): a copy of ``dst`` with ``src``'s valid box
    written in at ``offsets``."""
    t, s = tltype(dst), tltype(src)
    if s.dtype != t.dtype or len(s.shape) != len(t.shape) or len(offsets) != len(t.shape):
        raise tr.error(f"pl.assemble into the {t.dtype.value} {list(t.shape)} tile {dst.name}: the source must be a "
                       f"{t.dtype.value} tile of its rank with one offset per axis, got {s.dtype.value} "
                       f"{list(s.shape)} at {len(offsets)} offsets", node)
    whole = tr.fb.pld.tile.tile_slice(dst, list(t.shape), [0] * len(t.shape), hint=tr.hint(dst.name))
    tr.fb.pld.tile.assemble(whole, src, offsets)
    return whole


def _flattened(tr: DeviceLevel, src: Var, rank: int) -> Var:
    """A source tile of higher rank than its target with its leading axes merged into its rows, as pypto's
    FlattenTileNdTo2D stores an ND tile (pypto-lib's ``[1, M, N]`` group matmul into a 2-D tensor)."""
    shape = tltype(src).shape
    if len(shape) <= rank:
        return src
    k = len(shape) - rank + 1
    return tr.fb.pld.tile.reshape(src, [math.prod(shape[:k]), *shape[k:]], hint=tr.hint(src.name))


def _assembled(tr: DeviceLevel, t: Var | TensorView, src: TileType, offsets: list[Any], node: ast.AST) -> Region:
    """The region ``pl.assemble`` writes: the source's valid extents (pypto moves only those); a source of
    lower rank goes into the trailing axes (pypto's reinterpreting write: a rank-2 source into a rank-3
    target at ``[o0, o1, o2]`` fills rows ``o0 * Y + o1`` of the target viewed as ``[X * Y, Z]``)."""
    valid = [static_int(v) for v in src.valid_shape or ()]
    extents = src.shape if not valid or None in valid else tuple(v for v in valid if v is not None)
    rank = len(t.region.extents) if isinstance(t, TensorView) else len(ttype(t).shape)
    lead = rank - len(extents)
    if lead < 0 or len(offsets) != rank:
        raise tr.error(f"{t.name} has {rank} dims, the source {len(extents)} and the offset "
                       f"{len(offsets)} entries", node)
    return Region(tuple(offsets), (1,) * lead + extents, tuple(range(lead)))


def _dim(name: str) -> Rule:
    """``pl.tensor.dim(tensor, axis)`` (pypto's ``pl.dim`` is the same function)."""

    def rule(tr: DeviceLevel, node: ast.Call) -> int | Expr:
        b = bind_call(tr, node, ("tensor", "axis"), {}, name)
        return tensor_dim(tr, b["tensor"], b["axis"], node)

    return rule


def _typed(value: Any, dtype: Any) -> Any:
    """A Python literal (or a constant: a scalar parameter's value) as a constant of ``dtype``; any other IR
    value passes through."""
    if isinstance(value, Const):
        value = value.value
    return value if is_ir(value) else Const(value, dtype)


_SWAPPED_CARRY = (
    "pl.yield_({arg}): a carried tensor yielded as another buffer ({old} carried, {new} yielded): pypto's next "
    "iteration would see {new} under the carried name (a ping-pong swap), but pldemu translates the loop body once "
    "with each carried tensor fixed, so it would run every iteration on {old}; yield each carried tensor itself "
    "(written in place), or alternate the buffers explicitly (pl.unroll, or an `if` on the step's parity)")
"""A tensor carry is plain rebinding in pldemu (``Carry.rebound``): only a yield of the same tensor is that."""


def _is_tensor_value(value: Any) -> bool:
    return isinstance(value, TensorView) or (isinstance(value, Var) and isinstance(value.type, TensorType))


def _buffer_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def _yield(tr: DeviceLevel, node: ast.Call) -> Any:
    if not tr.carries:
        raise tr.error("pl.yield_ outside a pl.range(..., init_values=) loop", node)
    carry = tr.carries[-1]
    values = [tr.eval(a) for a in node.args]
    if carry.branch:  # an if's outputs: the values themselves, bound to the assignment's names
        return values[0] if len(values) == 1 else tuple(values)
    if len(values) != len(carry.values):
        raise tr.error(f"pl.yield_ gives {len(values)} values for {len(carry.values)} init_values", node)
    values = _before_assigning(tr, carry, values)
    for i, (old, new) in enumerate(zip(carry.values, values, strict=True)):
        if Carry.rebound(old):
            if arrays.is_array(tr, old) and arrays.is_array(tr, new) and new != old:
                arrays.copy(tr, old, new, node)  # an array is a value to pypto: the next iteration sees new's
                continue
            if _is_tensor_value(new) and new != old:
                raise tr.error(_SWAPPED_CARRY.format(arg=ast.unparse(node.args[i]), old=_buffer_name(old),
                                                     new=_buffer_name(new)), node)
            carry.values[i] = new
        elif isinstance(old.type, TileType):
            tr.fb.assign(old, fit_to_carry(tr.fb, old, _tile(tr, new, "pl.yield_ of a carried tile", node)))
        else:
            tr.fb.assign(old, _typed(new, old.type.dtype))
            tr.emit.assigned(old)
    return carry.values[0] if len(values) == 1 else tuple(carry.values)


def _before_assigning(tr: DeviceLevel, carry: Carry, values: list[Any]) -> list[Any]:
    """pypto's yield hands over all its values at once (``pl.yield_(i + 1, total + i)`` adds the old ``i``): a
    value that reads a carry variable the yield re-assigns is computed into a variable of its own first, so the
    assignments, made one after another, do not see each other's."""
    assigned = {v for v in carry.values if isinstance(v, Var) and not Carry.rebound(v)}
    out = []
    for value in values:
        reads = is_ir(value) and not isinstance(value, Const) and any(
            isinstance(e, Var) and e in assigned for e in walk_expr(as_expr(value)))
        out.append(tr.fb.let("yielded", as_expr(value)) if reads else value)
    return out


def _comm_ctx(tr: DeviceLevel, node: ast.Call) -> Var:
    b = bind_call(tr, node, ("dist_tensor",), {}, "pld.get_comm_ctx")
    return tr.fb.pld.system.get_comm_ctx(_tensor(tr, b["dist_tensor"], "pld.get_comm_ctx", node))


def _rank(tr: DeviceLevel, node: ast.Call) -> Var:
    b = bind_call(tr, node, ("ctx",), {}, "pld.rank")
    return tr.fb.pld.system.rank(b["ctx"], hint=tr.hint("me"))


def _nranks(tr: DeviceLevel, node: ast.Call) -> Var:
    b = bind_call(tr, node, ("ctx",), {}, "pld.nranks")
    return tr.fb.pld.system.nranks(b["ctx"], hint=tr.hint("nr"))


def _signal(tr: DeviceLevel, v: Any, what: str, node: ast.AST) -> Var:
    t = _tensor(tr, v, what, node)
    tr.emit.signals.add(t.name)
    return t


def _notify(tr: DeviceLevel, node: ast.Call) -> None:
    b = bind_call(tr, node, ("target", "peer", "offsets", "value"), {"op": NotifyOp.AtomicAdd},
                  "pld.system.notify")
    sig = _signal(tr, b["target"], "pld.system.notify: target", node)
    tr.fb.pld.system.notify(sig, b["peer"], list(b["offsets"]), _typed(b["value"], ttype(sig).dtype),
                            op=NotifyOp(b["op"]))


def _wait(tr: DeviceLevel, node: ast.Call) -> None:
    b = bind_call(tr, node, ("signal", "offsets", "expected"), {"cmp": WaitCmp.Ge}, "pld.system.wait")
    sig = _signal(tr, b["signal"], "pld.system.wait: signal", node)
    tr.fb.pld.system.wait(sig, list(b["offsets"]), _typed(b["expected"], ttype(sig).dtype), cmp=WaitCmp(b["cmp"]))


def _remote_load(tr: DeviceLevel, node: ast.Call) -> Var:
    b = bind_call(tr, node, ("target", "peer", "offsets", "shape", "valid_shape"), {"valid_shape": None},
                  "pld.tile.remote_load")
    w = _tensor(tr, b["target"], "pld.tile.remote_load: target", node)
    shape = _ints(tr, b["shape"], "pld.tile.remote_load: shape", node)
    aligned_tile(tr, "pld.tile.remote_load", shape, ttype(w).dtype, node)
    return tr.fb.pld.tile.remote_load(w, b["peer"], list(b["offsets"]), shape, b["valid_shape"],
                                      hint=tr.hint("rtile"))


def _remote_store(name: str, src: str, tensor_level: bool | None) -> Rule:
    """``pld.tile.remote_store(src_tile, ...)`` / ``pld.tensor.remote_store(src, ...)`` (whose tensor
    source is loaded whole on core first) / ``pld.remote_store(src, ...)`` (either, by ``src``'s level,
    ``tensor_level`` None): a put from the tile."""

    def rule(tr: DeviceLevel, node: ast.Call) -> None:
        b = bind_call(tr, node, (src, "target", "peer", "offsets"), {"atomic": AtomicType.None_}, name)
        # pld.remote_store (tensor_level None) takes either, as pypto's dispatch on the source's level does.
        is_tile = isinstance(b[src], Var) and isinstance(b[src].type, TileType)
        level = not is_tile if tensor_level is None else tensor_level
        value = on_core(tr, b[src], node, name) if level else b[src]
        _put_tile(tr, _tile(tr, value, f"{name}: {src}", node), _tensor(tr, b["target"], f"{name}: target", node),
                  b)

    return rule


def _put_tile(tr: DeviceLevel, tile: Var, dst: Var, b: dict[str, Any]) -> None:
    """The put of a tile's valid box (pypto's push moves the valid part: a ragged last tile's padding never
    lands past the region it is meant for); the stage has the tile's static shape."""
    t = tltype(tile)
    shape = list(t.shape)
    stage = tr.fb.pld.tile.create(shape, t.dtype, hint="stage")
    moved = list(t.valid_shape) if t.valid_shape is not None else shape
    tr.fb.pld.tile.put(dst, b["peer"], tile, stage, list(b["offsets"]), [0] * len(shape), moved,
                       atomic=AtomicType(b["atomic"]))


def _transfer(get: bool) -> Rule:
    name = "pld.tensor.get" if get else "pld.tensor.put"

    def rule(tr: DeviceLevel, node: ast.Call) -> None:
        b = bind_call(tr, node, ("dst", "peer", "src", "dst_offsets", "src_offsets", "shape"),
                      {"dst_offsets": None, "src_offsets": None, "shape": None, "atomic": AtomicType.None_,
                       "chunk_rows": 0, "chunk_cols": 0, "pipeline": False}, name)
        dst = _tensor(tr, b["dst"], f"{name}: dst", node)
        src = _tensor(tr, b["src"], f"{name}: src", node)
        region = b["shape"] if b["shape"] is not None else [static(tr, d, node) for d in ttype(src).shape]
        region = _ints(tr, region, f"{name}: shape", node)
        if len(region) != 2:
            raise tr.error(f"{name}: pldemu moves 2-D regions; got shape {region}", node)
        rows = b["chunk_rows"] or region[0]
        cols = b["chunk_cols"] or region[1]
        stage = tr.fb.pld.tile.create([min(rows, region[0]), min(cols, region[1])], ttype(dst).dtype, hint="stage")
        offs = (b["dst_offsets"], b["src_offsets"], region) if b["dst_offsets"] is not None else (None, None, None)
        if b["dst_offsets"] is None and b["shape"] is not None:
            offs = ([0] * len(ttype(dst).shape), [0] * len(ttype(src).shape), region)
        if get:
            if AtomicType(b["atomic"]) is not AtomicType.None_:
                raise tr.error("pld.tensor.get has no atomic= (only put accumulates)", node)
            tr.fb.pld.tile.get(dst, b["peer"], src, stage, *_opt_lists(offs))
        else:
            tr.fb.pld.tile.put(dst, b["peer"], src, stage, *_opt_lists(offs), atomic=AtomicType(b["atomic"]))

    return rule


def _opt_lists(offs: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    return tuple(None if o is None else list(o) for o in offs)  # type: ignore[return-value]


def static(tr: DeviceLevel, d: Any, node: ast.AST) -> int:
    if isinstance(d, Const) and isinstance(d.value, int):
        return d.value
    if isinstance(d, int):
        return d
    raise tr.error(f"a static extent is needed, got {d!r}", node)


def _collective(name: str, params: tuple[str, ...], attrs: dict[str, Any]) -> Rule:
    def rule(tr: DeviceLevel, node: ast.Call) -> Var:
        b = bind_call(tr, node, params, attrs, name)
        if lane_count(tr, name, b, node) > 1:
            # pypto's LowerCompositeOps refuses it too: an InCore kernel is one block.
            raise tr.error(f"{name}: core_num > 1 is supported only in a HOST orchestrator (an InCore call "
                           "keeps core_num=1)", node)
        return collective(tr, name, b, node)

    return rule


def lane_count(tr: Any, name: str, b: Mapping[str, Any], node: ast.AST) -> int:
    """pypto's ``core_num``, a HOST allreduce's lane count (pldemu's ``lanes``)."""
    lanes = b.get("core_num", 1)
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise tr.error(f"{name}: core_num must be a positive compile-time int, got {lanes!r}", node)
    return lanes


def collective(tr: Any, name: str, b: dict[str, Any], node: ast.AST) -> Var:
    """Emit ``pld.tensor.<op>`` (device level or host level) with its bound arguments."""
    fb = tr.fb
    sig = _signal(tr, b["signal"], f"{name}: signal", node)
    if len(ttype(sig).shape) == 1:
        # pypto's host-level signals are [world_size]; pldemu's mesh recipes use the [NR, 1] layout of
        # the same cells.
        sig = fb.pld.tensor.view(sig, [ttype(sig).shape[0], 1])
    op = name.rsplit(".", 1)[1]
    if op == "allreduce":
        return fb.pld.tensor.allreduce(b["target"], sig, op=ReduceOp(b["op"]), mode=str(b["mode"]),
                                       lanes=lane_count(tr, name, b, node))
    if op == "reduce_scatter":
        return fb.pld.tensor.reduce_scatter(b["target"], sig, op=ReduceOp(b["op"]))
    if op == "broadcast":
        return fb.pld.tensor.broadcast(b["target"], sig, root=int(b["root"]))
    if op == "barrier":
        return fb.pld.tensor.barrier(sig)
    if op == "allgather":
        return fb.pld.tensor.allgather(b["local_data"], b["target"], sig)
    if op == "all_to_all":
        return fb.pld.tensor.all_to_all(b["input"], b["target"], sig)
    tr.emit.signals.add(b["recv_counts"].name)
    send = _counts_vector(fb, _local_counts(tr, _tensor(tr, b["send_counts"], f"{name}: send_counts", node), node))
    return fb.pld.tensor.all_to_all_v(b["input"], b["target"], sig, send, b["recv_counts"])


def _local_counts(tr: Any, counts: Var, node: ast.AST) -> Var:
    """Send counts in a window (pypto's host builtin takes them so) copied into a LOCAL scratch first.

    pldemu's recipe reads its counts from a local tensor; the sender reads only its own cells, so a
    copy made just before the call is the same data.
    """
    t = ttype(counts)
    if not t.window:
        return counts
    shape = tuple(eval_nr(d, tr.emit.nranks) for d in t.shape)
    if len(shape) not in (1, 2) or None in shape or (len(shape) == 2 and shape[1] != 1):
        raise tr.error(f"send_counts must be [NR] or [NR, 1], got {list(t.shape)}", node)
    fb = tr.fb
    # One scratch per counts window, whichever rank block copies into it.
    local = tr.emit.scratch.get(counts.name, (None, shape))[0]
    if local is None:
        local = Var(fb.fresh(f"{counts.name}_local"), TensorType(t.dtype, t.shape))
        tr.emit.scratch[counts.name] = (local, shape)
    tail = [0] if len(shape) == 2 else []
    with fb.for_range(0, shape[0], hint="d") as d:
        fb.pld.tensor.write(local, [d, *tail], fb.pld.tensor.read(counts, [d, *tail]))
    return local


def _counts_vector(fb: Any, counts: Var) -> Any:
    """pypto's send counts are ``[NR, 1]``; pldemu's recipe takes ``[NR]``: a view of the same cells."""
    t = counts.type
    if isinstance(t, TensorType) and len(t.shape) == 2 and isinstance(t.shape[1], Const) and t.shape[1].value == 1:
        return fb.pld.tensor.view(counts, [t.shape[0]])
    return counts


COLLECTIVE_PARAMS: Mapping[str, tuple[tuple[str, ...], dict[str, Any]]] = MappingProxyType({
    "pld.tensor.allreduce": (("target", "signal"), {"op": ReduceOp.Sum, "mode": "mesh", "core_num": 1}),
    "pld.tensor.reduce_scatter": (("target", "signal"), {"op": ReduceOp.Sum}),
    "pld.tensor.broadcast": (("target", "signal"), {"root": 0}),
    "pld.tensor.barrier": (("signal",), {}),
    "pld.tensor.allgather": (("local_data", "target", "signal"), {}),
    "pld.tensor.all_to_all": (("input", "target", "signal"), {}),
    "pld.tensor.all_to_all_v": (("input", "target", "signal", "send_counts", "recv_counts"), {}),
})
"""pypto's signature of each collective: positional names, keyword defaults (only allreduce has
``core_num``)."""


def _world_size(tr: DeviceLevel, node: ast.Call) -> int:
    return SymInt(tr.emit.nranks, NR)


_HP = MappingProxyType({"high_precision": False})

_MATH_OPS: Mapping[str, Rule] = MappingProxyType({
    **{f"{prefix}{name}": _unary(op, f"{prefix}{name}", "input", opts, to_fp32) for prefix in ("pl.", "pl.tensor.")
       for name, (op, opts, to_fp32) in {
           "exp": (Op.TILE_EXP, {}, True), "log": (Op.TILE_LOG, _HP, False), "sqrt": (Op.TILE_SQRT, {}, True),
           "rsqrt": (Op.TILE_RSQRT, _HP, True), "recip": (Op.TILE_RECIP, _HP, True),
           "neg": (Op.TILE_NEG, {}, False), "abs": (Op.TILE_ABS, {}, False)}.items()},
    **{f"pl.tile.{name}": _unary(op, f"pl.tile.{name}", "tile", opts) for name, (op, opts) in {
        "exp": (Op.TILE_EXP, {}), "log": (Op.TILE_LOG, _HP), "sqrt": (Op.TILE_SQRT, {}),
        "rsqrt": (Op.TILE_RSQRT, {"tmp": None}), "recip": (Op.TILE_RECIP, _HP), "neg": (Op.TILE_NEG, {}),
        "abs": (Op.TILE_ABS, {})}.items()},
    **{f"{prefix}div": _binary(Op.TILE_DIV, Op.TILE_DIVS, f"{prefix}div", high_precision=True)
       for prefix in ("pl.", "pl.tensor.", "pl.tile.")},
    "pl.tile.divs": _binary(Op.TILE_DIVS, Op.TILE_DIVS, "pl.tile.divs"),
    "pl.tensor.divs": _binary(Op.TILE_DIVS, Op.TILE_DIVS, "pl.tensor.divs"),
    **_reduce_ops(),
    **_expand_ops(),
    **_elementwise_ops(),
    **_partial_rem_ops(),
    **_fused_ops(),
    **{f"{prefix}matmul": _matmul(f"{prefix}matmul") for prefix in ("pl.", "pl.tensor.", "pl.tile.")},
    **{f"{prefix}matmul_acc": _matmul_acc(f"{prefix}matmul_acc") for prefix in ("pl.", "pl.tensor.", "pl.tile.")},
    "pl.batch_matmul": _matmul("pl.batch_matmul"),
    "pl.tile.batch_matmul": _matmul("pl.tile.batch_matmul"),
    "pl.tile.batch_matmul_acc": _matmul_acc("pl.tile.batch_matmul_acc"),
    "pl.create_tile": _create_tile("pl.create_tile"),
    "pl.tile.create": _create_tile("pl.tile.create"),
    "pl.create_tensor": _create_tensor,
    "pl.tensor.create": _create_tensor,
    **{f"{prefix}{op}": rule(f"{prefix}{op}", "value" if (prefix, op) == ("pl.", "fillpad") else src)
       for prefix, src in (("pl.", "input"), ("pl.tensor.", "tensor"), ("pl.tile.", "tile"))
       for op, rule in (("reshape", _reshape), ("transpose", _transpose), ("fillpad", _fillpad),
                        ("set_validshape", _set_validshape))},
    "pl.tile.fillpad_inplace": _fillpad_inplace,
    "pl.tile.extract": _extract,
    "pl.tensor.view": _tensor_view,
    "pl.tensor.create_tensor": _create_tensor,
    "pl.tile.create_tile": _create_tile("pl.tile.create_tile"),
    "pl.move": _move("pl.move", "tile"),
    "pl.tile.move": _move("pl.tile.move", "tile"),
    **SORT_OPS,
    **STATIC_OPS,
    **CUBE_SPLIT_OPS,
    **PREFETCH_OPS,
    "pl.array.create": arrays.create,
    "pl.array.get_element": arrays.get_element,
    "pl.array.update_element": arrays.update_element,
    "pl.full": _full("pl.full"),
    "pl.tensor.full": _full("pl.tensor.full"),
    "pl.tile.full": _full("pl.tile.full"),
})
"""pypto's unary math, divisions, reductions, expands and fills, in their unified, tensor and tile spellings."""

_OPS: Mapping[str, Rule] = MappingProxyType({
    "pl.load": _load,
    "pl.store": _store,
    "pl.add": _binary(Op.TILE_ADD, Op.TILE_ADDS, "pl.add"),
    "pl.sub": _binary(Op.TILE_SUB, Op.TILE_ADDS, "pl.sub", negate=True),
    "pl.mul": _binary(Op.TILE_MUL, Op.TILE_MULS, "pl.mul"),
    "pl.maximum": _binary(Op.TILE_MAXIMUM, Op.TILE_MAXIMUMS, "pl.maximum"),
    "pl.minimum": _binary(Op.TILE_MINIMUM, Op.TILE_MINIMUMS, "pl.minimum"),
    "pl.tensor.add": _binary(Op.TILE_ADD, Op.TILE_ADDS, "pl.tensor.add"),
    "pl.tensor.sub": _binary(Op.TILE_SUB, Op.TILE_ADDS, "pl.tensor.sub", negate=True),
    "pl.tensor.mul": _binary(Op.TILE_MUL, Op.TILE_MULS, "pl.tensor.mul"),
    "pl.tensor.maximum": _binary(Op.TILE_MAXIMUM, Op.TILE_MAXIMUMS, "pl.tensor.maximum"),
    # pypto's tensor-scalar spellings (tensor_ops.py adds / subs / muls): the same rules with a scalar rhs
    "pl.tensor.adds": _binary(Op.TILE_ADD, Op.TILE_ADDS, "pl.tensor.adds"),
    "pl.tensor.subs": _binary(Op.TILE_SUB, Op.TILE_ADDS, "pl.tensor.subs", negate=True),
    "pl.tensor.muls": _binary(Op.TILE_MUL, Op.TILE_MULS, "pl.tensor.muls"),
    "pl.tensor.minimum": _binary(Op.TILE_MINIMUM, Op.TILE_MINIMUMS, "pl.tensor.minimum"),
    **_MATH_OPS,
    "pl.min": _scalar_minmax(BinOpKind.MIN, min, "pl.min"),
    "pl.max": _scalar_minmax(BinOpKind.MAX, max, "pl.max"),
    # pypto's pl.tile.min / max are its scalar min / max (tile_ops.py), not a tile-tile op
    "pl.tile.min": _scalar_minmax(BinOpKind.MIN, min, "pl.tile.min"),
    "pl.tile.max": _scalar_minmax(BinOpKind.MAX, max, "pl.tile.max"),
    "pl.const": _const,
    "pl.cast": _cast_rule("input"),
    "pl.read": _read_rule("pl.read", ("src", "offset")),
    "pl.write": _write_rule("pl.write", ("dst", "offset", "value")),
    "pl.tensor.read": _read_rule("pl.tensor.read", ("tensor", "indices")),
    "pl.tensor.write": _write_rule("pl.tensor.write", ("tensor", "indices", "value")),
    "pl.tile.read": _read_rule("pl.tile.read", ("tile", "indices")),
    "pl.tile.write": _write_rule("pl.tile.write", ("tile", "indices", "value")),
    "pl.slice": _slice("pl.slice", "input"),
    "pl.tensor.slice": _slice("pl.tensor.slice", "tensor"),
    "pl.tile.slice": _slice("pl.tile.slice", "tile"),
    "pl.concat": _concat("pl.concat"),
    "pl.tensor.concat": _concat("pl.tensor.concat"),
    "pl.tile.transpose_view": _transpose_view,
    "pl.cmp": _cmp("pl.cmp"),
    "pl.tensor.cmp": _cmp("pl.tensor.cmp"),
    "pl.tile.cmp": _cmp("pl.tile.cmp"),
    "pl.tile.cmps": _cmp("pl.tile.cmps"),
    "pl.tile.sel": _sel("pl.tile.sel"),
    "pl.sel": _sel("pl.sel"),
    "pl.cmps": _cmp("pl.cmps"),
    "pl.create_l1": _create_l1("pl.create_l1"),
    "pl.tensor.create_l1": _create_l1("pl.tensor.create_l1"),
    "pl.gather_row": _gather_row("pl.gather_row", "dst"),
    "pl.tensor.gather_row": _gather_row("pl.tensor.gather_row", "acc"),
    "pl.tile.gather_row": _gather_row("pl.tile.gather_row", "dst"),
    "pl.tile.concat": _concat("pl.tile.concat"),
    "pl.assemble": _assemble("pl.assemble"),
    "pl.tensor.assemble": _assemble("pl.tensor.assemble"),
    "pl.tile.assemble": _tile_assemble,
    "pl.tensor.dim": _dim("pl.tensor.dim"),
    "pl.dim": _dim("pl.dim"),
    "pl.tensor.cast": _cast_rule("input"),
    "pl.tile.cast": _cast_rule("tile"),
    "pl.yield_": _yield,
    "pld.world_size": _world_size,
    "pld.get_comm_ctx": _comm_ctx,
    "pld.rank": _rank,
    "pld.nranks": _nranks,
    "pld.system.notify": _notify,
    "pld.system.wait": _wait,
    "pld.tile.remote_load": _remote_load,
    "pld.tile.remote_store": _remote_store("pld.tile.remote_store", "src_tile", tensor_level=False),
    "pld.tensor.remote_store": _remote_store("pld.tensor.remote_store", "src", tensor_level=True),
    "pld.remote_store": _remote_store("pld.remote_store", "src", tensor_level=None),
    "pld.tensor.put": _transfer(get=False),
    "pld.tensor.get": _transfer(get=True),
    **{name: _collective(name, *spec) for name, spec in COLLECTIVE_PARAMS.items()},
})

TILE_ALIASES: Mapping[str, str] = MappingProxyType({
    "load": "pl.load", "store": "pl.store", "add": "pl.add", "sub": "pl.sub", "mul": "pl.mul",
    "maximum": "pl.maximum", "minimum": "pl.minimum", "adds": "pl.add", "subs": "pl.sub", "muls": "pl.mul",
})
"""``pl.tile.<name>``: pypto's tile-op module spells the unified tile ops so."""

_VIEW_RULES = frozenset({"pl.load", "pl.store", "pl.read", "pl.write", "pl.tensor.read", "pl.tensor.write", "pl.slice",
                         "pl.tensor.slice", "pl.assemble", "pl.tensor.assemble", "pl.tensor.dim", "pl.dim", "pl.reshape",
                         "pl.tensor.reshape", "pl.prefetch.async_prefetch", "pl.gather_row",
                         "pl.tensor.gather_row", "pl.tile.gather_row", "pl.tensor.view"})
VIEW_OPS = _VIEW_RULES | {f"pl.tile.{name}" for name, unified in TILE_ALIASES.items() if unified in _VIEW_RULES}
"""The ops whose rules take a tensor view (a slice passed as a tensor) as it is, reading or writing its base
at the view's offsets (``pl.tile.load`` is ``pl.load``'s rule, so it is one of them); any other op is given the
view loaded where it is used (``DeviceTranslator``)."""

DEVICE_OPS: Mapping[str, Rule] = MappingProxyType({
    **_OPS, **{f"pl.tile.{name}": _OPS[unified] for name, unified in TILE_ALIASES.items()}})
"""Every device-level DSL op; a name missing here is reported as unsupported at its line."""

__all__ = ["COLLECTIVE_PARAMS", "DEVICE_OPS", "TILE_ALIASES", "VIEW_OPS", "collective", "is_ir", "lane_count"]
