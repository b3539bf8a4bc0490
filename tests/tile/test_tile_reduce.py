"""Row / column reductions and expands against references written here in plain Python scalars or float64
numpy: the summation order (binary tree with a scratch, sequential without), every accepted dtype, the
valid box, and the refusals."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from tile_helpers import run_local

from pldemu.ir import Op, ProgramBuilder
from pldemu.ir.vocabulary import IRTypeError

NP = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
      "int16": np.dtype(np.int16), "int32": np.dtype(np.int32)}
SHAPE = (4, 32)


def _reduce(op: Op, dtype: str, x: np.ndarray, tmp: bool, valid: tuple[int, int] | None = None) -> np.ndarray:
    out_shape = [SHAPE[0], 1] if op.text.startswith("tile.row") else [1, SHAPE[1]]
    pb = ProgramBuilder("red")
    xb = pb.local("x", dtype, list(SHAPE))
    out = pb.local("out", dtype, out_shape)
    fb = pb.function()
    t = fb.pld.tile.load(xb, [0, 0], list(SHAPE), None if valid is None else list(valid), hint="t")
    scratch = fb.pld.tile.create(list(SHAPE), dtype, hint="tmp") if tmp else None
    fb.pld.tile.store(fb.pld.tile.reduce(op, t, scratch, hint="r"), [0, 0], out)
    fill = np.full(out_shape, 7, NP[dtype])
    return run_local(pb.build(), {"x": x, "out": fill})[0]["out"]


def _tree(values: list) -> object:  # type: ignore[type-arg]
    """Pairs element j with j + w // 2 of the w left, an odd last one carried (plain Python scalars)."""
    while len(values) > 1:
        half = len(values) // 2
        values = [values[i] + values[i + half] for i in range(half)] + values[2 * half:]
    return values[0]


def _sequential(values: list) -> object:  # type: ignore[type-arg]
    acc = values[0]
    for v in values[1:]:
        acc = acc + v
    return acc


