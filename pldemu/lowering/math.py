"""tile.sin / tile.cos: FP32 Cody-Waite range reduction (4-part pi split) + degree-9 odd Horner polynomial.

Exactly the spec's recipe (LowerSinCos, parameterised on cos): each step is one primitive tile op on
FP32 tiles, so every intermediate rounds to FP32; each intermediate is a fresh variable named from the
call's target (one temporary counter per function, shared by every composite); the target itself is
bound by the pass to the final ``tile.mul`` as the LHS of the last assignment.

    sin: k = round(x / pi)       (cast ROUND, ties away)    t = x - k*pi             (4-part)
    cos: k = rint(x / pi + 0.5)  (cast RINT, ties even)     t = x - k*pi + pi/2      (PI_HALF_HEAD after
                                                             PI_C1, PI_HALF_TAIL after PI_C4)
    sign = floor(k/2)*4 - 2k + 1 = (-1)^k ;  out = sign * t * P(t^2),  P(u) = (((R0 u + R1) u + R2) u + R3) u + 1
"""

from __future__ import annotations

import struct

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import CastMode
from pldemu.ir.nodes import Assign, Call, Const, Expr, Var
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.lowering.common import Lowered, LoweringContext


def _f32(literal: str) -> float:
    """The FP32 value of a C++ ``...f`` literal, held exactly as a Python float: rounded to nearest
    (ties even) from its double, as ``numpy.float32(literal)`` does (struct keeps numpy out of the
    launcher; tests/lowering/test_sincos_constants.py checks every constant against numpy)."""
    return float(struct.unpack("<f", struct.pack("<f", float(literal)))[0])


PI_INV = _f32("0.31830988732818603515625")
PI_V2 = _f32("3.140625")
PI_C1 = _f32("0.0009670257568359375")
PI_C2 = _f32("6.2771141529083251953125e-7")
PI_C3 = _f32("1.21644916362129151821e-10")
PI_C4 = _f32("-1.0290623200529979163e-13")
PI_HALF_HEAD = _f32("1.57079637050628662109375")
PI_HALF_TAIL = _f32("-4.371139000189375e-8")
HALF, M4, NEG2, ONE = _f32("0.5"), _f32("4.0"), _f32("-2.0"), _f32("1.0")
R0 = _f32("2.604926501e-6")
R1 = _f32("-1.980894471e-4")
R2 = _f32("8.333049340e-3")
R3 = _f32("-1.666665792e-1")


class _Steps:
    """Emits one primitive per call, each bound to a fresh temporary named from the target."""

    def __init__(self, fb: FunctionBuilder, base: str) -> None:
        self.fb, self.base = fb, base

    def bind(self, role: str, op: Op, args: list[Expr], attrs: dict[str, object] | None = None) -> Var:
        call = make_call(op, args, attrs or {})  # type: ignore[arg-type]
        var = Var(self.fb.temp(self.base, role), call.type)
        self.fb.emit(Assign(var, call))
        return var

    def muls(self, role: str, t: Var, c: float) -> Var:
        return self.bind(role, Op.TILE_MULS, [t, Const(c, DType.FP32)])

    def adds(self, role: str, t: Var, c: float) -> Var:
        return self.bind(role, Op.TILE_ADDS, [t, Const(c, DType.FP32)])

    def cast(self, role: str, t: Var, dtype: DType, mode: CastMode) -> Var:
        return self.bind(role, Op.TILE_CAST, [t], {"dtype": dtype, "mode": mode})

    def sub(self, role: str, a: Var, b: Var) -> Var:
        return self.bind(role, Op.TILE_SUB, [a, b])

    def add(self, role: str, a: Var, b: Var) -> Var:
        return self.bind(role, Op.TILE_ADD, [a, b])

    def mul(self, role: str, a: Var, b: Var) -> Var:
        return self.bind(role, Op.TILE_MUL, [a, b])

    def minus_k_times(self, t: Var, k_f: Var, c: float, part: str) -> Var:
        return self.sub(f"t_{part}", t, self.muls(f"k_{part}", k_f, c))


def _lower_sin_cos(call: Call, fb: FunctionBuilder, ctx: LoweringContext, is_cos: bool) -> Lowered:
    arg = call.args[0]
    assert isinstance(arg, (Var, Call))
    st = _Steps(fb, ctx.target or ("cos" if is_cos else "sin"))
    # An inline operand is bound once: the recipe reads x three times.
    x = arg if isinstance(arg, Var) else _bind_value(fb, st, arg)
    p = st.muls("x_pi_inv", x, PI_INV)
    if is_cos:
        k_i = st.cast("k_i", st.adds("x_pi_inv_half", p, HALF), DType.INT32, CastMode.RINT)
    else:
        k_i = st.cast("k_i", p, DType.INT32, CastMode.ROUND)
    k_f = st.cast("k_f", k_i, DType.FP32, CastMode.None_)
    t = st.minus_k_times(x, k_f, PI_V2, "v2")
    t = st.minus_k_times(t, k_f, PI_C1, "c1")
    if is_cos:
        t = st.adds("t_half_head", t, PI_HALF_HEAD)
    t = st.minus_k_times(t, k_f, PI_C2, "c2")
    t = st.minus_k_times(t, k_f, PI_C3, "c3")
    t = st.minus_k_times(t, k_f, PI_C4, "c4")
    if is_cos:
        t = st.adds("t_half_tail", t, PI_HALF_TAIL)
    sign = _sign(st, k_f)
    t_p = st.mul("t_p", t, _horner(st, t))
    return Lowered(make_call(Op.TILE_MUL, [sign, t_p]), Const(0), note="FP32 Cody-Waite + Horner")


def _bind_value(fb: FunctionBuilder, st: _Steps, x: Expr) -> Var:
    var = Var(fb.temp(st.base, "x"), x.type)
    fb.emit(Assign(var, x))
    return var


def _sign(st: _Steps, k_f: Var) -> Var:
    """(-1)^k without a branch, in the spec's 6 ops: floor(k/2)*4 + k*(-2) + 1."""
    half_k = st.muls("half_k", k_f, HALF)
    floor_hk_i = st.cast("floor_hk_i", half_k, DType.INT32, CastMode.FLOOR)
    floor_hk_f = st.cast("floor_hk_f", floor_hk_i, DType.FP32, CastMode.None_)
    floor_x4 = st.muls("floor_x4", floor_hk_f, M4)
    neg2_k = st.muls("neg2_k", k_f, NEG2)
    sign_pre = st.add("sign_pre", floor_x4, neg2_k)
    return st.adds("sign", sign_pre, ONE)


def _horner(st: _Steps, t: Var) -> Var:
    """P(t^2) = (((R0 u + R1) u + R2) u + R3) u + 1 with u = t*t."""
    t2 = st.mul("t2", t, t)
    p = st.adds("p_r1", st.muls("p_r0", t2, R0), R1)
    p = st.adds("p_r2", st.mul("p_t2_r1", p, t2), R2)
    p = st.adds("p_r3", st.mul("p_t2_r2", p, t2), R3)
    return st.adds("p_one", st.mul("p_t2_r3", p, t2), ONE)


def lower_tile_sin(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """tile.sin(x): k by ROUND, 4-part reduction, sign, Horner."""
    return _lower_sin_cos(call, fb, ctx, is_cos=False)


def lower_tile_cos(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """tile.cos(x): k by RINT of x/pi + 0.5, reduction with the PI_HALF head/tail, sign, Horner."""
    return _lower_sin_cos(call, fb, ctx, is_cos=True)


__all__ = ["lower_tile_cos", "lower_tile_sin"]
