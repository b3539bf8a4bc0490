"""tmov_x2zz byte layouts element by element, the workspaces the raw op leaves, and the lowering's shapes
(workspaces, tmp sizes, public types) against the reference's formulas for a table of shapes."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from mx_reference import e8m0_of, groups_view, zz_image

from pldemu.ir import (
    Assign,
    Call,
    DType,
    Op,
    ProgramBuilder,
    TileLayout,
    TileType,
    TupleType,
)
from pldemu.ir.signatures import has_write_effects
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import ProgramInstance, RuntimeOptions


def _run(pb: ProgramBuilder, inputs: dict[str, np.ndarray], outputs: tuple[str, ...]) -> dict[str, np.ndarray]:
    with ProgramInstance(lower_composite_ops(pb.build()), MPI.COMM_SELF, RuntimeOptions()) as inst:
        for k, v in inputs.items():
            inst.local(k)[...] = v
        inst.run()
        return {k: inst.local(k).copy() for k in outputs}


@pytest.mark.parametrize(("rows", "cols"), [(16, 2), (17, 2), (32, 4), (5, 6), (48, 8), (64, 16)])
def test_nd_to_zz_element_by_element(rows: int, cols: int) -> None:
    pad = -(-rows // 16) * 16
    pb = ProgramBuilder("zz1")
    e_in = pb.local("e", "uint8", [1, pad * cols])
    out = pb.local("out", "uint8", [pad, cols])
    fb = pb.function()
    e = fb.pld.tile.load(e_in, [0, 0], [1, pad * cols], valid_shape=[1, rows * cols], hint="e")
    tmp = fb.pld.tile.create([1, 64 + (pad // 16) * cols], "uint8", hint="tmp")
    zz = fb.let("zz", fb.call(Op.TILE_TMOV_X2ZZ, [e, tmp], {"group_axis": 1, "dst_rows": rows, "dst_cols": cols}))
    assert isinstance(zz.type, TileType) and zz.type.shape == (pad, cols) and zz.type.layout is TileLayout.ZZ
    fb.pld.tile.store(zz, [0, 0], out)
    values = np.random.default_rng(rows * cols).integers(1, 255, (rows, cols), dtype=np.uint8)
    src = np.full((1, pad * cols), 0xEE, np.uint8)  # beyond the valid count: must not leak into padding rows
    src[0, : rows * cols] = values.reshape(-1)
    got = _run(pb, {"e": src}, ("out",))["out"]
    assert np.array_equal(got, zz_image(values))
    assert not got.reshape(-1)[[((m // 16) * (cols // 2) + g // 2) * 32 + (m % 16) * 2 + g % 2
                                for m in range(rows, pad) for g in range(cols)]].any()


@pytest.mark.parametrize(("mhat", "n"), [(2, 16), (2, 32), (4, 16), (8, 48)])
def test_dn_to_zz_element_by_element(mhat: int, n: int) -> None:
    pb = ProgramBuilder("zz0")
    e_in = pb.local("e", "uint8", [mhat, n])
    out = pb.local("out", "uint8", [n, mhat])
    fb = pb.function()
    e = fb.pld.tile.load(e_in, [0, 0], [mhat, n], hint="e")
    tmp = fb.pld.tile.create([1, 32], "uint8", hint="tmp")
    zz = fb.let("zz", fb.call(Op.TILE_TMOV_X2ZZ, [e, tmp], {"group_axis": 0}))
    fb.pld.tile.store(zz, [0, 0], out)
    dn = np.random.default_rng(n).integers(0, 256, (mhat, n), dtype=np.uint8)
    got = _run(pb, {"e": dn}, ("out",))["out"].reshape(-1)
    for cb in range(n // 16):
        for p in range(mhat // 2):
            for q in range(16):
                for d in range(2):
                    assert got[(cb * (mhat // 2) + p) * 32 + q * 2 + d] == dn[2 * p + d, 16 * cb + q]


def _raw_program(dtype: str, shape: tuple[int, int], axis: int, ws: tuple[int, int], valid: tuple[int, int]
                 ) -> ProgramBuilder:
    pb = ProgramBuilder("raw")
    x = pb.local("x", dtype, list(shape))
    mx = pb.local("mx", dtype, list(ws))
    sc = pb.local("sc", dtype, list(ws))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(shape), hint="t")
    full = [fb.pld.tile.create(list(ws), dtype, hint=n) for n in ("wmax", "wscaling")]
    w = [fb.pld.tile.set_validshape(f, list(valid), hint="v") for f in full]
    fb.let("raw", fb.call(Op.TILE_TQUANT_MX_RAW, [t, *w], {"group_axis": axis}))
    # The whole allocation (the un-narrowed tiles share the workspace the raw op wrote in place).
    fb.pld.tile.store(full[0], [0, 0], mx)
    fb.pld.tile.store(full[1], [0, 0], sc)
    return pb


def test_workspaces_hold_what_the_hardware_leaves_fp32_unroll() -> None:
    shape, groups = (64, 256), 64 * 8  # 16384 elements: the FP32 path stores each scaling twice
    pb = _raw_program("fp32", shape, 1, (1, 1024), (1, groups))
    x = np.random.default_rng(1).uniform(-3, 3, shape).astype(np.float32)
    got = _run(pb, {"x": x}, ("mx", "sc"))
    amax = np.abs(groups_view(x.astype(np.float64), 1)).max(axis=1)
    scaling = np.ldexp(1.0, 127 - e8m0_of(groups_view(x.astype(np.float64), 1)).astype(np.int64))
    assert np.array_equal(got["mx"][0, :groups], amax.astype(np.float32))
    assert np.array_equal(got["sc"][0, : 2 * groups], np.repeat(scaling, 2).astype(np.float32))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_workspaces_b16_hold_bf16_bits(dtype: str) -> None:
    shape = (32, 64)
    pb = _raw_program(dtype, shape, 0, (1, 64), (1, 64))  # axis 0: [rows/32, cols] = [1, 64] groups
    x = np.random.default_rng(2).uniform(-3, 3, shape).astype(DType.parse(dtype).np)
    got = _run(pb, {"x": x}, ("mx", "sc"))
    g = groups_view(x.astype(np.float64), 0)
    amax32 = np.abs(g).max(axis=1).astype(np.float32)
    want_max = (amax32.view(np.uint32) >> 16).astype(np.uint16)  # FP16 -> BF16 toward zero
    want_sc = (np.ldexp(1.0, 127 - e8m0_of(g).astype(np.int64)).astype(np.float32).view(np.uint32) >> 16)
    assert np.array_equal(got["mx"].view(np.uint16)[0], want_max)
    assert np.array_equal(got["sc"].view(np.uint16)[0], want_sc.astype(np.uint16))


def _roundup(n: int, m: int) -> int:
    return -(-n // m) * m


SHAPES = [(1, "fp32", (16, 64)), (1, "bf16", (16, 64)), (1, "fp32", (64, 256)), (1, "fp16", (48, 128)),
          (1, "fp32", (16, 1024)), (0, "fp32", (32, 64)), (0, "bf16", (64, 128)), (0, "fp16", (96, 192))]


@pytest.mark.parametrize(("axis", "dtype", "shape"), SHAPES)
def test_lowered_shapes_follow_the_formulas(axis: int, dtype: str, shape: tuple[int, int]) -> None:
    pb = ProgramBuilder("shapes")
    x = pb.local("x", dtype, list(shape))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(shape), hint="t")
    fb.let("r", fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": axis}))
    calls = [s.value for s in lower_composite_ops(pb.build()).function().body.stmts
             if isinstance(s, Assign) and isinstance(s.value, Call)]
    creates = [c for c in calls if c.op is Op.TILE_CREATE]
    rows, cols = shape if axis == 1 else shape[::-1]
    groups = rows * cols // 32
    if axis == 1:
        twice = dtype == "fp32" and rows * cols > 1024 and rows * cols % 256 == 0
        aux = (1, _roundup(groups * (2 if twice else 1), 64 if dtype == "fp32" else 128))
        tmp = _roundup(64 + -(-rows // 16) * (cols // 32), 32)
        scale = ((rows, cols // 32), TileLayout.ZZ)
    else:
        aux, tmp, scale = (rows // 32, cols), 32, ((rows // 32, cols), TileLayout.NN)
    src_dt = DType.parse(dtype)
    assert [c.type.shape for c in creates[:2]] == [aux, aux]  # type: ignore[union-attr]
    assert all(c.attr("dtype") is src_dt for c in creates[:2])
    assert all(c.attr("mem").name == "Vec" for c in creates)  # type: ignore[union-attr]
    assert creates[2].type.shape == (1, tmp) and creates[2].attr("dtype") is DType.UINT8  # type: ignore[union-attr]
    raw = next(c for c in calls if c.op is Op.TILE_TQUANT_MX_RAW)
    assert has_write_effects(raw)
    assert raw.type == TupleType((TileType(DType.INT8, (rows, cols)),
                                  TileType(DType.UINT8, (1, groups) if axis == 1 else (rows // 32, cols))))
    public = calls[-1]
    assert public.op is Op.TUPLE_MAKE
    assert public.type == TupleType((TileType(DType.FP8E4M3FN, (rows, cols)),
                                     TileType(DType.FP8E8M0, scale[0], None, layout=scale[1])))
    assert (Op.TILE_TRANSPOSE in {c.op for c in calls}) == (axis == 0)
    assert (Op.TILE_TRANSPOSE_VIEW in {c.op for c in calls}) == (axis == 0)
    # The workspaces the raw op gets: valid [1, groups] (axis 1) / [rows/32, cols] (axis 0) in the src dtype.
    valid = (1, groups) if axis == 1 else (rows // 32, cols)
    for ws in raw.args[1:3]:
        t = ws.type  # type: ignore[union-attr]
        assert isinstance(t, TileType) and t.dtype is src_dt
        got = t.shape if t.valid_shape is None else tuple(int(v.value) for v in t.valid_shape)  # type: ignore[attr-defined]
        assert got == valid
    x2zz = next(c for c in calls if c.op is Op.TILE_TMOV_X2ZZ)
    zz_shape = (_roundup(rows, 16), cols // 32) if axis == 1 else (cols, rows // 32)
    assert x2zz.type == TileType(DType.UINT8, zz_shape, None, layout=TileLayout.ZZ)
    if axis == 1:
        assert (x2zz.attr("dst_rows"), x2zz.attr("dst_cols")) == (rows, cols // 32)