def _data(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if NP[dtype].kind == "i":
        return rng.integers(-1000, 1000, SHAPE).astype(NP[dtype])
    return rng.normal(0.0, 3.0, SHAPE).astype(NP[dtype])


def _scalars(row: np.ndarray) -> list:  # type: ignore[type-arg]
    # numpy scalars of the tile's dtype: every + rounds to it (Python ints for integers would not wrap).
    return [row.dtype.type(v) for v in row]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int32", "int16"])
def test_row_sum_with_a_scratch_is_a_binary_tree(dtype: str) -> None:
    x = _data(dtype, 1)
    got = _reduce(Op.TILE_ROW_SUM, dtype, x, tmp=True)
    want = np.array([[_tree(_scalars(r))] for r in x], NP[dtype])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int32"])
def test_col_sum_without_a_scratch_is_sequential_and_with_one_a_tree(dtype: str) -> None:
    x = _data(dtype, 2)
    seq = _reduce(Op.TILE_COL_SUM, dtype, x, tmp=False)
    tree = _reduce(Op.TILE_COL_SUM, dtype, x, tmp=True)
    np.testing.assert_array_equal(seq, np.array([[_sequential(_scalars(c)) for c in x.T]], NP[dtype]))
    np.testing.assert_array_equal(tree, np.array([[_tree(_scalars(c)) for c in x.T]], NP[dtype]))


def test_the_order_changes_an_fp32_sum() -> None:
    x = np.zeros(SHAPE, np.float32)
    x[:, :4] = [1e8, 1.0, -1e8, 1.0]  # the rest are zeros: tree [(1e8 - 1e8) + ..., (1 + 1) + ...]
    row_tree = _reduce(Op.TILE_ROW_SUM, "fp32", x, tmp=True, valid=(4, 4))
    row_seq = _reduce(Op.TILE_ROW_SUM, "fp32", x, tmp=False, valid=(4, 4))
    assert row_tree[0, 0] == 2.0 and row_seq[0, 0] == 1.0


@pytest.mark.parametrize(("op", "dtypes"), [
    (Op.TILE_ROW_MAX, ["fp32", "fp16", "bf16", "int32", "int16"]),
    (Op.TILE_ROW_MIN, ["fp32", "fp16", "int32", "int16"]),
    (Op.TILE_COL_MAX, ["fp32", "fp16", "bf16", "int32", "int16"]),
    (Op.TILE_COL_MIN, ["fp32", "fp16", "bf16", "int32", "int16"]),
])
def test_extremes(op: Op, dtypes: list[str]) -> None:
    row = op.text.startswith("tile.row")
    for dtype in dtypes:
        x = _data(dtype, 3)
        fn = max if op.text.endswith("max") else min
        lines = x if row else x.T
        want = np.array([fn(_scalars(v)) for v in lines], NP[dtype])
        got = _reduce(op, dtype, x, tmp=row)
        np.testing.assert_array_equal(got.ravel(), want, err_msg=f"{op.text} {dtype}")


def test_only_the_valid_box_is_reduced_and_stored() -> None:
    x = np.arange(128, dtype=np.float32).reshape(SHAPE)
    rows = _reduce(Op.TILE_ROW_SUM, "fp32", x, tmp=True, valid=(3, 5))
    assert list(rows.ravel()) == [float(sum(x[i, :5])) for i in range(3)] + [7.0]  # row 3: not stored
    cols = _reduce(Op.TILE_COL_MAX, "fp32", x, tmp=False, valid=(3, 5))
    assert list(cols[0, :6]) == [float(v) for v in x[2, :5]] + [7.0]


def _expand(op: Op, dtype: str, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    pb = ProgramBuilder("exp")
    xb, vb = pb.local("x", dtype, list(x.shape)), pb.local("v", dtype, list(v.shape))
    out = pb.local("out", dtype, list(x.shape))
    fb = pb.function()
    t = fb.pld.tile.load(xb, [0, 0], list(x.shape), hint="t")
    vt = fb.pld.tile.load(vb, [0, 0], list(v.shape), hint="v")
    fb.pld.tile.store(fb.pld.tile.expand(op, t, vt, hint="e"), [0, 0], out)
    return run_local(pb.build(), {"x": x, "v": v})[0]["out"]


_REF: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "": lambda x, v: v + 0 * x, "_add": lambda x, v: x + v, "_sub": lambda x, v: x - v, "_mul": lambda x, v: x * v,
    "_div": lambda x, v: x / v, "_max": np.maximum, "_min": np.minimum,
}


@pytest.mark.parametrize("side", ["row", "col"])
@pytest.mark.parametrize("suffix", ["", "_add", "_sub", "_mul", "_div", "_max", "_min", "_expdif"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_expands_match_once_rounded_float64(side: str, suffix: str, dtype: str) -> None:
    dt = NP[dtype]
    rng = np.random.default_rng(9)
    x = rng.uniform(-2.0, 2.0, SHAPE).astype(dt)
    v = rng.uniform(0.5, 2.0, (SHAPE[0], 1) if side == "row" else (1, SHAPE[1])).astype(dt)
    got = _expand(Op(f"tile.{side}_expand{suffix}"), dtype, x, v)
    x64, v64 = x.astype(np.float64), v.astype(np.float64)
    if suffix == "_expdif":  # two steps: the difference rounded, then its exp
        want = np.exp((x64 - v64).astype(dt).astype(np.float64)).astype(dt)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=np.finfo(np.float32).eps
                                   if dtype == "fp32" else 2.0 ** -8)
    else:
        np.testing.assert_array_equal(got, _REF[suffix](x64, v64).astype(dt))


def test_integer_row_expand_div_truncates() -> None:
    x = np.tile(np.array([7, -7, 6, -1], np.int32), (SHAPE[0], 8))
    v = np.array([[2], [-2], [0], [3]], np.int32)
    got = _expand(Op.TILE_ROW_EXPAND_DIV, "int32", x, v)
    assert list(got[:, 0]) == [3, -3, 0, 2] and list(got[:, 1]) == [-3, 3, 0, -2]


def test_refusals() -> None:
    pb = ProgramBuilder("bad")
    xb = pb.local("x", "bf16", list(SHAPE))
    fb = pb.function()
    t = fb.pld.tile.load(xb, [0, 0], list(SHAPE), hint="t")
    with pytest.raises(IRTypeError, match="row_min"):
        fb.pld.tile.reduce(Op.TILE_ROW_MIN, t)
    with pytest.raises(IRTypeError, match="tmp_tile"):
        fb.pld.tile.reduce(Op.TILE_ROW_SUM, t, fb.pld.tile.create([4, 16], "bf16"))
    with pytest.raises(IRTypeError, match="one value per row"):
        fb.pld.tile.expand(Op.TILE_ROW_EXPAND_MUL, t, fb.pld.tile.create([1, 32], "bf16"))
    with pytest.raises(IRTypeError, match="one value per column"):
        fb.pld.tile.expand(Op.TILE_COL_EXPAND_MUL, t, fb.pld.tile.create([1, 32], "fp32"))


def test_a_vector_of_lower_rank_expands_a_tile_with_one_element_leading_axes() -> None:
    """pypto's deducer compares the trailing pair: a [R, 1] vector scales a [1, 1, R, C] tile (qwen3_32b
    decode_4d's rmsnorm); a [1, C] one offsets it per column; a leading axis of more than one element is not
    one run of rows and stays refused."""
    rows, cols = 4, 8
    x = np.arange(rows * cols, dtype=np.float32).reshape(1, 1, rows, cols)
    v = np.arange(1, rows + 1, dtype=np.float32).reshape(rows, 1)
    pb = ProgramBuilder("lower_rank")
    xb, vb, cb = pb.local("x", "fp32", list(x.shape)), pb.local("v", "fp32", [rows, 1]), pb.local("c", "fp32", [1, cols])
    out = pb.local("out", "fp32", list(x.shape))
    fb = pb.function()
    t = fb.pld.tile.load(xb, [0, 0, 0, 0], list(x.shape), hint="t")
    scaled = fb.pld.tile.expand(Op.TILE_ROW_EXPAND_MUL, t, fb.pld.tile.load(vb, [0, 0], [rows, 1], hint="v"))
    shifted = fb.pld.tile.expand(Op.TILE_COL_EXPAND_ADD, scaled, fb.pld.tile.load(cb, [0, 0], [1, cols], hint="c"))
    fb.pld.tile.store(shifted, [0, 0, 0, 0], out)
    c = np.full((1, cols), 0.5, np.float32)
    got = run_local(pb.build(), {"x": x, "v": v, "c": c})[0]["out"]
    np.testing.assert_array_equal(got, x * v + c)
    two = fb.pld.tile.create([2, rows, cols], "fp32")
    with pytest.raises(IRTypeError, match="one value per row"):
        fb.pld.tile.expand(Op.TILE_ROW_EXPAND_MUL, two, fb.pld.tile.create([rows, 1], "fp32"))
