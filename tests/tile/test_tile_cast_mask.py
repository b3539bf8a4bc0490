"""tile.cast in every round mode, BF16 as a real type (ml_dtypes), the packed mask's bit order."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local, unary_program

from pldemu.ir import DType, ProgramBuilder

BF16 = ml_dtypes.bfloat16


def _cast(x: np.ndarray, src: str, dst: str, mode: str) -> np.ndarray:
    shape = x.shape
    program = unary_program("cast", src, shape, lambda fb, t: fb.pld.tile.cast(t, dst, mode=mode), out_dtype=dst)
    (got,) = run_local(program, {"x": x})
    return got["out"]


def test_dtype_bf16_is_ml_dtypes_bfloat16() -> None:
    assert DType.BF16.np == np.dtype(BF16) and DType.BF16.itemsize == 2


def test_bf16_round_trip_matches_ml_dtypes_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, size=(64, 256), dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)  # every kind of FP32: normals, subnormals, Inf, NaN payloads
    down = _cast(x, "fp32", "bf16", "RINT")
    with np.errstate(invalid="ignore"):
        want = x.astype(BF16)
    assert down.dtype == np.dtype(BF16)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(down.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(down.astype(np.float32)[nan]).all()
    up = _cast(down, "bf16", "fp32", "None")
    assert np.array_equal(up.view(np.uint32)[~nan], down.astype(np.float32).view(np.uint32)[~nan])


def _ref_int(x: np.ndarray, mode: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    r = {"RINT": np.rint, "FLOOR": np.floor, "CEIL": np.ceil, "TRUNC": np.trunc, "None": np.trunc,
         "ROUND": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}[mode](x64)
    return np.where(np.isnan(r), 0, np.clip(r, -2**31, 2**31 - 1)).astype(np.int32)


@pytest.mark.parametrize("mode", ["None", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC"])
def test_float_to_int32_modes_ties_saturation_and_nan(mode: str) -> None:
    special = np.array([2.5, -2.5, 3.5, -3.5, 0.5, -0.5, 1.49999994, -1.5, 3e9, -3e9, np.inf, -np.inf, np.nan,
                        0.0, -0.0, 2**31 - 128.0], np.float32)
    x = np.zeros((1, 32), np.float32)
    x[0, : special.size] = special
    got = _cast(x, "fp32", "int32", mode)
    assert np.array_equal(got, _ref_int(x, mode))
    if mode == "ROUND":
        assert list(got[0, :6]) == [3, -3, 4, -4, 1, -1]  # ties away from zero
    if mode == "RINT":
        assert list(got[0, :6]) == [2, -2, 4, -4, 0, 0]  # ties to even
    assert got[0, 8] == 2**31 - 1 and got[0, 9] == -(2**31) and got[0, 12] == 0  # saturate; NaN -> 0


def test_round_to_odd_to_int() -> None:
    x = np.array([[0.5, 1.5, 2.0, 2.25, -2.5, -3.0, 4.75, 0.0]], np.float32)
    assert list(_cast(x, "fp32", "int32", "ODD")[0]) == [1, 1, 2, 3, -3, -3, 5, 0]


@pytest.mark.parametrize("dst", ["fp16", "bf16"])
def test_directed_float_narrowing_brackets_the_value(dst: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(-100, 100, (8, 128)).astype(np.float32)
    x64 = x.astype(np.float64)
    lo, hi = _cast(x, "fp32", dst, "FLOOR"), _cast(x, "fp32", dst, "CEIL")
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    assert (lo64 <= x64).all() and (hi64 >= x64).all()
    exact = lo64 == x64
    assert (hi64[exact] == x64[exact]).all()
    step = np.nextafter(lo, np.array(np.inf, lo.dtype)).astype(np.float64)
    assert (hi64[~exact] == step[~exact]).all()  # adjacent representable neighbours
    tr = _cast(x, "fp32", dst, "TRUNC").astype(np.float64)
    assert np.array_equal(tr, np.where(x64 >= 0, lo64, hi64))
    near = _cast(x, "fp32", dst, "RINT")
    assert np.array_equal(near.view(np.uint16), x.astype(near.dtype).view(np.uint16))
    odd = _cast(x, "fp32", dst, "ODD")
    assert ((odd.view(np.uint16) & 1)[~exact] == 1).all()


def test_round_mode_ties_away_on_float_narrowing() -> None:
    # 1 + 2^-11 is exactly halfway between two FP16 neighbours: RINT -> even (1.0), ROUND -> away.
    x = np.array([[1 + 2**-11, -(1 + 2**-11), 1 + 3 * 2**-11, 0.0] + [0.0] * 12], np.float32)
    rint, rnd = _cast(x, "fp32", "fp16", "RINT"), _cast(x, "fp32", "fp16", "ROUND")
    assert rint[0, 0] == 1.0 and rint[0, 1] == -1.0 and rint[0, 2] == 1 + 4 * 2**-11
    assert rnd[0, 0] == 1 + 2**-10 and rnd[0, 1] == -(1 + 2**-10) and rnd[0, 2] == 1 + 4 * 2**-11


def test_mask_is_packed_lsb_first_zero_padded_and_sized() -> None:
    x = np.zeros((2, 20), np.float32)
    x[0, [0, 3, 8, 19]] = 1.0
    x[1, [1, 7, 16]] = 1.0
    # The mask is [2, 32] UINT8 (roundup(ceil(20/8), 32)), valid [2, 3]; store it into a [2, 32] local.
    pb = ProgramBuilder("mask")
    src = pb.local("x", "fp32", [2, 20])
    out = pb.local("out", "uint8", [2, 32])
    fb = pb.function()
    t = fb.pld.tile.load(src, [0, 0], [2, 20])
    m = fb.pld.tile.cmps(t, 0.5, "GT")
    assert m.type.shape == (2, 32) and [getattr(v, "value", None) for v in m.type.valid_shape] == [2, 3]
    fb.pld.tile.store(m, [0, 0], out)
    (got,) = run_local(pb.build(), {"x": x, "out": np.full((2, 32), 0xEE, np.uint8)})
    assert list(got["out"][0, :3]) == [0b00001001, 0b00000001, 0b00001000]
    assert list(got["out"][1, :3]) == [0b10000010, 0b00000000, 0b00000001]
    assert (got["out"][:, 3:] == 0xEE).all()  # only the valid carrier bytes are stored


def test_bf16_windows_are_poisoned_nan_and_move_bit_exact_through_allgather() -> None:
    from mpi4py import MPI

    from pldemu.ir import NR
    from pldemu.lowering import lower_composite_ops
    from pldemu.runtime import ProgramInstance, RuntimeOptions

    pb = ProgramBuilder("bf16_allgather")
    loc = pb.local("loc", "bf16", [1, 40])
    target = pb.window("target", "bf16", [NR, 40])
    sig = pb.signal("sig", [NR, 1])
    pb.function().pld.tensor.allgather(loc, target, sig)
    with ProgramInstance(lower_composite_ops(pb.build()), MPI.COMM_SELF, RuntimeOptions()) as inst:
        assert inst.local("target").dtype == np.dtype(BF16)
        assert np.isnan(inst.local("target").astype(np.float32)).all()  # poison is NaN, not 0xA5A5
        data = (np.arange(40, dtype=np.float32) / 3).astype(BF16)[None]
        inst.local("loc")[...] = data
        inst.run()
        assert np.array_equal(inst.local("target").view(np.uint16), data.view(np.uint16))


def test_int32_to_fp16_rounds_to_nearest_and_overflows_to_inf() -> None:
    x = np.array([[2049, 2051, -2051, 65504, 65519, 65520, 1 << 30, -(1 << 30)] + [0] * 8], np.int32)
    got = _cast(x, "int32", "fp16", "RINT")
    assert list(got[0, :8]) == [2048, 2052, -2052, 65504, 65504, np.inf, np.inf, -np.inf]
    assert _cast(x, "int32", "fp16", "FLOOR")[0, 6] == 65504 and _cast(x, "int32", "fp16", "CEIL")[0, 5] == np.inf


def test_run_summary_and_dump_treat_bf16_as_a_float(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pldemu.harness.run import buffer_summary as _summary

    a = np.array([1.5, np.nan, -2.0], np.float32).astype(BF16)
    assert _summary(a).startswith("sum=-0.5 min=-2 max=1.5 nan=1 crc32=")
