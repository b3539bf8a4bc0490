"""Every refusal of the tile ops, with its message: at build time (builder), at parse time, at lowering."""

from __future__ import annotations

import pytest

from pldemu.ir import Const, DType, ParseError, ProgramBuilder, parse_program
from pldemu.lowering import lower_composite_ops
from pldemu.lowering.backend import BACKENDS


def _fb(dtype: str = "fp32", shape: tuple[int, ...] = (16, 128), valid: list[int] | None = None):  # type: ignore[no-untyped-def]
    pb = ProgramBuilder("bad")
    src = pb.local("src", dtype, list(shape))
    fb = pb.function()
    t = fb.pld.tile.load(src, [0] * len(shape), list(shape), valid_shape=valid, hint="t")
    return pb, fb, fb.pld.tile, t


@pytest.mark.parametrize("fn", ["sin", "cos"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "int32"])
def test_sin_cos_are_fp32_only(fn: str, dtype: str) -> None:
    _, _, tile, t = _fb(dtype)
    with pytest.raises(ValueError, match=rf"tile.{fn} is FP32-only, but got input with dtype {dtype.upper()}\. "
                       rf"Cast the input to FP32 explicitly via tile.cast\(tile, dtype=fp32\) before applying "
                       rf"tile.{fn}\."):
        getattr(tile, fn)(t)


def test_parser_refuses_sin_on_fp16_with_the_same_message() -> None:
    text = ("program p {\n  local x: fp16[1, 32]\n  func main() {\n    t = tile.load(x, [0, 0], [1, 32])\n"
            "    s = tile.sin(t)\n  }\n}\n")
    with pytest.raises(ParseError, match=r"tile.sin is FP32-only, but got input with dtype FP16"):
        parse_program(text)


def test_same_dtype_cast_is_refused() -> None:
    _, _, tile, t = _fb()
    with pytest.raises(ValueError, match=r"tile.cast from fp32 to fp32: a same-dtype cast is not a valid operation"):
        tile.cast(t, "fp32")


def test_cast_mode_must_be_a_round_mode() -> None:
    _, _, tile, t = _fb()
    with pytest.raises(ValueError, match=r"mode.*one of None, RINT, ROUND, FLOOR, CEIL, TRUNC, ODD"):
        tile.cast(t, "int32", mode="NEAREST")


def test_cmp_type_is_required_and_named() -> None:
    _, fb, tile, t = _fb()
    with pytest.raises(ValueError, match=r"cmp_type.*required"):
        fb.op(__import__("pldemu.ir", fromlist=["Op"]).Op.TILE_CMPS, [t, Const(0.0, DType.FP32)], {})
    with pytest.raises(ValueError, match=r"one of EQ, NE, LT, LE, GT, GE"):
        tile.cmps(t, 0.0, "GEQ")


def test_select_refusals() -> None:
    pb, fb, tile, t = _fb()
    m = tile.cmps(t, 0.0, "GT")
    with pytest.raises(ValueError, match=r"requires at least one of on_true/on_false to be a TileType, but both "
                       "are scalars -- there is no shape to select into"):
        tile.select(m, 1.0, 0.0)
    other = pb.local("o", "fp32", [8, 128])
    narrow = tile.load(other, [0, 0], [8, 128], hint="n")
    with pytest.raises(ValueError, match=r"requires on_true and on_false to have the same shape, but got \[16, 128\] "
                       r"and \[8, 128\]; broadcast the narrower operand explicitly"):
        tile.select(m, t, narrow)
    tail = tile.set_validshape(t, [11, 100], hint="tail")
    with pytest.raises(ValueError, match=r"same valid extents, but got \[16, 128\] and \[11, 100\]"):
        tile.select(m, t, tail)
    half = tile.cast(t, "fp16", hint="h")
    with pytest.raises(ValueError, match=r"same dtype, but got fp32 and fp16; cast one branch first"):
        tile.select(m, t, half)
    ctx_scalar = fb.let("thr", Const(0.5, DType.FP32))
    with pytest.raises(ValueError, match=r"requires the scalar on_false branch to be a compile-time constant"):
        tile.select(m, t, ctx_scalar)


def test_select_cond_must_be_the_packed_mask() -> None:
    pb, _, tile, t = _fb()
    vals = pb.local("v", "uint8", [16, 128])
    value_tile = tile.load(vals, [0, 0], [16, 128], hint="v")
    with pytest.raises(ValueError, match=r"requires cond to be the packed predicate mask for this result: "
                       r"\[16, 32\] UINT8 with valid_shape \[16, 16\], as produced by tile.cmp/tile.cmps; but got "
                       r"UINT8\[16, 128\].*compare it first: tile.cmps\(value, 0, cmp_type=NE\)"):
        tile.select(value_tile, t, 0.0)
    tail = tile.set_validshape(t, [11, 100], hint="tail")
    full_mask = tile.cmps(t, 0.0, "GT")  # the mask of the full tile, not of the tail
    with pytest.raises(ValueError, match=r"valid_shape \[11, 13\]"):
        tile.select(full_mask, tail, 0.0)


def test_select_branch_must_be_tile_or_scalar() -> None:
    pb, _, tile, t = _fb()
    m = tile.cmps(t, 0.0, "GT")
    win = pb.window("w", "fp32", [16, 128])
    with pytest.raises(ValueError, match=r"tile.select: argument 'on_true' must be a tile or scalar"):
        tile.select(m, win, 0.0)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_eight_bit_select_is_refused_on_a2a3_only(dtype: str) -> None:
    pb, fb, tile, t = _fb(dtype)
    m = tile.cmps(t, Const(0, DType(dtype)), "GT")
    r = tile.select(m, t, Const(1, DType(dtype)))
    fb.pld.tile.store(r, [0, 0], pb.build().buffers[0].var)
    program = pb.build()
    with pytest.raises(ValueError, match=rf"tile.select cannot select {dtype} values on backend 'a2a3': neither "
                       "pto.tsel nor pto.tsels has a form for that element type there. Cast the operands to a "
                       "wider type before selecting"):
        lower_composite_ops(program, backend=BACKENDS["a2a3"])
    lower_composite_ops(program, backend=BACKENDS["a5"])
    lower_composite_ops(program)


def test_sels_refuses_bf16_and_an_unpaired_scalar() -> None:
    _, _, tile, t = _fb("bf16")
    m = tile.cmps(t, Const(0.0, DType.BF16), "GT")
    tmp = tile.create([1, 32], "uint8", hint="tmp")
    with pytest.raises(ValueError, match=r"tile.sels: argument 'src' must be a tile of .*TSELS has no bf16 form"):
        tile.sels(m, t, tmp, Const(0.0, DType.BF16))
    _, _, tile2, u = _fb("uint16")
    m2 = tile2.cmps(u, Const(0, DType.UINT16), "GT")
    tmp2 = tile2.create([1, 32], "uint8", hint="tmp")
    with pytest.raises(ValueError, match=r"argument 'scalar' must be a int16 scalar"):
        tile2.sels(m2, u, tmp2, Const(0, DType.UINT16))


def test_non_integral_literal_on_an_integer_select_is_refused_at_lowering() -> None:
    pb, fb, tile, t = _fb("int32")
    m = tile.cmps(t, Const(0, DType.INT32), "GT")
    fb.pld.tile.store(tile.select(m, 2.5, t), [0, 0], pb.build().buffers[0].var)
    with pytest.raises(ValueError, match=r"a literal a int32 tile can hold, got 2.5"):
        lower_composite_ops(pb.build())
