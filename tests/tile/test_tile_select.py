"""tile.select lowered for each backend and run: bit-exact to numpy.where on every case of the issue;
the emitted form (TSEL / TSELS, scratch dtype and shape) against the spec's table."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from tile_helpers import run_local

from pldemu.harness.tilecheck import SELECT_CASES, run_select_case
from pldemu.ir import Call, Const, DType, Op, ProgramBuilder, format_program, parse_program, verify
from pldemu.lowering import lower_composite_ops, lower_composite_ops_with_report
from pldemu.lowering.backend import BACKENDS
from pldemu.runtime.options import RuntimeOptions


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_select_case_is_bit_exact_to_numpy_where(backend: str) -> None:
    results = [run_select_case(MPI.COMM_SELF, c, BACKENDS[backend], RuntimeOptions()) for c in SELECT_CASES]
    bad = [(r.case.label, r.wrong, r.outside) for r in results if not r.ok]
    assert not bad
    assert len(results) >= 50


def test_handwritten_tail_and_nan_case_against_where() -> None:
    """Independent of the check's oracle: valid (11, 100) of (16, 128), NaN sources, tile/scalar GE."""
    pb = ProgramBuilder("tail")
    src = pb.local("src", "fp32", [16, 128])
    out = pb.local("out", "fp32", [16, 128])
    fb = pb.function()
    t = fb.pld.tile.load(src, [0, 0], [16, 128], valid_shape=[11, 100])
    r = fb.pld.tile.select(fb.pld.tile.cmps(t, 0.0, "GE"), t, -3.0)
    fb.pld.tile.store(r, [0, 0], out)
    x = ((np.arange(16 * 128).reshape(16, 128) % 9) - 4).astype(np.float32)
    x[::3, ::5] = np.nan
    for backend in BACKENDS.values():
        (got,) = run_local(pb.build(), {"src": x, "out": np.full((16, 128), 5.0, np.float32)}, backend=backend)
        with np.errstate(invalid="ignore"):
            want = np.where(x[:11, :100] >= 0, x[:11, :100], np.float32(-3.0))
        assert np.array_equal(got["out"][:11, :100], want, equal_nan=True)
        assert (got["out"][11:] == 5).all() and (got["out"][:, 100:] == 5).all()


# (route, dtype, rank) -> expected emitted form per backend: (op, scratch dtype, scratch shape)
TSEL_A2A3, TSEL_A5 = (Op.TILE_SEL, DType.UINT32, (1, 16)), (Op.TILE_SEL, DType.UINT8, (1, 32))


def _expected(route: str, dtype: DType, rank: int, backend: str) -> tuple[Op, DType, tuple[int, ...]] | str:
    tsels_ok = {"a2a3": {DType.INT16, DType.UINT16, DType.INT32, DType.UINT32, DType.FP16, DType.FP32},
                "a5": {DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32, DType.FP16,
                       DType.FP32},
                "none": {DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32,
                         DType.FP16, DType.FP32}}[backend]
    if backend == "a2a3" and dtype in (DType.INT8, DType.UINT8):
        return "cannot select"
    if route == "tile/scalar" and rank == 2 and dtype in tsels_ok:
        return (Op.TILE_SELS, dtype, (1, 128)) if backend == "a2a3" else (Op.TILE_SELS, DType.UINT8, (1, 32))
    return TSEL_A2A3 if backend == "a2a3" else TSEL_A5


TABLE = [(route, dtype, rank, backend)
         for route in ("tile/tile", "tile/scalar", "scalar/tile")
         for dtype in (DType.FP32, DType.FP16, DType.BF16, DType.INT16, DType.INT32, DType.UINT32, DType.INT8,
                       DType.UINT8)
         for rank in (2, 3)
         for backend in ("a2a3", "a5", "none")]


def _select_program(route: str, dtype: DType, rank: int) -> object:
    shape = [16, 128] if rank == 2 else [2, 8, 128]
    pb = ProgramBuilder("form")
    src = pb.local("src", dtype.value, shape)
    fb = pb.function()
    t = fb.pld.tile.load(src, [0] * rank, shape, hint="t")
    m = fb.pld.tile.cmps(t, Const(0.0, dtype) if dtype.is_float else Const(0, dtype), "GT")
    lit = Const(1.0, dtype) if dtype.is_float else Const(1, dtype)
    on_true = lit if route == "scalar/tile" else t
    on_false = lit if route == "tile/scalar" else t
    r = fb.pld.tile.select(m, on_true, on_false, hint="r")
    fb.pld.tile.store(r, [0] * rank, src)
    return pb.build()


@pytest.mark.parametrize(("route", "dtype", "rank", "backend"), TABLE,
                         ids=[f"{r}-{d.value}-rank{k}-{b}" for r, d, k, b in TABLE])
def test_emitted_form_matches_the_spec_table(route: str, dtype: DType, rank: int, backend: str) -> None:
    program = _select_program(route, dtype, rank)
    want = _expected(route, dtype, rank, backend)
    if isinstance(want, str):
        with pytest.raises(ValueError, match=f"tile.select cannot select {dtype.value} values on backend 'a2a3'"):
            lower_composite_ops(program, backend=BACKENDS[backend])  # type: ignore[arg-type]
        return
    report = lower_composite_ops_with_report(program, backend=BACKENDS[backend])  # type: ignore[arg-type]
    lowered = report.program
    verify(lowered)
    stmts = lowered.function().body.stmts
    calls = [s.value for s in stmts if hasattr(s, "value") and isinstance(s.value, Call)]
    final = next(c for c in calls if c.op in (Op.TILE_SEL, Op.TILE_SELS))
    creates = [c for c in calls if c.op is Op.TILE_CREATE]
    assert len(creates) == 1
    scratch = creates[0].type
    assert (final.op, scratch.dtype, scratch.shape) == want  # type: ignore[union-attr]
    assert dict(creates[0].attrs)["mem"].name == "Vec"
    fulls = [c for c in calls if c.op is Op.TILE_FULL]
    assert len(fulls) == (1 if route == "scalar/tile" or (final.op is Op.TILE_SEL and route != "tile/tile") else 0)
    text = format_program(lowered)
    assert format_program(parse_program(text)) == text
    assert lower_composite_ops(lowered, backend=BACKENDS[backend]) == lowered


def test_materialised_branch_keeps_the_tail_view_and_round_trips() -> None:
    pb = ProgramBuilder("narrow")
    src = pb.local("src", "fp32", [16, 128])
    fb = pb.function()
    t = fb.pld.tile.load(src, [0, 0], [16, 128], valid_shape=[11, 100], hint="t")
    r = fb.pld.tile.select(fb.pld.tile.cmps(t, 0.0, "GT"), 7.0, t, hint="r")
    fb.pld.tile.store(r, [0, 0], src)
    lowered = lower_composite_ops(pb.build())
    text = format_program(lowered)
    assert "tile.full([16, 128], 7.0, [11, 100], dtype=fp32)" in text
    parsed = parse_program(text)
    assert parsed == lowered
    final = [s for s in lowered.function().body.stmts if getattr(s, "var", None) is not None and s.var.name == "r"]
    assert final[-1].var.type.valid_shape is not None  # type: ignore[union-attr]
