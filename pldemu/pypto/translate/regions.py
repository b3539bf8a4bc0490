"""Tensor regions in a device body: slices, slice assignment, ``pl.assemble``, scalar subscripts, ``pl.tensor.dim``.

pypto's ConvertTensorToTileOps lowers these inside an InCore body onto tile loads and stores, and a
window is there just this rank's local memory (pypto #1694):

- ``tensor.slice`` (``pl.slice``, ``pl.tensor.slice``, ``t[a:b, c:d]``) of a tensor is a ``tile.load``
  of the region, where the slice is made; a scalar-indexed axis (``t[i, a:b]``) is dropped from the
  value's rank (pypto reshapes the loaded tile; pldemu loads from a ``tensor.view`` that folds the
  leading indexed axes into the first kept one, the same cells);
- ``t[a:b, c:d] = v`` is ``t = tensor.assemble(t, v, [a, c])``, and ``tensor.assemble`` of a tile into a
  tensor is a ``tile.store`` (a tensor source is loaded whole first);
- an all-scalar full-rank subscript ``t[i, j]`` is ``tensor.read``;
- a tensor operand of a tensor-level op is loaded whole (:func:`on_core`);
- at the orchestration level (outside a kernel) a slice is pypto's view, not a load: a :class:`TensorView`,
  the base tensor's region, which a tensor parameter of a called function takes as its tensor (pypto's
  InlineFunctions substitutes the argument for the parameter), and whose reads and writes are the base's at
  the view's offsets; an op that takes it as a value loads it where it is used (:func:`load_view`). A slice
  with ``valid_shape=`` is a view carrying that valid shape (pypto's TensorView ``valid_shape``): a read
  through it is narrowed to the part of the window inside it (:func:`window_valid`).

Extents must be static (a tile's shape is); ``t[r:r + R]`` with a run-time ``r`` has the static extent
``R`` (the bounds are subtracted as linear forms, as pypto's simplifier folds them).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AtomicType, CastMode, MemorySpace
from pldemu.ir.nodes import (
    BinOp,
    BinOpKind,
    Const,
    Expr,
    TensorType,
    TileType,
    Var,
    as_expr,
    binop,
    eval_nr,
    format_expr,
    static_int,
)
from pldemu.pypto.capture import Kind
from pldemu.pypto.translate.level import DeviceLevel, Window
from pldemu.pypto.types import SymInt


@dataclasses.dataclass(frozen=True)
class Region:
    """A box of a tensor in its own coordinates: full-rank ``offsets`` (ints or IR scalars) and static
    ``extents``; ``drop`` are the axes indexed by a scalar (extent 1), absent from the value's rank."""

    offsets: tuple[Any, ...]
    extents: tuple[int, ...]
    drop: tuple[int, ...] = ()

    @property
    def kept(self) -> list[int]:
        """The extents of the axes the value keeps."""
        return [e for i, e in enumerate(self.extents) if i not in self.drop]


@dataclasses.dataclass(frozen=True)
class TensorView:
    """pypto's ``tensor.slice`` made at the orchestration level: a view of ``region`` of the tensor ``base``
    (no dropped axes: a slice dropping leading axes is a view of the base seen with them folded), a tensor of
    the region's extents to the code that takes it."""

    base: Var
    region: Region
    valid: tuple[Any, ...] | None = None
    """The valid extents (pypto's TensorView ``valid_shape``, one per axis of the view: ints or IR scalars,
    each within the extent); None: fully valid."""

    @property
    def name(self) -> str:
        """What messages call it."""
        return f"{self.base.name}[view]"

    def whole(self) -> TensorView:
        """The view fully valid: what a kernel's tensor parameter is (its type is the annotation's, no
        valid shape: pypto's pl.jit specializer builds it from the argument's shape and dtype only)."""
        return dataclasses.replace(self, valid=None)

    @property
    def dtype(self) -> DType:
        """The base's element type."""
        return _ttype(self.base).dtype


