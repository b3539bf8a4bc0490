"""tile.move / tile.matmul / tile.batch_matmul / tile.matmul_acc against references computed here, element by
element, in exact arithmetic (``math.fsum`` of the products for floats, Python integers for the integer
types), then rounded once to FP32 or wrapped to INT32: every operand dtype pypto's deducer lets through,
valid boxes and the pad, the accumulator, broadcasting batches, the memory-space rules and refusals."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local

from pldemu.ir import DType, Op, ProgramBuilder
from pldemu.ir.signatures import make_call
from pldemu.ir.vocabulary import IRTypeError

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": BF16}
INTS = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
        "uint32": np.uint32, "int64": np.int64}
M, K, N = 4, 32, 8


def _dot_fp32(a: np.ndarray, b: np.ndarray, acc: float = 0.0) -> np.ndarray:
    """Each output element: the exact sum (fsum) of the exact products (and ``acc``), rounded once to FP32."""
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            terms = [float(a[i, k]) * float(b[k, j]) for k in range(a.shape[1])]
            out[i, j] = np.float32(math.fsum([*terms, float(np.asarray(acc)[i, j] if np.ndim(acc) else acc)]))
    return out


def _dot_int32(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
    """Each output element in Python integers, wrapped (two's complement) to INT32."""
    out = np.empty((a.shape[0], b.shape[1]), np.int32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = sum(int(a[i, k]) * int(b[k, j]) for k in range(a.shape[1])) + (0 if acc is None else int(acc[i, j]))
            out[i, j] = (s + 2**31) % 2**32 - 2**31
    return out


def _program(dtype: str, a_valid: list[int] | None = None, b_valid: list[int] | None = None,
             acc: str | None = None, shape: tuple[int, int, int] = (M, K, N)) -> ProgramBuilder:
    """a [m, k] and b [k, n] loaded (narrowed by set_validshape, so the pad holds the input's own values), moved
    through Mat into Left / Right and multiplied; ``acc``: "add" accumulates into c0, "init" with init_cond."""
    m, k, n = shape
    out_dtype = "fp32" if dtype in FLOATS else "int32"
    pb = ProgramBuilder("mm")
    a, b = pb.local("a", dtype, [m, k]), pb.local("b", dtype, [k, n])
    c0, out = pb.local("c0", out_dtype, [m, n]), pb.local("out", out_dtype, [m, n])
    fb = pb.function()
    t = fb.pld.tile
    ta, tb = t.load(a, [0, 0], [m, k], hint="ta"), t.load(b, [0, 0], [k, n], hint="tb")
    if a_valid is not None:
        ta = t.set_validshape(ta, a_valid)
    if b_valid is not None:
        tb = t.set_validshape(tb, b_valid)
    left = t.move(t.move(ta, "Mat"), "Left", hint="l")
    right = t.move(t.move(tb, "Mat"), "Right", hint="r")
    if acc is None:
        res = t.matmul(left, right)
    else:
        start = t.move(t.load(c0, [0, 0], [m, n], hint="c"), "Acc", hint="c_acc")
        res = t.matmul_acc(start, left, right, None if acc == "add" else fb.let("first", 1).eq(1))
    t.store(res, [0, 0], out)
    return pb


def _run(pb: ProgramBuilder, **inputs: np.ndarray) -> np.ndarray:
    return run_local(pb.build(), inputs)[0]["out"]


def _floats(dtype: np.dtype, shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", list(FLOATS))
def test_float_matmul_accumulates_in_fp32_and_rounds_once(dtype: str) -> None:
    dt = FLOATS[dtype]
    a, b = _floats(dt, (M, K), 1), _floats(dt, (K, N), 2)
    a[0, :4] = [3.0, 1e-3, -3.0, 2.0**-10]  # cancellation: an FP16 / BF16 accumulator would lose the small terms
    b[:4, 0] = [1.0, 1.0, 1.0, 1.0]
    got = _run(_program(dtype), a=a, b=b, c0=np.zeros((M, N), np.float32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, _dot_fp32(a, b))


@pytest.mark.parametrize("dtype", list(INTS))
def test_integer_matmul_accumulates_in_int32_and_wraps(dtype: str) -> None:
    info = np.iinfo(INTS[dtype])
    rng = np.random.default_rng(3)
    a = rng.integers(info.min, info.max, (M, K), endpoint=True).astype(INTS[dtype])
    b = rng.integers(info.min, info.max, (K, N), endpoint=True).astype(INTS[dtype])
    a[0, :], b[:, 0] = info.max, info.max  # the largest products: INT32 overflows for 16 bits and wider
    got = _run(_program(dtype), a=a, b=b, c0=np.zeros((M, N), np.int32))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, _dot_int32(a, b))


def test_int8_extremes_do_not_wrap_below_int32() -> None:
    a = np.full((M, K), -128, np.int8)
    b = np.full((K, N), -128, np.int8)
    got = _run(_program("int8"), a=a, b=b, c0=np.zeros((M, N), np.int32))
    assert (got == 128 * 128 * K).all()  # 524288: an int8 accumulator (torch's codegen) would give 0


def test_the_cube_reads_lhs_valid_m_k_and_rhs_valid_n_only() -> None:
    a, b = _floats(np.dtype(np.float32), (M, K), 4), _floats(np.dtype(np.float32), (K, N), 5)
    a[:, 20:] = np.nan  # the pad past lhs valid K, and b's rows past it: never read
    b[20:, :] = np.inf
    pb = _program("fp32", a_valid=[3, 20], b_valid=[24, 5])
    sentinel = np.full((M, N), -7.0, np.float32)
    run = run_local(pb.build(), {"a": a, "b": b, "c0": sentinel, "out": sentinel})[0]["out"]
    np.testing.assert_array_equal(run[:3, :5], _dot_fp32(a[:3, :20], b[:20, :5]))
    assert (run[3:, :] == -7.0).all() and (run[:, 5:] == -7.0).all()  # the store writes the valid box only


def test_rhs_valid_k_must_cover_lhs_valid_k() -> None:
    with pytest.raises(IRTypeError, match="rhs valid K to cover lhs valid K, but got lhs K=20 and rhs K=12"):
        _program("fp32", a_valid=[4, 20], b_valid=[12, 8])


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
def test_matmul_acc_adds_the_exact_product_to_the_accumulator_once(dtype: str) -> None:
    if dtype == "int8":
        a = np.full((M, K), 127, np.int8)
        b = np.full((K, N), 127, np.int8)
        c0 = np.full((M, N), 2**31 - 100, np.int32)  # the sum wraps past INT32_MAX
        want = _dot_int32(a, b, c0)
    else:
        dt = FLOATS[dtype]
        a, b = _floats(dt, (M, K), 6), _floats(dt, (K, N), 7)
        c0 = _floats(np.dtype(np.float32), (M, N), 8) * np.float32(1e4)
        want = _dot_fp32(a, b, c0)
    got = _run(_program(dtype, acc="add"), a=a, b=b, c0=c0)
    np.testing.assert_array_equal(got, want)


def test_matmul_acc_init_cond_overwrites_and_keeps_the_accumulator_outside_the_product() -> None:
    a, b = _floats(np.dtype(np.float32), (M, K), 9), _floats(np.dtype(np.float32), (K, N), 10)
    c0 = np.full((M, N), 5.0, np.float32)
    got = _run(_program("fp32", acc="init", a_valid=[2, K], b_valid=[K, 3]), a=a, b=b, c0=c0)
    np.testing.assert_array_equal(got[:2, :3], _dot_fp32(a[:2], b[:, :3]))
    assert (got[2:, :] == 5.0).all() and (got[:, 3:] == 5.0).all()


def _batch_program(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> ProgramBuilder:
    pb = ProgramBuilder("bmm")
    a, b = pb.local("a", "fp16", list(lhs)), pb.local("b", "fp16", list(rhs))
    batch = np.broadcast_shapes(lhs[:-2], rhs[:-2])
    out = pb.local("out", "fp32", [*batch, lhs[-2], rhs[-1]])
    fb = pb.function()
    t = fb.pld.tile
    left = t.move(t.load(a, [0] * len(lhs), list(lhs)), "Left")
    right = t.move(t.load(b, [0] * len(rhs), list(rhs)), "Right")
    t.store(t.matmul(left, right), [0] * len(out.type.shape), out)  # type: ignore[union-attr]
    return pb


@pytest.mark.parametrize(("lhs", "rhs"), [((3, 4, 16), (3, 16, 8)), ((4, 16), (2, 16, 8)), ((1, 4, 16), (3, 16, 8))])
def test_batch_matmul_broadcasts_the_batch_dims(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> None:
    a = _floats(np.dtype(np.float16), (int(np.prod(lhs[:-1])), lhs[-1]), 11).reshape(lhs)
    b = _floats(np.dtype(np.float16), (int(np.prod(rhs[:-1])), rhs[-1]), 12).reshape(rhs)
    got = _run(_batch_program(lhs, rhs), a=a, b=b)
    batch = np.broadcast_shapes(lhs[:-2], rhs[:-2])
    a_b, b_b = np.broadcast_to(a, (*batch, *lhs[-2:])), np.broadcast_to(b, (*batch, *rhs[-2:]))
    for idx in np.ndindex(*batch):
        np.testing.assert_array_equal(got[idx], _dot_fp32(a_b[idx], b_b[idx]))


def test_transpose_swaps_any_two_axes_and_their_valid_extents() -> None:
    pb = ProgramBuilder("tr")
    x = pb.local("x", "int32", [2, 4, 8])
    out = pb.local("out", "int32", [8, 4, 2])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0, 0], [2, 4, 8], valid_shape=[2, 3, 8])
    fb.pld.tile.store(fb.pld.tile.transpose(t, 0, -1), [0, 0, 0], out)
    data = np.arange(64, dtype=np.int32).reshape(2, 4, 8)
    got = run_local(pb.build(), {"x": data, "out": np.zeros((8, 4, 2), np.int32)})[0]["out"]
    np.testing.assert_array_equal(got[:, :3, :], data.transpose(2, 1, 0)[:, :3, :])
    assert (got[:, 3, :] == 0).all()  # the transposed pad is still pad: not stored


def _tiles(fb, dtype: str = "fp32", shapes: tuple[list[int], list[int]] = ([M, K], [K, N]),  # type: ignore[no-untyped-def]
           spaces: tuple[str, str] = ("Left", "Right")):
    return [fb.pld.tile.move(fb.pld.tile.create(s, dtype), sp) for s, sp in zip(shapes, spaces, strict=True)]


@pytest.mark.parametrize(("spaces", "dtypes", "shapes", "match"), [
    (("Vec", "Right"), ("fp32", "fp32"), ([M, K], [K, N]), "takes its lhs in Left memory .*, but got a Vec tile"),
    (("Left", "Mat"), ("fp32", "fp32"), ([M, K], [K, N]), "takes its rhs in Right memory .*, but got a Mat tile"),
    (("Left", "Right"), ("fp16", "bf16"), ([M, K], [K, N]), "identical lhs and rhs data types"),
    (("Left", "Right"), ("bool", "bool"), ([M, K], [K, N]), "identical lhs and rhs data types from"),
    (("Left", "Right"), ("fp32", "fp32"), ([M, K], [K + 8, N]), "physical K.*lhs K=32 and rhs K=40"),
])
def test_matmul_refuses_what_pypto_refuses(spaces: tuple[str, str], dtypes: tuple[str, str],
                                          shapes: tuple[list[int], list[int]], match: str) -> None:
    fb = ProgramBuilder("bad").function()
    lhs, rhs = (fb.pld.tile.move(fb.pld.tile.create(s, d), sp) if sp != "Vec" else fb.pld.tile.create(s, d)
                for s, d, sp in zip(shapes, dtypes, spaces, strict=True))
    with pytest.raises(IRTypeError, match=match):
        make_call(Op.TILE_MATMUL, [lhs, rhs])


def test_matmul_acc_and_move_refusals() -> None:
    fb = ProgramBuilder("bad").function()
    lhs, rhs = _tiles(fb)
    vec_acc = fb.pld.tile.create([M, N], "fp32")
    with pytest.raises(IRTypeError, match="acc in Acc memory, but got a Vec tile"):
        make_call(Op.TILE_MATMUL_ACC, [vec_acc, lhs, rhs])
    int_acc = fb.pld.tile.move(fb.pld.tile.create([M, N], "int32"), "Acc")
    with pytest.raises(IRTypeError, match="accumulator dtype fp32, but got int32"):
        make_call(Op.TILE_MATMUL_ACC, [int_acc, lhs, rhs])
    small = fb.pld.tile.move(fb.pld.tile.create([M, N - 4], "fp32"), "Acc")
    with pytest.raises(IRTypeError, match="matching physical M and N"):
        make_call(Op.TILE_MATMUL_ACC, [small, lhs, rhs])
    with pytest.raises(IRTypeError, match="on-chip spaces"):
        make_call(Op.TILE_MOVE, [lhs], {"target_memory": "DDR"})
    with pytest.raises(IRTypeError, match="rank-2 tile"):
        make_call(Op.TILE_MATMUL, [fb.pld.tile.move(fb.pld.tile.create([2, M, K], "fp32"), "Left"), rhs])


def test_move_keeps_shape_dtype_valid_box_and_values() -> None:
    fb = ProgramBuilder("mv").function()
    x = fb.pld.tile.set_validshape(fb.pld.tile.create([M, K], "bf16"), [3, 7])
    moved = make_call(Op.TILE_MOVE, [x], {"target_memory": "Mat"})
    t = moved.type
    assert t.memory.name == "Mat" and t.dtype is DType.BF16 and t.shape == (M, K)  # type: ignore[union-attr]
    assert t.valid_shape == x.type.valid_shape  # type: ignore[union-attr]
    pb = ProgramBuilder("mv")
    src, out = pb.local("x", "int8", [M, K]), pb.local("out", "int8", [M, K])
    f = pb.function()
    f.pld.tile.store(f.pld.tile.move(f.pld.tile.move(f.pld.tile.load(src, [0, 0], [M, K]), "Mat"), "Vec"), [0, 0], out)
    data = np.arange(M * K, dtype=np.int64).reshape(M, K).astype(np.int8)  # wraps past 127
    np.testing.assert_array_equal(run_local(pb.build(), {"x": data})[0]["out"], data)
