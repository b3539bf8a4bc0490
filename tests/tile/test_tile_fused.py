"""tile.addc / tile.addsc, tile.tri, tile.fillpad_expand and the cube's tile.matmul_bias / tile.gemv / gemv_acc /
gemv_bias, run on one rank against references written here: Python ints and float64 arithmetic rounded per
step (two roundings for the three-operand adds, as the device's two TADDs), numpy's tril / triu for the
triangle, the exact dot product plus the bias rounded once for the cube; and their refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local

from pldemu.ir import Const, DType, Op, ProgramBuilder, Var
from pldemu.ir.builder import as_list
from pldemu.ir.enums import PadValue
from pldemu.ir.nodes import TileType
from pldemu.ir.signatures import make_call as _make_call
from pldemu.ir.vocabulary import IRTypeError

SHAPE = (4, 32)
NP = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
      "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8), "int16": np.dtype(np.int16),
      "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
      "int64": np.dtype(np.int64)}
SENTINEL = 77


def make_call(op: Op, args: list[Any], attrs: dict[str, Any] | None = None) -> Any:
    """The signature check of ``op`` on ``args`` (Python lists as list expressions, as the builder passes them)."""
    return _make_call(op, [as_list(a) if isinstance(a, list) else a for a in args], attrs or {})


def _wrap(v: int, dt: np.dtype) -> int:
    bits = 8 * dt.itemsize
    low = -(1 << (bits - 1)) if dt.kind == "i" else 0
    return (v - low) % (1 << bits) + low


def _add(x: Any, y: Any, dt: np.dtype) -> Any:
    """One addition of two ``dt`` values, exactly, then rounded once (float64 holds any sum of two of them) or
    wrapped."""
    if dt.kind in "iu":
        return _wrap(int(x) + int(y), dt)
    return np.array(float(x) + float(y)).astype(dt)


def _three(dtype: str, body: Callable[[Any, list[Var]], Var], arrays: list[np.ndarray],
           valid: list[int] | None = None) -> np.ndarray:
    """``body(fb, tiles)`` of the tiles loaded from ``arrays`` (the first narrowed to ``valid``), stored into a
    sentinel-filled output."""
    pb = ProgramBuilder("fused")
    out = pb.local("out", dtype, list(SHAPE))
    inputs = {"out": np.full(SHAPE, SENTINEL, NP[dtype])}
    fb = pb.function()
    tiles = []
    for k, arr in enumerate(arrays):
        inputs[f"a{k}"] = arr
        src = pb.local(f"a{k}", dtype, list(SHAPE))
        tiles.append(fb.pld.tile.load(src, [0, 0], list(SHAPE), valid_shape=valid if k == 0 else None, hint=f"t{k}"))
    fb.pld.tile.store(body(fb, tiles), [0, 0], out)
    return run_local(pb.build(), inputs)[0]["out"]


def _operands(dtype: str, seed: int, n: int) -> list[np.ndarray]:
    dt = NP[dtype]
    rng = np.random.default_rng(seed)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return [rng.integers(info.min, info.max, SHAPE, endpoint=True, dtype=dt) for _ in range(n)]
    return [rng.uniform(-100, 100, SHAPE).astype(dt) for _ in range(n)]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8", "uint8", "int16", "int32", "uint32", "int64"])
def test_addc_adds_twice_each_rounded_or_wrapped(dtype: str) -> None:
    a, b, c = _operands(dtype, 3, 3)
    got = _three(dtype, lambda fb, t: fb.op(Op.TILE_ADDC, t, hint="r"), [a, b, c])
    dt = NP[dtype]
    want = np.array([[_add(_add(a[i, j], b[i, j], dt), c[i, j], dt) for j in range(SHAPE[1])]
                     for i in range(SHAPE[0])]).astype(dt)
    np.testing.assert_array_equal(got, want)


def test_addc_rounds_after_each_addition_not_once() -> None:
    """1 + 2^-24 rounds back to 1 (a tie, to even) twice over; one rounding of 1 + 2^-23 would keep the ulp."""
    tiny = np.float32(2.0 ** -24)
    a, b = np.ones(SHAPE, np.float32), np.full(SHAPE, tiny, np.float32)
    got = _three("fp32", lambda fb, t: fb.op(Op.TILE_ADDC, t, hint="r"), [a, b, b])
    assert (got == 1.0).all()


def test_addc_keeps_lhs_valid_box() -> None:
    a, b, c = _operands("fp32", 5, 3)
    got = _three("fp32", lambda fb, t: fb.op(Op.TILE_ADDC, t, hint="r"), [a, b, c], valid=[3, 20])
    want = (a.astype(np.float64) + b).astype(np.float32) + c
    np.testing.assert_array_equal(got[:3, :20], want[:3, :20])
    assert (got[3:] == SENTINEL).all() and (got[:, 20:] == SENTINEL).all()


@pytest.mark.parametrize(("dtype", "scalar"), [("fp32", 0.1), ("fp16", 0.1), ("bf16", -3.3), ("int8", 200),
                                               ("uint16", -1), ("int32", 7)])
def test_addsc_takes_the_scalar_in_the_tile_dtype_then_adds_twice(dtype: str, scalar: Any) -> None:
    a, c = _operands(dtype, 9, 2)
    dt = NP[dtype]
    s = _wrap(int(scalar), dt) if dt.kind in "iu" else np.array(scalar).astype(dt)
    got = _three(dtype, lambda fb, t: fb.op(Op.TILE_ADDSC, [t[0], Const(scalar, DType.INT32 if dt.kind in "iu" else
                                                                          DType.FP32), t[1]], hint="r"), [a, c])
    want = np.array([[_add(_add(a[i, j], s, dt), c[i, j], dt) for j in range(SHAPE[1])]
                     for i in range(SHAPE[0])]).astype(dt)
    np.testing.assert_array_equal(got, want)


def _tile(dtype: DType, shape: tuple[int, ...], valid: tuple[Any, ...] | None = None, mem: str = "Vec") -> Var:
    from pldemu.ir.enums import MemorySpace

    return Var("t", TileType(dtype, shape, valid, MemorySpace[mem]))


def test_addsc_refuses_a_float_scalar_on_an_integer_tile_and_addc_mixed_tiles() -> None:
    i32 = _tile(DType.INT32, SHAPE)
    with pytest.raises(IRTypeError, match="requires an integer scalar"):
        make_call(Op.TILE_ADDSC, [i32, Const(1.5, DType.FP32), i32])
    with pytest.raises(IRTypeError, match="like lhs"):
        make_call(Op.TILE_ADDC, [i32, i32, _tile(DType.FP32, SHAPE)])
    with pytest.raises(IRTypeError, match="like lhs"):
        make_call(Op.TILE_ADDC, [i32, _tile(DType.INT32, (4, 16)), i32])


def _tri(dtype: str, diagonal: Any, upper: bool, valid: list[int] | None, shape: tuple[int, int] = (16, 32),
         runtime: bool = False) -> np.ndarray:
    pb = ProgramBuilder("tri")
    out = pb.local("out", dtype, list(shape))
    d = pb.local("d", "int32", [1, 8])
    fb = pb.function()
    diag: Any = fb.pld.tensor.read(d, [0, 0]) if runtime else Const(diagonal, DType.INT32)
    args: list[Any] = [diag, list(shape)] + ([valid] if valid is not None else [])
    r = fb.op(Op.TILE_TRI, args, {"dtype": DType(dtype), "upper": int(upper)}, hint="r")
    fb.pld.tile.store(r, [0, 0], out)
    dd = np.zeros((1, 8), np.int32)
    dd[0, 0] = diagonal
    return run_local(pb.build(), {"out": np.full(shape, SENTINEL, NP[dtype]), "d": dd})[0]["out"]


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("diagonal", [0, 3, -2, 40, -20])
def test_tri_is_torch_tril_and_triu(diagonal: int, upper: bool) -> None:
    got = _tri("fp32", diagonal, upper, None)
    ones = np.ones((16, 32))
    want = np.triu(ones, diagonal) if upper else np.tril(ones, diagonal)
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("dtype", ["int16", "int32", "uint16", "uint32", "fp16", "bf16", "int8", "uint8"])
def test_tri_writes_its_valid_box_only_with_a_run_time_diagonal(dtype: str) -> None:
    got = _tri(dtype, 1, False, [10, 20], runtime=True)
    want = np.tril(np.ones((10, 20)), 1).astype(NP[dtype])
    np.testing.assert_array_equal(got[:10, :20], want)
    assert (got[10:] == SENTINEL).all() and (got[:, 20:] == SENTINEL).all()


def test_tri_refusals_are_pyptos() -> None:
    d = Const(0, DType.INT32)
    with pytest.raises(IRTypeError, match="requires dtype to be one of"):
        make_call(Op.TILE_TRI, [d, [16, 32]], {"dtype": DType.INT64})
    with pytest.raises(IRTypeError, match="INT32 scalar"):
        make_call(Op.TILE_TRI, [Const(0, DType.INDEX), [16, 32]], {"dtype": DType.FP32})
    with pytest.raises(IRTypeError, match=r"0 < valid_shape\[i\] <= shape\[i\]"):
        make_call(Op.TILE_TRI, [d, [16, 32], [17, 3]], {"dtype": DType.FP32})
    with pytest.raises(IRTypeError, match="2-D shape"):
        make_call(Op.TILE_TRI, [d, [2, 16, 32]], {"dtype": DType.FP32})


def _expand(dtype: str, pad: PadValue, src: np.ndarray, valid: list[int], shape: list[int]) -> np.ndarray:
    pb = ProgramBuilder("fpe")
    a = pb.local("a", dtype, list(src.shape))
    out = pb.local("out", dtype, shape)
    fb = pb.function()
    t = fb.pld.tile.load(a, [0, 0], list(src.shape), valid_shape=valid, hint="t")
    fb.pld.tile.store(fb.op(Op.TILE_FILLPAD_EXPAND, [t, shape], {"pad": pad}, hint="r"), [0, 0], out)
    return run_local(pb.build(), {"a": src, "out": np.full(shape, SENTINEL, NP[dtype])})[0]["out"]


@pytest.mark.parametrize(("dtype", "pad", "fill"), [
    ("fp32", PadValue.zero, 0.0), ("fp32", PadValue.max, np.inf), ("fp16", PadValue.min, -np.inf),
    ("bf16", PadValue.max, np.inf), ("int16", PadValue.min, -32768), ("uint8", PadValue.max, 255)])
def test_fillpad_expand_copies_the_valid_box_top_left_and_pads_the_rest(dtype: str, pad: PadValue,
                                                                         fill: float) -> None:
    src = _operands(dtype, 13, 1)[0]
    got = _expand(dtype, pad, src, [3, 20], [8, 48])
    want = np.full((8, 48), fill).astype(NP[dtype])
    want[:3, :20] = src[:3, :20]
    np.testing.assert_array_equal(got, want)


def test_fillpad_expand_refusals_are_pyptos() -> None:
    t = _tile(DType.FP32, SHAPE)
    with pytest.raises(IRTypeError, match=r"must be positive and >= source dimension \(32\)"):
        make_call(Op.TILE_FILLPAD_EXPAND, [t, [8, 16]])
    with pytest.raises(IRTypeError, match="must match source rank"):
        make_call(Op.TILE_FILLPAD_EXPAND, [t, [8, 32, 2]])


M, K, N = 16, 32, 16


def _cube(body: Callable[[Any, dict[str, Var]], Var], dtype: str, out_shape: tuple[int, int], inputs:
          dict[str, np.ndarray]) -> np.ndarray:
    """Loads ``inputs`` (lhs ``a`` to Left, rhs ``b`` to Right, ``bias`` to Bias, ``acc`` as is), runs ``body``,
    stores its result into an FP32 / INT32 output."""
    acc_dt = "int32" if NP[dtype].kind in "iu" else "fp32"
    pb = ProgramBuilder("cube")
    out = pb.local("out", acc_dt, list(out_shape))
    fb = pb.function()
    t = fb.pld.tile
    tiles: dict[str, Var] = {}
    spaces = {"a": "Left", "b": "Right", "bias": "Bias"}
    for name, arr in inputs.items():
        buf = pb.local(name, dtype if name in ("a", "b") else acc_dt, list(arr.shape))
        loaded = t.load(buf, [0, 0], list(arr.shape), hint=f"{name}_t")
        tiles[name] = t.move(loaded, spaces[name], hint=f"{name}_m") if name in spaces else loaded
    fb.pld.tile.store(body(fb, tiles), [0, 0], out)
    arrays = dict(inputs, out=np.full(out_shape, SENTINEL, NP[acc_dt]))
    return run_local(pb.build(), arrays)[0]["out"]


def _matrices(dtype: str, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if NP[dtype].kind in "iu":
        return (rng.integers(-128, 128, (m, K)).astype(NP[dtype]), rng.integers(-128, 128, (K, N)).astype(NP[dtype]))
    return rng.standard_normal((m, K)).astype(NP[dtype]), rng.standard_normal((K, N)).astype(NP[dtype])


def _dot_plus(a: np.ndarray, b: np.ndarray, bias: np.ndarray, acc: str) -> np.ndarray:
    """Each cell: the exact dot product plus the bias (Python ints / math.fsum), rounded or wrapped once."""
    import math

    rows = []
    for i in range(a.shape[0]):
        if acc == "int32":
            rows.append([_wrap(sum(int(a[i, k]) * int(b[k, j]) for k in range(K)) + int(bias[0, j]),
                               np.dtype(np.int32)) for j in range(N)])
        else:
            rows.append([math.fsum([float(a[i, k]) * float(b[k, j]) for k in range(K)] + [float(bias[0, j])])
                         for j in range(N)])
    return np.array(rows).astype(np.int32 if acc == "int32" else np.float32)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "int8"])
def test_matmul_bias_adds_the_bias_row_to_the_exact_product_rounding_once(dtype: str) -> None:
    a, b = _matrices(dtype, M, 2)
    acc = "fp32" if dtype != "int8" else "int32"
    bias = (np.arange(N).reshape(1, N) * 3 - 7).astype(NP[acc])
    got = _cube(lambda fb, t: fb.op(Op.TILE_MATMUL_BIAS, [t["a"], t["b"], t["bias"]], hint="r"), dtype, (M, N),
                {"a": a, "b": b, "bias": bias})
    np.testing.assert_array_equal(got, _dot_plus(a, b, bias, acc))


@pytest.mark.parametrize("dtype", ["fp16", "int8"])
def test_gemv_gemv_acc_and_gemv_bias_fill_row_zero_of_a_16_row_result(dtype: str) -> None:
    a, b = _matrices(dtype, 1, 4)
    acc = "fp32" if dtype != "int8" else "int32"
    zero = np.zeros((1, N), NP[acc])
    bias = np.full((1, N), 5, NP[acc])

    def body(fb: Any, t: dict[str, Var]) -> Var:
        gv = fb.op(Op.TILE_GEMV, [t["a"], t["b"]], {"acc_phase": "partial"}, hint="gv")
        assert isinstance(gv.type, TileType) and gv.type.shape == (16, N)
        return fb.op(Op.TILE_GEMV_ACC, [gv, t["a"], t["b"]], {"acc_phase": "final"}, hint="acc")

    got = _cube(body, dtype, (1, N), {"a": a, "b": b, "bias": bias})
    once = _dot_plus(a, b, zero, acc)
    np.testing.assert_array_equal(got, _dot_plus(a, b, once.astype(NP[acc]), acc))
    biased = _cube(lambda fb, t: fb.op(Op.TILE_GEMV_BIAS, [t["a"], t["b"], t["bias"]], hint="gb"), dtype, (1, N),
                   {"a": a, "b": b, "bias": bias})
    np.testing.assert_array_equal(biased, _dot_plus(a, b, bias, acc))


def test_gemv_and_bias_refusals_are_pyptos() -> None:
    row = _tile(DType.FP16, (1, K), mem="Left")
    rhs = _tile(DType.FP16, (K, N), mem="Right")
    with pytest.raises(IRTypeError, match="row extent to be exactly 1"):
        make_call(Op.TILE_GEMV, [_tile(DType.FP16, (2, K), mem="Left"), rhs])
    with pytest.raises(IRTypeError, match="supports only INT8 x INT8"):
        make_call(Op.TILE_GEMV, [_tile(DType.INT16, (1, K), mem="Left"), _tile(DType.INT16, (K, N), mem="Right")])
    with pytest.raises(IRTypeError, match="acc_phase to be one of"):
        make_call(Op.TILE_GEMV, [row, rhs], {"acc_phase": "later"})
    with pytest.raises(IRTypeError, match=r"requires an accumulator fp32\[16, 16\]"):
        make_call(Op.TILE_GEMV_ACC, [_tile(DType.FP32, (1, N), mem="Acc"), row, rhs])
    with pytest.raises(IRTypeError, match="in Bias memory"):
        make_call(Op.TILE_GEMV_BIAS, [row, rhs, _tile(DType.FP32, (1, N))])
    with pytest.raises(IRTypeError, match=r"bias to have shape \[1, 16\]"):
        make_call(Op.TILE_MATMUL_BIAS, [_tile(DType.FP16, (M, K), mem="Left"), rhs,
                                        _tile(DType.FP32, (2, N), mem="Bias")])
    with pytest.raises(IRTypeError, match="bias dtype fp32 to match the accumulator"):
        make_call(Op.TILE_MATMUL_BIAS, [_tile(DType.FP16, (M, K), mem="Left"), rhs,
                                        _tile(DType.FP16, (1, N), mem="Bias")])