def in_kernel(tr: DeviceLevel) -> bool:
    """In a kernel (an InCore function, a ``pl.at`` / ``pl.spmd`` task, what they inline), where pypto's
    ConvertTensorToTileOps makes tensor ops tile ops; else at the orchestration level."""
    return bool(tr.emit.tasks.depth) or tr.fn.kind is Kind.INCORE


def based(t: Var | TensorView, region: Region) -> tuple[Var, Region]:
    """The tensor a region of ``t`` lies in and the region there: a view's region moved by its offsets
    into its base (what is read or written, bounds-checked against the view before), a tensor's as it is."""
    if not isinstance(t, TensorView):
        return t, region
    offsets = tuple(o + p if isinstance(o, int) and isinstance(p, int) else binop(BinOpKind.ADD, as_expr(o), as_expr(p))
                    for o, p in zip(t.region.offsets, region.offsets, strict=True))
    return t.base, Region(offsets, region.extents, region.drop)


def load_view(tr: DeviceLevel, view: TensorView, node: ast.AST) -> Var:
    """A view taken as a value by an op: its region loaded where it is used (pypto reads through the view),
    only its valid box read."""
    return load_region(tr, view.base, view.region, node, view.valid)


def window_valid(t: Any, offsets: Sequence[Any], extents: Sequence[int], requested: Sequence[Any] | None
                 ) -> list[Any] | None:
    """The valid extents of a read of the window ``offsets`` / ``extents`` of ``t`` (pypto's
    InferWindowReadValidShape, type_inference.cpp): per axis the smaller of ``requested`` and the part of
    the source's valid box under the window, ``min(max(valid - offset, 0), extent)``. A source that is
    fully valid (not a view with ``valid``), or a window of another rank, gives ``requested`` as it is."""
    have = t.valid if isinstance(t, TensorView) else None
    if have is None or len(offsets) != len(have) or len(extents) != len(have):
        return None if requested is None else list(requested)
    out: list[Any] = []
    for axis, (v, off, ext) in enumerate(zip(have, offsets, extents, strict=True)):
        avail = _fold(min, BinOpKind.MIN, _fold(max, BinOpKind.MAX, _fold(operator.sub, BinOpKind.SUB, v, off), 0),
                      ext)
        out.append(avail if requested is None else _fold(min, BinOpKind.MIN, requested[axis], avail))
    return out


def _fold(f: Any, kind: BinOpKind, a: Any, b: Any) -> Any:
    """``f(a, b)`` of two ints, else the IR scalar ``a kind b`` (folded where both are constants)."""
    x, y = _static(a), _static(b)
    if x is not None and y is not None:
        return int(f(x, y))
    return binop(kind, as_expr(a), as_expr(b))


def tensor_region(tr: DeviceLevel, t: Var | TensorView, region: Region, node: ast.AST,
                  valid: Sequence[Any] | None = None) -> Var | TensorView:
    """``tensor.slice`` of a tensor or view: in a kernel a load of the region; at the orchestration level a
    view (pypto's; dropped leading axes folded into the first kept one; one dropping other axes is loaded
    there too). ``valid``: ``valid_shape=``; either way narrowed by a view's own valid box under the region."""
    valid = window_valid(t, region.offsets, region.extents, valid)
    base, at = based(t, region)
    if in_kernel(tr) or not _viewable_drop(tr, base, at):
        return load_region(tr, base, at, node, valid)
    if at.drop:
        return _dropped_view(tr, base, at, node, valid)
    return TensorView(base, at, None if valid is None else tuple(valid))


def _viewable_drop(tr: DeviceLevel, base: Var, at: Region) -> bool:
    """Whether the axes a slice drops (``x[i]``, ``x[i, a:b]``) are leading ones of a contiguous tensor of
    static dims with an axis kept: the view is then a box of the base seen with those axes folded into the
    first kept one (pldemu's views are boxes)."""
    if not at.drop:
        return True
    k = len(at.drop)
    return (at.drop == tuple(range(k)) and k < len(at.extents) and _ttype(base).strides is None
            and None not in extents(tr, base))


