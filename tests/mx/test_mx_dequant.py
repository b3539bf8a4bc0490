"""tile.dequant_mx, the pldemu extension that decodes tile.tquant_mx's public pair: bit-exact against the
test's own reference (mx_reference.dequantised) on both axes and all source dtypes, through a store and a
load of the scale bytes (scale_layout=ZZ / NN), every refusal with its message, text round trip, and the
pass leaving it alone (not a composite: never lowered, never emitted)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from mpi4py import MPI
from mx_reference import dequantised

from pldemu.harness.mxcheck import boundary_source, public_shapes, quantising, random_groups_source
from pldemu.ir import (
    Assign,
    Call,
    DType,
    FunctionBuilder,
    Op,
    Program,
    ProgramBuilder,
    TileLayout,
    TileType,
    Var,
    format_program,
    make_call,
    parse_program,
    verify,
)
from pldemu.ir.signatures import IRTypeError
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import ProgramInstance, RuntimeOptions

SHAPE = (64, 128)


def _program(axis: int, dtype: str, shape: tuple[int, int], through_bytes: bool) -> Program:
    """x -> tquant_mx -> dequant_mx -> y; ``through_bytes`` stores the scale as UINT8 and loads it back
    (an ND tile of the ZZ / NN image, named by scale_layout)."""
    qshape, sshape = public_shapes(axis, shape)
    pb = ProgramBuilder(f"dequant_axis{axis}")
    fb, quant, scale = quantising(pb, axis, dtype, shape)
    y, s_buf = pb.local("y", "fp32", list(qshape)), pb.local("s", "uint8", list(sshape))
    attrs: dict[str, object] = {"group_axis": axis}
    if through_bytes:
        fb.pld.tile.store(fb.let("s_bytes", fb.call(Op.TILE_REINTERPRET_VIEW, [scale], {"dtype": DType.UINT8})),
                          [0, 0], s_buf)
        loaded = fb.pld.tile.load(s_buf, [0, 0], list(sshape), hint="s_loaded")
        scale = fb.let("s_nd", fb.call(Op.TILE_REINTERPRET_VIEW, [loaded], {"dtype": DType.FP8E8M0}))
        attrs["scale_layout"] = TileLayout.ZZ if axis == 1 else TileLayout.NN
    d = fb.let("deq", fb.call(Op.TILE_DEQUANT_MX, [quant, scale], attrs))  # type: ignore[arg-type]
    fb.pld.tile.store(d, [0, 0], y)
    return pb.build()


def _run(program: Program, x: np.ndarray) -> np.ndarray:
    with ProgramInstance(verify(lower_composite_ops(program)), MPI.COMM_SELF, RuntimeOptions()) as inst:
        inst.local("x")[...] = x
        inst.run()
        return inst.local("y").copy()


@pytest.mark.parametrize("through_bytes", [False, True], ids=["public", "stored-bytes"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("axis", [0, 1])
def test_dequant_is_bit_exact_to_the_reference(axis: int, dtype: str, through_bytes: bool) -> None:
    program = _program(axis, dtype, SHAPE, through_bytes)
    for raw in (random_groups_source(axis, SHAPE, dtype, 11), boundary_source(axis, SHAPE),
                np.random.default_rng(4).uniform(-2, 2, SHAPE)):
        with np.errstate(over="ignore"):
            x = raw.astype(DType.parse(dtype).np)
        got, want = _run(program, x), dequantised(x, axis)
        assert got.shape == want.shape and got.dtype == np.float32
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (np.argwhere(~same)[:3], got[~same][:3], want[~same][:3])


def test_nan_scale_gives_nan_and_the_source_comes_back_within_mxfp8() -> None:
    x = np.random.default_rng(19).uniform(-2, 2, SHAPE).astype(np.float32)
    x[5, 40] = np.nan  # group (5, 1) of axis 1 gets e8m0 0xFF
    y = _run(_program(1, "fp32", SHAPE, True), x)
    assert np.isnan(y[5, 32:64]).all() and np.isfinite(np.delete(y[5], np.s_[32:64])).all()
    ok = np.isfinite(y)
    assert ok.sum() == x.size - 32 and np.all(np.abs(y[ok] - x[ok]) <= 0.125 * np.abs(x[ok]) + 2.0 ** -17)


def _tiles(fb: FunctionBuilder, q: tuple[str, list[int]], s: tuple[str, list[int]],
           layout: TileLayout = TileLayout.ZZ) -> tuple[Var, Var]:
    quant = fb.pld.tile.create(q[1], q[0], hint="q")
    scale = Var("s", TileType(DType.parse(s[0]), tuple(s[1]), None, layout=layout))
    return quant, scale


def _dq(q: tuple[str, list[int]], s: tuple[str, list[int]], axis: int = 1, layout: TileLayout = TileLayout.ZZ,
        **attrs: object) -> None:
    quant, scale = _tiles(FunctionBuilder(), q, s, layout)
    make_call(Op.TILE_DEQUANT_MX, [quant, scale], {"group_axis": axis, **attrs})  # type: ignore[dict-item]


REFUSALS: list[tuple[Callable[[], None], str]] = [
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("fp8e8m0", [16, 2]), axis=2), "group_axis must be 0 or 1, but got 2"),
    (lambda: _dq(("int8", [16, 64]), ("fp8e8m0", [16, 2])), "requires a rank-2 FP8E4M3FN ND quant tile, but got INT8"),
    (lambda: _dq(("fp8e4m3fn", [8, 64]), ("fp8e8m0", [8, 2])), "requires quant [M, K] with M divisible by 16"),
    (lambda: _dq(("fp8e4m3fn", [16, 32]), ("fp8e8m0", [16, 1])), "and K divisible by 64"),
    (lambda: _dq(("fp8e4m3fn", [64, 16]), ("fp8e8m0", [2, 16]), axis=0, layout=TileLayout.NN),
     "requires quant [K, N] with N divisible by 32"),
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("uint8", [16, 2])), "requires a fully valid FP8E8M0[16, 2] scale"),
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("fp8e8m0", [16, 4])), "scale for quant [16, 64] on group_axis=1, but got "
                                                                  "FP8E8M0[16, 4]"),
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("fp8e8m0", [16, 2]), layout=TileLayout.ND),
     "reads the scale in its public layout ZZ, but got a ND scale tile with scale_layout=ND (an ND tile of the "
     "stored bytes: pass scale_layout=ZZ)"),
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("fp8e8m0", [16, 2]), layout=TileLayout.NN),
     "public layout ZZ, but got a NN scale tile"),
    (lambda: _dq(("fp8e4m3fn", [64, 32]), ("fp8e8m0", [2, 32]), axis=0, layout=TileLayout.ZZ),
     "with group_axis=0 reads the scale in its public layout NN, but got a ZZ"),
    (lambda: _dq(("fp8e4m3fn", [16, 64]), ("fp8e8m0", [16, 2]), layout=TileLayout.ZZ, scale_layout=TileLayout.NN),
     "public layout ZZ, but got a ZZ scale tile with scale_layout=NN"),
]


@pytest.mark.parametrize(("build", "message"), REFUSALS, ids=[m[:50] for _, m in REFUSALS])
def test_dequant_refusals(build: Callable[[], None], message: str) -> None:
    with pytest.raises(IRTypeError) as info:
        build()
    assert message in str(info.value) and str(info.value).startswith("tile.dequant_mx ")
    assert "\n" not in str(info.value)


def test_accepted_forms_and_result_type() -> None:
    fb = FunctionBuilder()
    for q, s, axis, layout, attrs in (([16, 64], [16, 2], 1, TileLayout.ZZ, {}),
                                      ([16, 64], [16, 2], 1, TileLayout.ND, {"scale_layout": TileLayout.ZZ}),
                                      ([64, 32], [2, 32], 0, TileLayout.NN, {}),
                                      ([64, 32], [2, 32], 0, TileLayout.ND, {"scale_layout": TileLayout.NN})):
        quant, scale = _tiles(fb, ("fp8e4m3fn", q), ("fp8e8m0", s), layout)
        call = make_call(Op.TILE_DEQUANT_MX, [quant, scale], {"group_axis": axis, **attrs})  # type: ignore[dict-item]
        assert call.type == TileType(DType.FP32, tuple(q))


@pytest.mark.parametrize("axis", [0, 1])
def test_text_round_trip_and_the_pass_leaves_it_alone(axis: int) -> None:
    program = _program(axis, "fp32", SHAPE, True)
    text = format_program(program)
    assert "tile.dequant_mx(quant, s_nd, group_axis=" in text
    assert parse_program(text) == program
    lowered = lower_composite_ops(program)
    assert not Op.TILE_DEQUANT_MX.is_composite
    deq = [s.value for s in lowered.function().body.stmts
           if isinstance(s, Assign) and isinstance(s.value, Call) and s.value.op is Op.TILE_DEQUANT_MX]
    assert len(deq) == 1 and lower_composite_ops(lowered) is lowered
    # The spec's rule never emits it: a program without it lowers to none.
    plain = lower_composite_ops(parse_program(text.replace(
        f"    deq = tile.dequant_mx(quant, s_nd, group_axis={axis}, scale_layout={'ZZ' if axis else 'NN'})\n", "")
        .replace("    tile.store(deq, [0, 0], y)\n", "")))
    assert Op.TILE_DEQUANT_MX not in {s.value.op for s in plain.function().body.stmts
                                      if isinstance(s, Assign) and isinstance(s.value, Call)}
