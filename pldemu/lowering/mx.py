"""tile.tquant_mx: packed MXFP8 quantisation lowered to tile.tquant_mx_raw + tile.tmov_x2zz (spec rule).

Step by step (the spec's "Algorithm (tile.tquant_mx rule)", geometry from ir/mx_signatures.py):

    axis 0 only: src_t = tile.transpose(src, 0, 1)                     [N, K] -> [K, N]
    max, scaling = tile.create(aux, dtype=src, mem=Vec)                write-only workspaces, Vec stamped
                   (+ tile.set_validshape to the group count when the axis-1 row is padded)
    raw  = tile.tquant_mx_raw(src, max, scaling, dtype, group_axis)   -> (int8 dst, uint8 exp)
    dst  = tuple.get_item(raw, index=0); exp = tuple.get_item(raw, index=1)
    quant = tile.reinterpret_view(dst, dtype=fp8e4m3fn)                 zero-copy FP8 data alias
    tmp  = tile.create([1, roundup(tmp_bytes, 32)], dtype=uint8, mem=Vec)
    zz   = tile.tmov_x2zz(exp, tmp, group_axis, dst_rows, dst_cols)    ND->ZZ (axis 1) / DN->ZZ (axis 0)
    scale = tile.reinterpret_view(zz, dtype=fp8e8m0)                    E8M0 scale alias
    axis 0 only: scale = tile.transpose_view(scale)                   ZZ [N, K/32] -> NN [K/32, N]
    target = tuple.make(quant, scale)

This pass runs before memory-space inference, so every scratch ``tile.create`` stamps ``mem=Vec``
itself. tquant_mx_raw / tmov_x2zz are not composites, so the pass stays idempotent; the raw call's write
effects on max / scaling (ir/signatures.py ``writes``) keep it alive when a public result is unused.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import MemorySpace
from pldemu.ir.mx_signatures import MxGeometry, mx_geometry
from pldemu.ir.nodes import Arg, Assign, AttrValue, Call, Const, ListExpr, TileType, Var
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.lowering.common import Lowered, LoweringContext


class _Emit:
    """Binds each step to a fresh temporary named from the call's target."""

    def __init__(self, fb: FunctionBuilder, base: str) -> None:
        self.fb, self.base = fb, base

    def bind(self, role: str, op: Op, args: list[Arg], attrs: dict[str, AttrValue] | None = None) -> Var:
        call = make_call(op, args, attrs or {})
        var = Var(self.fb.temp(self.base, role), call.type)
        self.fb.emit(Assign(var, call))
        return var

    def workspace(self, role: str, dtype: DType, shape: tuple[int, int], valid: tuple[int, int]) -> Var:
        dims = ListExpr(tuple(Const(d) for d in shape))
        var = self.bind(role, Op.TILE_CREATE, [dims], {"dtype": dtype, "mem": MemorySpace.Vec})
        if valid != shape:
            var = self.bind(f"{role}_valid", Op.TILE_SET_VALIDSHAPE, [var, ListExpr(tuple(Const(v) for v in valid))])
        return var


def _source(em: _Emit, call: Call) -> Var:
    arg = call.args[0]
    assert isinstance(arg, (Var, Call))
    if isinstance(arg, Var):
        return arg
    var = Var(em.fb.temp(em.base, "src"), arg.type)
    em.fb.emit(Assign(var, arg))
    return var


def _scale(em: _Emit, g: MxGeometry, exp: Var) -> Var:
    tmp = em.workspace("x2zz_tmp", DType.UINT8, (1, g.tmp_bytes), (1, g.tmp_bytes))
    attrs: dict[str, AttrValue] = {"group_axis": g.axis}
    if g.axis == 1:
        attrs.update(dst_rows=g.group_rows, dst_cols=g.group_cols)
    zz = em.bind("exp_zz", Op.TILE_TMOV_X2ZZ, [exp, tmp], attrs)
    scale = em.bind("scale", Op.TILE_REINTERPRET_VIEW, [zz], {"dtype": DType.FP8E8M0})
    return em.bind("scale_nn", Op.TILE_TRANSPOSE_VIEW, [scale]) if g.axis == 0 else scale


def lower_tile_tquant_mx(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """tile.tquant_mx(src, dtype, group_axis) -> tuple.make(fp8 quant, e8m0 scale) (module docstring)."""
    em = _Emit(fb, ctx.target or "tq")
    src = _source(em, call)
    assert isinstance(src.type, TileType)
    axis = call.attr("group_axis")
    assert isinstance(axis, int)
    g = mx_geometry(src.type, axis)
    if axis == 0:
        src = em.bind("src_t", Op.TILE_TRANSPOSE, [src, Const(0), Const(1)])
    dtype = src.type.dtype if isinstance(src.type, TileType) else DType.FP32
    aux = g.workspace_shape(dtype)
    ws_max = em.workspace("max", dtype, aux, g.exp_shape)
    ws_scaling = em.workspace("scaling", dtype, aux, g.exp_shape)
    raw = em.bind("raw", Op.TILE_TQUANT_MX_RAW, [src, ws_max, ws_scaling], dict(call.attrs))
    dst = em.bind("dst", Op.TUPLE_GET_ITEM, [raw], {"index": 0})
    exp = em.bind("exp", Op.TUPLE_GET_ITEM, [raw], {"index": 1})
    quant = em.bind("quant", Op.TILE_REINTERPRET_VIEW, [dst], {"dtype": DType.FP8E4M3FN})
    scale = _scale(em, g, exp)
    note = (f"MXFP8 axis {axis}: {g.groups} groups, workspaces {dtype.value}{list(aux)}, "
            f"x2zz tmp {g.tmp_bytes} B")
    return Lowered(make_call(Op.TUPLE_MAKE, [quant, scale]), Const(0), note=note)


__all__ = ["lower_tile_tquant_mx"]
