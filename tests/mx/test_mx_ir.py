"""tquant_mx IR: every constraint refused with its message, tuple projections folded by the pass (and a
user's own tuple left alone), write effects, goldens of the lowered program per axis (round trip and
idempotency). Regenerate goldens with scripts/regen-goldens.sh (PLDEMU_REGEN_GOLDEN=1)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pldemu.ir import (
    Assign,
    Call,
    Const,
    DType,
    FunctionBuilder,
    Op,
    Program,
    ProgramBuilder,
    Var,
    format_program,
    make_call,
    parse_file,
    verify,
)
from pldemu.ir.signatures import IRTypeError, writes_args
from pldemu.lowering import lower_composite_ops

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("PLDEMU_REGEN_GOLDEN") == "1"


def _tq(src_dtype: str, shape: list[int], axis: int, valid: list[int] | None = None, **attrs: object) -> None:
    fb = FunctionBuilder()
    t = fb.pld.tile.create(shape, src_dtype, hint="t")
    if valid:
        t = fb.pld.tile.set_validshape(t, valid, hint="v")
    make_call(Op.TILE_TQUANT_MX, [t], {"group_axis": axis, **attrs})  # type: ignore[dict-item]


REFUSALS: list[tuple[Callable[[], None], str]] = [
    (lambda: _tq("fp32", [16, 64], 2), "group_axis must be 0 or 1, but got 2"),
    (lambda: _tq("fp32", [16, 64], 1, dtype="bf16"), "requires dtype FP8E4M3FN (MXFP8-only)"),
    (lambda: _tq("int8", [16, 64], 1), "requires src dtype FP16, FP32 or BF16, but got INT8"),
    (lambda: _tq("fp32", [2, 16, 64], 1), "requires a rank-2 src tile"),
    (lambda: _tq("fp32", [16, 64], 1, valid=[8, 64]), "does not support a partial src valid_shape"),
    (lambda: _tq("fp32", [16, 32], 1), "requires K divisible by 64"),
    (lambda: _tq("fp32", [8, 64], 1), "requires M divisible by 16"),
    (lambda: _tq("fp32", [16, 64], 0), "requires N divisible by 32"),
]


@pytest.mark.parametrize(("build", "message"), REFUSALS, ids=[m for _, m in REFUSALS])
def test_tquant_mx_refusals(build: Callable[[], None], message: str) -> None:
    with pytest.raises(IRTypeError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        build()
    assert str(info.value).startswith("tile.tquant_mx ")
    assert "\n" not in str(info.value)


def _create(fb: FunctionBuilder, dtype: str, shape: list[int], valid: list[int] | None = None) -> Var:
    t = fb.pld.tile.create(shape, dtype, hint="t")
    return fb.pld.tile.set_validshape(t, valid, hint="v") if valid else t


def test_raw_and_x2zz_refusals() -> None:
    fb = FunctionBuilder()
    src = _create(fb, "fp32", [16, 64])
    ok = _create(fb, "fp32", [1, 64], [1, 32])
    with pytest.raises(IRTypeError, match="requires the max scratch in the src dtype FP32, but got FP16"):
        make_call(Op.TILE_TQUANT_MX_RAW, [src, _create(fb, "fp16", [1, 32]), ok], {"group_axis": 1})
    with pytest.raises(IRTypeError, match=r"requires scaling scratch valid element count 32 .*got 16"):
        make_call(Op.TILE_TQUANT_MX_RAW, [src, ok, _create(fb, "fp32", [1, 64], [1, 16])], {"group_axis": 1})
    exp = _create(fb, "uint8", [1, 32])
    with pytest.raises(IRTypeError, match=r"tmp capacity >= 64 \+ ceil\(dst_rows/16\) \* dst_cols = 66 bytes"):
        make_call(Op.TILE_TMOV_X2ZZ, [exp, _create(fb, "uint8", [1, 32])],
                  {"group_axis": 1, "dst_rows": 16, "dst_cols": 2})
    assert make_call(Op.TILE_TMOV_X2ZZ, [exp, _create(fb, "uint8", [1, 96])],
                     {"group_axis": 1, "dst_rows": 16, "dst_cols": 2}).type.shape == (16, 2)  # type: ignore[union-attr]
    with pytest.raises(IRTypeError, match="requires an even dst_cols"):
        make_call(Op.TILE_TMOV_X2ZZ, [exp, _create(fb, "uint8", [1, 96])],
                  {"group_axis": 1, "dst_rows": 32, "dst_cols": 1})
    with pytest.raises(IRTypeError, match="minimal 32-byte tmp pad, but got 16 bytes"):
        make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [2, 16]), _create(fb, "uint8", [1, 16])],
                  {"group_axis": 0})
    assert make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [2, 16]), _create(fb, "uint8", [1, 32])],
                     {"group_axis": 0}).type.shape == (16, 2)  # type: ignore[union-attr]
    with pytest.raises(IRTypeError, match=r"even number .* of valid src rows, but got 3"):
        make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [3, 16]), _create(fb, "uint8", [1, 32])],
                  {"group_axis": 0})
    with pytest.raises(IRTypeError, match="requires a rank-2 UINT8 ND"):
        make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "int8", [2, 16]), _create(fb, "uint8", [1, 32])],
                  {"group_axis": 0})
    with pytest.raises(IRTypeError, match="requires an equal byte size"):
        make_call(Op.TILE_REINTERPRET_VIEW, [exp], {"dtype": DType.FP32})
    with pytest.raises(IRTypeError, match="two distinct literal axes"):
        make_call(Op.TILE_TRANSPOSE, [src, Const(0), Const(0)])
    assert writes_args(Op.TILE_TQUANT_MX_RAW) == (1, 2) and writes_args(Op.TILE_TMOV_X2ZZ) == ()


def _program(axis: int, dtype: str = "fp32", shape: tuple[int, int] = (64, 128), alias: bool = True) -> Program:
    pb = ProgramBuilder(f"tquant_mx_axis{axis}")
    x = pb.local("x", dtype, list(shape))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(shape), hint="t")
    r = fb.let("mx", fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": axis}))
    fb.let("quant", fb.call(Op.TUPLE_GET_ITEM, [r], {"index": 0}))
    if alias:
        r = fb.let("mx_alias", r)
    fb.let("scale", fb.call(Op.TUPLE_GET_ITEM, [r], {"index": 1}))
    return pb.build()


def test_projections_fold_through_aliases_and_user_tuples_stay() -> None:
    body = lower_composite_ops(_program(1)).function().body.stmts
    by_name = {s.var.name: s.value for s in body if isinstance(s, Assign)}
    quant, scale = by_name["quant"], by_name["scale"]
    assert isinstance(quant, Var) and isinstance(scale, Var)  # same destinations as the rule's MakeTuple
    made = by_name["mx"]
    assert isinstance(made, Call) and made.op is Op.TUPLE_MAKE and made.args == (quant, scale)
    pb = ProgramBuilder("user")
    x = pb.local("x", "fp32", [16, 64])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], [16, 64], hint="t")
    u = fb.let("u", fb.call(Op.TUPLE_MAKE, [t, t]))
    fb.let("p", fb.call(Op.TUPLE_GET_ITEM, [u], {"index": 0}))
    fb.let("mx", fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": 1}))
    low = lower_composite_ops(pb.build()).function().body.stmts
    p = next(s for s in low if isinstance(s, Assign) and s.var.name == "p")
    assert isinstance(p.value, Call) and p.value.op is Op.TUPLE_GET_ITEM  # not a rule's tuple: kept


def test_unused_public_result_keeps_the_raw_call() -> None:
    pb = ProgramBuilder("unused")
    x = pb.local("x", "fp32", [16, 64])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], [16, 64], hint="t")
    fb.emit(Assign(Var("mx", fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": 1}).type),
                   fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": 1})))
    low = lower_composite_ops(pb.build()).function().body.stmts
    raws = [s for s in low if isinstance(s, Assign) and isinstance(s.value, Call)
            and s.value.op is Op.TILE_TQUANT_MX_RAW]
    assert len(raws) == 1 and writes_args(raws[0].value.op)  # type: ignore[union-attr]


@pytest.mark.parametrize("axis", [0, 1])
def test_golden_lowering(axis: int) -> None:
    lowered = verify(lower_composite_ops(_program(axis)))
    text = format_program(lowered)
    path = GOLDEN / f"tquant_mx_axis{axis}.pld"
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()
    parsed = parse_file(path)
    assert format_program(parsed) == text  # round trip
    assert lower_composite_ops(parsed) is parsed  # idempotent: nothing left to lower
    assert lower_composite_ops(lowered) is lowered


def test_tile_layout_parameters_round_trip_and_tquant_for_effect() -> None:
    from pldemu.ir import Eval, TileLayout, TileType, parse_program

    zz = Var("s", TileType(DType.UINT8, (16, 2), None, layout=TileLayout.ZZ))
    fb = FunctionBuilder("helper", (zz,))
    fb.let("v", fb.call(Op.TILE_TRANSPOSE_VIEW, [zz]))
    pb = ProgramBuilder("p")
    x = pb.local("x", "fp32", [16, 64])
    main = pb.function()
    t = main.pld.tile.load(x, [0, 0], [16, 64], hint="t")
    main.emit(Eval(main.call(Op.TILE_TQUANT_MX, [t], {"group_axis": 1})))  # evaluated for its effect only
    base = pb.build()
    program = Program("p", base.buffers, (*base.functions, fb.build()))
    text = format_program(program)
    assert "tile uint8[16, 2] layout ZZ" in text
    assert parse_program(text) == program
    v = parse_program(text).function("helper").body.stmts[0]
    assert isinstance(v, Assign) and v.value.type.layout is TileLayout.NN  # type: ignore[union-attr]
    lowered = lower_composite_ops(program).function().body.stmts
    assert [s.value.op for s in lowered if isinstance(s, Assign) and isinstance(s.value, Call)
            and s.value.op is Op.TILE_TQUANT_MX_RAW] == [Op.TILE_TQUANT_MX_RAW]


def _zz(shape: tuple[int, ...]) -> Var:
    from pldemu.ir import TileLayout, TileType

    return Var("zz", TileType(DType.UINT8, shape, None, layout=TileLayout.ZZ))


def _every_other_refusal() -> list[tuple[str, Callable[[FunctionBuilder], object], str]]:
    """The constraints test_tquant_mx_refusals and test_raw_and_x2zz_refusals leave out, one each."""
    from pldemu.ir import ListExpr, TileType

    f32 = "fp32"
    return [
        ("tile.tquant_mx", lambda fb: make_call(Op.TILE_TQUANT_MX, [Var("z", TileType(DType.FP32, (0, 64)))],
                                                {"group_axis": 1}), "requires static positive dims, but got [0, 64]"),
        ("tile.tquant_mx_raw", lambda fb: make_call(Op.TILE_TQUANT_MX_RAW, [
            _create(fb, f32, [16, 48]), *[_create(fb, f32, [1, 64], [1, 24])] * 2], {"group_axis": 1}),
         "requires the group axis extent divisible by 32, but got [16, 48]"),
        ("tile.tquant_mx_raw", lambda fb: make_call(Op.TILE_TQUANT_MX_RAW, [
            _create(fb, f32, [16, 64]), _create(fb, f32, [1, 64], [1, 16]), _create(fb, f32, [1, 64], [1, 32])],
            {"group_axis": 1}), "requires max scratch valid element count 32 (one per group), but got 16"),
        ("tile.tquant_mx_raw", lambda fb: make_call(Op.TILE_TQUANT_MX_RAW, [
            _create(fb, f32, [16, 64]), *[_create(fb, f32, [1, 64], [1, 32])] * 2],
            {"group_axis": 1, "dtype": DType.BF16}), "requires dtype FP8E4M3FN (MXFP8-only), but got BF16"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [1, 32]),
                                                                    _create(fb, "uint8", [1, 96])], {"group_axis": 1}),
         "with group_axis=1 requires positive dst_rows and dst_cols, but got 0, 0"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [
            _create(fb, "uint8", [1, 64], [1, 30]), _create(fb, "uint8", [1, 96])],
            {"group_axis": 1, "dst_rows": 16, "dst_cols": 2}), "requires src valid [1, 32] or [16, 2], but got [1, 30]"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [
            _create(fb, "uint8", [1, 34]), _create(fb, "uint8", [1, 96])],
            {"group_axis": 1, "dst_rows": 17, "dst_cols": 2}),
         "requires at least 64 physical src elements (align16(dst_rows) * dst_cols), but got 34"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [1, 32]), _zz((1, 96))],
                                                {"group_axis": 1, "dst_rows": 16, "dst_cols": 2}),
         "requires a rank-2 UINT8 ND (row_major) tmp tile, but got UINT8[1, 96] ZZ"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [2, 24]),
                                                                    _create(fb, "uint8", [1, 32])], {"group_axis": 0}),
         "with group_axis=0 requires src cols divisible by 16 and physical cols == valid cols, but got 24 physical"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [
            _create(fb, "uint8", [2, 32], [2, 16]), _create(fb, "uint8", [1, 32])], {"group_axis": 0}),
         "physical cols == valid cols, but got 32 physical, 16 valid"),
        ("tile.tmov_x2zz", lambda fb: make_call(Op.TILE_TMOV_X2ZZ, [_create(fb, "uint8", [1, 32]),
                                                                    _create(fb, "uint8", [1, 96])], {"group_axis": 3}),
         "group_axis must be 0 or 1, but got 3"),
        ("tile.reinterpret_view", lambda fb: make_call(Op.TILE_REINTERPRET_VIEW, [
            _create(fb, "uint8", [1, 64], [1, 32]), ListExpr((Const(2), Const(32)))], {"dtype": DType.UINT8}),
         "requires a fully valid tile to change the shape"),
        ("tile.transpose_view", lambda fb: make_call(Op.TILE_TRANSPOSE_VIEW, [_create(fb, "uint8", [2, 2, 16])]),
         "requires a rank-2 tile, but got rank 3"),
        ("tile.transpose", lambda fb: make_call(Op.TILE_TRANSPOSE, [_zz((16, 2)), Const(0), Const(1)]),
         "requires an ND tile, but got ZZ"),
        ("tuple.get_item", lambda fb: make_call(Op.TUPLE_GET_ITEM, [Var("m", make_call(
            Op.TILE_TQUANT_MX, [_create(fb, f32, [16, 64])], {"group_axis": 1}).type)], {"index": 2}),
         "index 2 is out of range for a 2-tuple"),
    ]


@pytest.mark.parametrize("case", range(len(_every_other_refusal())))
def test_every_other_constraint_is_refused_with_its_message(case: int) -> None:
    op, build, message = _every_other_refusal()[case]
    with pytest.raises(IRTypeError) as info:
        build(FunctionBuilder())
    text = str(info.value)
    assert text.startswith(op + " ") and message in text and "\n" not in text, text