def _dropped_view(tr: DeviceLevel, base: Var, at: Region, node: ast.AST, valid: Sequence[Any] | None
                  ) -> TensorView:
    """``x[i, ...]`` at the orchestration level (pypto's ``tensor.slice`` dropping leading axes, a view):
    ``x`` seen as ``[prod(dims[:k + 1]), *dims[k + 1:]]``, the box at the folded offset (``valid`` at the
    kept axes, as a load drops the unit axes' entries)."""
    k, shape = len(at.drop), dims(tr, base, node)
    lead: Any = 0
    for axis in range(k + 1):
        lead = at.offsets[axis] if axis == 0 else _axpy(lead, shape[axis], at.offsets[axis])
    flat = tr.fb.pld.tensor.view(base, [math.prod(shape[:k + 1]), *shape[k + 1:]])
    return TensorView(flat, Region((lead, *at.offsets[k + 1:]), at.extents[k:]),
                      None if valid is None else tuple(valid[k:]))


def _axpy(a: Any, n: int, b: Any) -> Any:
    """``a * n + b`` folded where both are ints, an IR scalar otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        return a * n + b
    return binop(BinOpKind.ADD, binop(BinOpKind.MUL, as_expr(a), Const(n)), as_expr(b))


def reshape_view(tr: DeviceLevel, view: TensorView, shape: list[int], node: ast.AST) -> TensorView:
    """``pl.reshape`` of a view (pypto's is zero copy): pldemu's views are boxes, so the view must be one
    contiguous run of its base (leading axes of one element, then one narrowed axis, then whole axes), which
    is then a box of the base seen with the new trailing dims, starting at a whole row of them."""
    have, ext, offs = dims(tr, view.base, node), view.region.extents, view.region.offsets
    if math.prod(shape) != math.prod(ext):
        raise tr.error(f"pl.reshape: {view.name} has {math.prod(ext)} elements ({list(ext)}), the shape "
                       f"{shape} {math.prod(shape)}", node)
    tail, total = math.prod(shape[1:]), math.prod(have)
    k = next((i for i, e in enumerate(ext) if e != 1), len(ext) - 1)  # the one narrowed axis of the run
    strides = [math.prod(have[i + 1:]) for i in range(k + 1)]
    contiguous = ext[k + 1:] == have[k + 1:] and all(_static(o) == 0 for o in offs[k + 1:])
    if (not contiguous or total % tail or not all(_whole_rows(o, st, tail) for o, st in zip(offs[:k + 1], strides, strict=True))
            or _ttype(view.base).strides is not None):
        raise tr.error(f"pl.reshape of a view of {view.base.name} (a slice passed as a tensor) to {shape}: pldemu "
                       "reshapes a view only when its cells are one run of its base (leading axes of one element, "
                       "one narrowed axis, whole axes after it) starting at a whole row of the new shape", node)
    lead = _rows_at(offs[0], strides[0], tail)
    for o, st in zip(offs[1:k + 1], strides[1:], strict=True):
        lead = binop(BinOpKind.ADD, as_expr(lead), as_expr(_rows_at(o, st, tail)))
    flat = tr.fb.pld.tensor.view(view.base, [total // tail, *shape[1:]])
    return TensorView(flat, Region((lead, *[0] * (len(shape) - 1)), tuple(shape)))


def _rows_at(offset: Any, stride: int, tail: int) -> Any:
    """The row of ``tail`` cells that cell ``offset * stride`` begins (a whole row: :func:`_whole_rows`)."""
    start = _static(offset)
    if start is not None:
        return start * stride // tail
    if stride % tail == 0:
        return binop(BinOpKind.MUL, as_expr(offset), Const(stride // tail))
    # exact: every term of the offset times the stride is a multiple of the new row (_whole_rows)
    return binop(BinOpKind.FLOORDIV, binop(BinOpKind.MUL, as_expr(offset), Const(stride)), Const(tail))


def _whole_rows(start: Any, row: int, tail: int) -> bool:
    """Whether ``start`` rows of ``row`` cells begin a whole row of ``tail`` cells for every value of its
    run-time atoms (``layer * D`` of a flat weight reshaped to rows of ``D``)."""
    terms, constant = _linear(start)
    return all(k * row % tail == 0 for k in (*terms.values(), constant))


def is_tensor(v: Any) -> bool:
    """A tensor (a window included) as opposed to a tile or a scalar."""
    return isinstance(v, Var) and isinstance(v.type, TensorType)


def _ttype(t: Var) -> TensorType:
    assert isinstance(t.type, TensorType)
    return t.type


def dims(tr: DeviceLevel, t: Var | TensorView, node: ast.AST) -> tuple[int, ...]:
    """The tensor's dims at this job's rank count (``NR`` evaluated); a tile's static shape; a view's extents.
    A run-time extent (an Orchestration ``pl.create_tensor`` sized by a scalar) is refused: the caller needs it
    static."""
    out = []
    for axis, v in enumerate(extents(tr, t)):
        if v is None:
            assert isinstance(t, Var)  # a view's extents are static
            raise tr.error(f"{t.name}: dim {axis} ({format_expr(_ttype(t).shape[axis])}) is known only at run "
                           "time; this needs a static extent (slice the tensor with explicit bounds)", node)
        out.append(v)
    return tuple(out)


def extents(tr: DeviceLevel, t: Var | TensorView) -> tuple[int | None, ...]:
    """The tensor's dims at this job's rank count; None for an extent known only at run time (checked
    there, by the load or store that reaches it); a view's extents."""
    if isinstance(t, TensorView):
        return t.region.extents
    if isinstance(t.type, TileType):
        return t.type.shape
    return tuple(eval_nr(d, tr.emit.nranks) for d in _ttype(t).shape)


TILE_ALIGN_BYTES = 32
"""ptoas's alignment of a tile's row (a column, for a column-major tile) in bytes."""


def aligned_tile(tr: DeviceLevel, what: str, shape: list[int], dtype: DType, node: ast.AST) -> None:
    """The tile ``what`` creates passes ptoas's ``pto.alloc_tile`` verifier (PTOAS lib/PTO/IR/PTO.cpp,
    verifyTileBufLayoutConstraints; the TileConfig static_assert of pto-isa's pto_tile.hpp): a Vec tile is
    row-major, so its row (cols x element bytes) is 32-byte aligned, except a ``[R, 1]`` tile with R > 1,
    which pypto lays out column-major (tile_view_semantics.h, InferImplicitTileLayoutFromShape), so its
    column (R x element bytes) is. Every tile counts, whatever it is loaded from; its physical shape,
    not its valid shape."""
    rows, cols = (1, shape[0]) if len(shape) == 1 else (math.prod(shape[:-1]), shape[-1])
    col_major = len(shape) == 2 and cols == 1 and rows > 1
    extent, layout, size = ((rows, "col-major", "column byte size (rows * sizeof(dtype))") if col_major
                            else (cols, "row-major", "row byte size (cols * sizeof(dtype))"))
    nbytes = extent * dtype.itemsize
    if nbytes % TILE_ALIGN_BYTES:
        raise tr.error(f"{what} of a {list(shape)} {dtype.value} tile: ptoas refuses it: 'pto.alloc_tile' op "
                       f"expects result {layout} none_box tile {size} to be {TILE_ALIGN_BYTES}-byte aligned, "
                       f"but got {nbytes} bytes (read single cells with pl.read / pl.write, or load a 32-byte "
                       "aligned tile and narrow it with valid_shape=)", node)


def on_core(tr: DeviceLevel, v: Any, node: ast.AST, op: str = "a tensor-level op") -> Any:
    """A tensor operand of a tensor-level op, loaded whole into a tile (pypto's ConvertTensorToTileOps
    keeps the value on core); a tile or scalar passes through."""
    if isinstance(v, TensorView):
        return load_view(tr, v, node)
    if not is_tensor(v):
        return v
    shape = list(dims(tr, v, node))
    aligned_tile(tr, f"{op}'s whole-tensor load", shape, _ttype(v).dtype, node)
    tile = tr.fb.pld.tile.load(v, [0] * len(shape), shape, hint=f"{v.name}_tile")
    tr.emit.tensor_slices.add(tile.name)
    return tile


def tensor_level(tr: DeviceLevel, v: Any) -> bool:
    """A tensor, or a tile that is one to pypto (a tensor's slice or a tensor-level op's result, loaded on
    core where it is made): pypto's dispatch gives it the tensor form of an op (``b_trans=``, synthesised
    scratch tiles)."""
    return is_tensor(v) or (isinstance(v, Var) and v.name in tr.emit.tensor_slices)


def tensor_dim(tr: DeviceLevel, t: Any, axis: Any, node: ast.AST) -> int | Expr:
    """``pl.tensor.dim(t, axis)``: the static extent; a dim that is the rank count is ``NR``'s
    :class:`SymInt`, as ``pld.world_size()`` is; a view's extent; a run-time extent its scalar expression."""
    if isinstance(t, TensorView):
        rank = len(t.region.extents)
        if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
            raise tr.error(f"pl.tensor.dim: axis must be a static int in [-{rank}, {rank}) for {t.name} ({rank} "
                           f"dims), got {axis!r}", node)
        return t.region.extents[axis]
    if not is_tensor(t):
        raise tr.error(f"pl.tensor.dim: tensor must be a tensor, got {t!r}", node)
    shape = _ttype(t).shape
    if isinstance(axis, bool) or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        raise tr.error(f"pl.tensor.dim: axis must be a static int in [-{len(shape)}, {len(shape)}) for "
                       f"{t.name} ({len(shape)} dims), got {axis!r}", node)
    d = shape[axis]
    value = extents(tr, t)[axis]
    if value is None:
        return d  # a run-time extent: its scalar expression, as pypto's tensor.dim of a dynamic dim
    return value if static_int(d) is not None else SymInt(value, d)


# -- regions ----------------------------------------------------------------------------------------


def subscript_region(tr: DeviceLevel, t: Var | TensorView, items: Sequence[Any], node: ast.AST) -> Region:
    """The region of ``t[items]`` (numpy's rules, as pypto's parser: a scalar index drops its axis, a
    slice keeps it, missing trailing indices are ``:``); each item a ``slice`` or a scalar."""
    shape = extents(tr, t)
    if len(items) > len(shape):
        raise tr.error(f"{t.name} has {len(shape)} dims, the subscript {len(items)} indices", node)
    if None in shape[len(items):]:
        dims(tr, t, node)  # raises: an axis the subscript leaves whole is run-time sized
    offsets: list[Any] = []
    widths: list[int] = []
    drop: list[int] = []
    for axis, item in enumerate(items):
        if isinstance(item, slice):
            lower = 0 if item.start is None else item.start
            upper = (_run_time_dim(t, axis) if shape[axis] is None else shape[axis]) if item.stop is None else item.stop
            offsets.append(lower)
            widths.append(static_extent(tr, upper, lower, node))
        else:
            offsets.append(item)
            widths.append(1)
            drop.append(axis)
    offsets += [0] * (len(shape) - len(items))
    widths += [d for d in shape[len(items):] if d is not None]
    region = Region(tuple(offsets), tuple(widths), tuple(drop))
    check_bounds(tr, t, region, node)
    return region


def _run_time_dim(t: Var | TensorView, axis: int) -> Any:
    """The scalar expression of a run-time extent (only a tensor's: a view's extents are static)."""
    assert isinstance(t, Var)
    return _ttype(t).shape[axis]


def check_bounds(tr: DeviceLevel, t: Var | TensorView, region: Region, node: ast.AST, clamp: bool = False) -> None:
    """A region provably outside ``t`` is an error (pypto rejects it too); a run-time offset, or an axis of a
    run-time extent, is checked when the load or store runs. ``clamp``: the end may run off the tensor
    (pypto's ``clamp=True``)."""
    shape = extents(tr, t)
    if len(region.offsets) != len(shape) or len(region.extents) != len(shape):
        raise tr.error(f"{t.name} has {len(shape)} dims, the region {len(region.offsets)} offsets and "
                       f"{len(region.extents)} extents", node)
    for axis, (off, ext, dim) in enumerate(zip(region.offsets, region.extents, shape, strict=True)):
        if ext <= 0:
            raise tr.error(f"{t.name}: the extent of axis {axis} must be positive, got {ext}", node)
        start = _static(off)
        if dim is not None and start is not None and (start < 0 or start >= dim or (not clamp and start + ext > dim)):
            raise tr.error(f"{t.name}: axis {axis} region [{start}, {start + ext}) is outside its {dim} "
                           "elements", node)


def static_extent(tr: DeviceLevel, upper: Any, lower: Any, node: ast.AST) -> int:
    """``upper - lower`` folded to an int, also over run-time bounds (``r + R`` minus ``r``), through the
    scalar names bound to them (``end = d + 1``, ``x[d:end]``)."""
    (hi, hi_c), (lo, lo_c) = _linear(upper), _linear(lower)
    if any(hi.get(atom, 0) != lo.get(atom, 0) for atom in set(hi) | set(lo)):
        (hi, hi_c), (lo, lo_c) = _linear(_expanded(tr, upper)), _linear(_expanded(tr, lower))
    for atom in set(hi) | set(lo):
        if hi.get(atom, 0) != lo.get(atom, 0):
            raise tr.error(f"a slice extent must be static (a tile's shape is): {_show(upper)} - "
                           f"{_show(lower)} is not", node)
    return hi_c - lo_c


def _expanded(tr: DeviceLevel, v: Any, depth: int = 8) -> Any:
    """``v`` with each scalar name's variable replaced by the expression it was bound to (``Emit.lets``)."""
    if depth == 0:
        return v
    if isinstance(v, Var) and v in tr.emit.lets:
        return _expanded(tr, tr.emit.lets[v], depth - 1)
    if isinstance(v, BinOp):
        return dataclasses.replace(v, lhs=_expanded(tr, v.lhs, depth - 1), rhs=_expanded(tr, v.rhs, depth - 1))
    return v


def _static(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    return static_int(v) if isinstance(v, (Const, BinOp, Var)) else None


def _linear(v: Any) -> tuple[dict[Any, int], int]:
    """``v`` as ``sum(coefficient * atom) + constant`` over +, - and products with a constant."""
    n = _static(v)
    if n is not None:
        return {}, n
    if isinstance(v, BinOp) and v.op in (BinOpKind.ADD, BinOpKind.SUB):
        sign = 1 if v.op is BinOpKind.ADD else -1
        (a, ca), (b, cb) = _linear(v.lhs), _linear(v.rhs)
        terms = dict(a)
        for atom, c in b.items():
            terms[atom] = terms.get(atom, 0) + sign * c
        return terms, ca + sign * cb
    if isinstance(v, BinOp) and v.op is BinOpKind.MUL:
        (a, ca), (b, cb) = _linear(v.lhs), _linear(v.rhs)
        if not a or not b:
            scale, (terms, c) = (ca, (b, cb)) if not a else (cb, (a, ca))
            return {atom: k * scale for atom, k in terms.items()}, c * scale
    return {v: 1}, 0


def _show(v: Any) -> str:
    return format_expr(v) if isinstance(v, (Var, Const, BinOp)) else repr(v)


# -- loads and stores -------------------------------------------------------------------------------


def _collapsed(tr: DeviceLevel, t: Var, region: Region, node: ast.AST) -> tuple[Var, list[Any]]:
    """The tensor and offsets a load or store of ``region`` uses: leading scalar-indexed axes folded into
    the first kept axis of a ``tensor.view`` (row-major, so the same cells)."""
    k = len(region.drop)
    if not k:
        return t, list(region.offsets)
    if region.drop != tuple(range(k)):
        raise tr.error(f"{t.name}: pldemu drops only leading scalar-indexed axes (t[i, a:b]), not axes "
                       f"{list(region.drop)} of {len(region.extents)}", node)
    shape = _ttype(t).shape
    row = as_expr(region.offsets[0])
    for axis in range(1, k + 1):
        row = row * shape[axis] + region.offsets[axis]
    view = tr.fb.pld.tensor.view(t, [functools.reduce(operator.mul, shape[:k + 1]), *shape[k + 1:]])
    return view, [row, *region.offsets[k + 1:]]


def load_region(tr: DeviceLevel, t: Var, region: Region, node: ast.AST, valid: Sequence[Any] | None = None
                ) -> Var:
    """``tensor.slice`` in a kernel: a ``tile.load`` of the region (``valid``: full-rank valid extents)."""
    view, offsets = _collapsed(tr, t, region, node)
    kept_valid = None if valid is None else [v for i, v in enumerate(valid) if i not in region.drop]
    tile = tr.fb.pld.tile.load(view, offsets, region.kept, kept_valid, hint=tr.hint(f"{t.name}_slice"))
    tr.emit.tensor_slices.add(tile.name)
    return tile


def slice_tile(tr: DeviceLevel, tile: Var, region: Region, node: ast.AST, valid: Sequence[Any] | None = None) -> Var:
    """A slice of a tile (a subscript or ``pl.slice``): pypto's ``tile.slice`` of the window, narrowed to
    ``valid`` (``pl.slice``'s ``valid_shape=``, at the window's rank) where given, its scalar-indexed unit axes
    then dropped (a reshape, as pypto's ``drop_dims`` erases them from the type)."""
    part = tr.fb.pld.tile.tile_slice(tile, list(region.extents), list(region.offsets),
                                     hint=tr.hint(f"{tile.name}_slice"))
    if valid is not None:
        part = tr.fb.pld.tile.set_validshape(part, _narrowed(tr, part, valid, node), hint=tr.hint(f"{tile.name}_slice"))
    if not region.drop:
        tr.windows[part] = Window(tile, region.offsets)
        return part
    return tr.fb.pld.tile.reshape(part, list(region.kept), hint=tr.hint(f"{tile.name}_slice"))


def assemble_tile(tr: DeviceLevel, dst: Var, items: Sequence[Any], value: Any, node: ast.AST) -> Var:
    """``t[a:b, c:d] = src`` of a tile: pypto's parser makes it ``t = tile.assemble(t, src, [a, c])`` (a new
    value, so other names keep the old one): a copy of ``t`` with ``src``'s valid box written in at the offset.
    The source is a tile of the window's extents (a scalar-indexed axis is 1; pypto's parser checks the same)."""
    region = subscript_region(tr, dst, items, node)
    what = f"{ast.unparse(node)} = ..."
    if not (isinstance(value, Var) and isinstance(value.type, TileType)):
        kind = "ScalarType" if isinstance(value, (Const, BinOp, Var, int, float)) else type(value).__name__
        raise tr.error(f"pypto refuses it: Subscript-write source must also be a tile, got {kind} ({what}; an "
                       "element write is pl.tile.write(t, [i, j], value))", node)
    src, t = value.type, dst.type
    assert isinstance(t, TileType)
    valid = tuple(static_int(v) for v in src.valid_shape) if src.valid_shape is not None else src.shape
    fits = len(src.shape) == len(t.shape) and (region.extents == src.shape or all(
        v is None or v == e for v, e in zip(valid, region.extents, strict=True)))
    if not fits or src.dtype != t.dtype:
        raise tr.error(f"{what}: the source must be a {t.dtype.value} tile of the window's extents "
                       f"{list(region.extents)}, got {src.dtype.value} {list(src.shape)}", node)
    whole = tr.fb.pld.tile.tile_slice(dst, list(t.shape), [0] * len(t.shape), hint=tr.hint(dst.name))
    tr.fb.pld.tile.assemble(whole, value, list(region.offsets))
    return whole


def _narrowed(tr: DeviceLevel, window: Var, requested: Sequence[Any], node: ast.AST) -> list[Any]:
    """``valid_shape=`` of a tile slice: per axis the smaller of the request and what the source is valid for
    under the window (pypto: it narrows, never widens); a request beyond the window is pypto's error."""
    t = window.type
    assert isinstance(t, TileType)
    if len(requested) != len(t.shape):
        raise tr.error(f"pypto refuses it: tile.slice requires valid_shape to have the same rank as the window, but "
                       f"got valid_shape rank {len(requested)} and window rank {len(t.shape)}", node)
    have = t.valid_shape or tuple(Const(d) for d in t.shape)
    out: list[Any] = []
    for axis, (want, ext, avail) in enumerate(zip(requested, t.shape, have, strict=True)):
        fixed = _static(want)
        if fixed is not None and fixed > ext:
            raise tr.error(f"pypto refuses it: tile.slice valid_shape {axis} is {fixed}, which exceeds the window "
                           f"extent {ext}; a valid region cannot be larger than the shape that holds it", node)
        bound = static_int(avail)
        if fixed is not None and bound is not None:
            out.append(min(fixed, bound))
        elif bound == ext:
            out.append(want)
        else:
            out.append(BinOp(BinOpKind.MIN, as_expr(want), as_expr(avail)))
    return out


def fixpipe(tr: DeviceLevel, tile: Var, dtype: DType) -> Var:
    """An FP32 accumulator (Acc) tile stored into an FP16 / BF16 tensor: converted on the way out, as the
    cube's FIXPIPE does (nearest, ties to even: pypto's docs on the Acc downcast); any other tile as it is."""
    t = tile.type
    if not (isinstance(t, TileType) and t.memory is MemorySpace.Acc and t.dtype is DType.FP32
            and dtype in (DType.FP16, DType.BF16)):
        return tile
    return tr.fb.pld.tile.cast(tile, dtype, hint=f"{tile.name}_out", mode=CastMode.RINT)


def store_region(tr: DeviceLevel, value: Any, t: Var, region: Region, node: ast.AST, what: str,
                 atomic: AtomicType = AtomicType.None_) -> None:
    """``tensor.assemble`` in a kernel: the value (a tile, or a tensor loaded whole) stored into the region
    (``atomic``: added into it element-wise)."""
    tile = on_core(tr, value, node)
    if not (isinstance(tile, Var) and isinstance(tile.type, TileType)):
        raise tr.error(f"{what}: the value must be a tensor or a tile, got {value!r}", node)
    tile = fixpipe(tr, tile, _ttype(t).dtype)
    tt = tile.type
    assert isinstance(tt, TileType)
    if tt.dtype != _ttype(t).dtype:
        raise tr.error(f"{what}: {t.name} is {_ttype(t).dtype.value}, the value {tt.dtype.value} "
                       "(pl.cast it first)", node)
    valid = tuple(_static(v) for v in tt.valid_shape) if tt.valid_shape is not None else None
    if list(tt.shape) != region.kept and (valid is None or list(valid) != region.kept):
        raise tr.error(f"{what}: the region of {t.name} is {region.kept}, the value {list(tt.shape)}", node)
    view, offsets = _collapsed(tr, t, region, node)
    tr.fb.pld.tile.store(tile, offsets, view, atomic=atomic)


__all__ = [
    "TILE_ALIGN_BYTES",
    "Region",
    "TensorView",
    "aligned_tile",
    "based",
    "check_bounds",
    "dims",
    "extents",
    "fixpipe",
    "in_kernel",
    "is_tensor",
    "load_region",
    "load_view",
    "on_core",
    "reshape_view",
    "static_extent",
    "store_region",
    "subscript_region",
    "tensor_dim",
    "tensor_region",
    "window_valid",
]
