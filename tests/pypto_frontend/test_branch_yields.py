"""Values an ``if`` gives its names, as pypto's parser makes them: a ``pl.yield_`` inside a branch is the
IfStmt's yield (its phi: ``step = pl.yield_(5)`` binds ``step`` after the ``if``), not the enclosing loop's;
a name every branch binds to a constant (``pl.const``, ``pl.cast`` of a literal) is one variable after it, the
branch taken's; and a tensor carried by ``pl.range(init_values=)`` yielded as another buffer (a ping-pong swap,
which pldemu's once-translated loop body cannot follow) is refused at the yield. Run on one rank."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.errors import FrontendError
from pldemu.pypto.surface import language as pl


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


def _line_of(marker: str) -> int:
    src, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(i for i, line in enumerate(src, 1) if marker in line and "_line_of" not in line)


@pl.jit.incore
def phis(x: pl.Tensor[[8, 32], pl.FP32], sel: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[8, 32], pl.FP32]],
         z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    t0 = pl.load(x, [0, 0], [8, 32])
    for i, (acc, c) in pl.range(4, init_values=(t0, pl.const(0, pl.INT32))):
        if i == 0:  # a run-time if: its yields are its outputs
            step, t = pl.yield_(pl.const(5, pl.INT32), pl.mul(acc, 2.0))
        else:
            step, t = pl.yield_(pl.read(sel, [0, 0]), pl.add(acc, 1.0))
        acc2, c2 = pl.yield_(t, c + step)
    if 3 > 2:  # a static if is an IfStmt too
        last = pl.yield_(c2 + pl.const(100, pl.INT32))
    pl.store(acc2, [0, 0], y)
    pl.write(z, [0, 0], c2)
    pl.write(z, [0, 1], last)
    s = pl.read(sel, [0, 0])
    if s > 0:
        a = pl.read(sel, [0, 1])
        b = pl.const(7, pl.INT32)
        k = pl.cast(5, pl.INT32)
    else:
        a = pl.const(9, pl.INT32)
        b = pl.read(sel, [0, 2])
        k = pl.cast(6, pl.INT32)
    pl.write(z, [0, 2], a)
    pl.write(z, [0, 3], b)
    pl.write(z, [0, 4], k)
    return y


@pl.jit
def phis_orch(x: pl.Tensor[[8, 32], pl.FP32], sel: pl.Tensor[[1, 8], pl.INT32], y: pl.Out[pl.Tensor[[8, 32], pl.FP32]],
              z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    return phis(x, sel, y, z)


@pytest.mark.launcher
@pytest.mark.parametrize("s", [2, -1])
def test_an_ifs_yields_and_constants_are_the_branch_takens(s: int) -> None:
    x = np.random.default_rng(48).standard_normal((8, 32)).astype(np.float32)
    sel = np.array([[s, 11, 22, 0, 0, 0, 0, 0]], np.int32)
    y = np.zeros((8, 32), np.float32)
    z = np.zeros((1, 8), np.int32)
    phis_orch(x, sel, y, z)
    want = ((x * np.float32(2.0) + np.float32(1.0)) + np.float32(1.0)) + np.float32(1.0)
    np.testing.assert_array_equal(y, want)
    c = 5 + 3 * s
    assert list(z[0, :5]) == [c, c + 100, *([11, 7, 5] if s > 0 else [9, 22, 6])]


@pl.jit.inline
def stencil(cur: pl.Tensor[[8, 32], pl.FP32], nxt: pl.Tensor[[8, 32], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
        nxt[:, :] = pl.add(pl.mul(cur[:, :], 0.5), 1.0)
    return nxt


@pl.jit
def ping_pong(a: pl.Tensor[[8, 32], pl.FP32], out: pl.Out[pl.Tensor[[8, 32], pl.FP32]]):
    p = pl.create_tensor([8, 32], dtype=pl.FP32)
    q = pl.create_tensor([8, 32], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
        p[:, :] = a[:, :]
    for _s, (cur, nxt) in pl.range(3, init_values=(p, q)):
        nxt = stencil(cur, nxt)
        res, _spare = pl.yield_(nxt, cur)  # swapped: the next step reads what this one wrote
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="final"):
        out[:, :] = res[:, :]
    return out


def test_a_carried_tensor_yielded_as_another_buffer_is_refused_at_the_yield() -> None:
    a = np.zeros((8, 32), np.float32)
    with pytest.raises(FrontendError) as err:
        ping_pong(a, np.zeros_like(a))
    assert err.value.line == _line_of("res, _spare = pl.yield_(nxt, cur)")
    assert "a carried tensor yielded as another buffer (p carried, q yielded)" in str(err.value)


@pl.jit.incore
def merged_tiles(x: pl.Tensor[[8, 16], pl.FP32], w: pl.Tensor[[16, 8], pl.FP32], n: pl.Tensor[[1, 8], pl.INT32],
                 y: pl.Out[pl.Tensor[[8, 8], pl.FP32]]):
    k = pl.cast(pl.read(n, [0, 0]), pl.INDEX)
    if k > 0:  # a product (in the cube's Acc) and a row max of it (pldemu keeps it in Acc) ...
        xt = pl.load(x, [0, 0], [8, 16], valid_shape=[8, k])
        p = pl.matmul(xt, pl.load(w, [0, 0], [16, 8]))
        m, s = pl.yield_(pl.row_max(p, pl.create_tile([8, 8], dtype=pl.FP32)), pl.mul(p, 2.0))
    else:  # ... or fills in Vec: the same [8, 1] / [8, 8] FP32 tiles to pypto's phi
        m, s = pl.yield_(pl.full([8, 1], pl.FP32, -1.0), pl.full([8, 8], pl.FP32, 3.0))
    pl.store(pl.row_expand_add(s, m), [0, 0], y)
    return y


@pl.jit
def merged_tiles_orch(x: pl.Tensor[[8, 16], pl.FP32], w: pl.Tensor[[16, 8], pl.FP32], n: pl.Tensor[[1, 8], pl.INT32],
                      y: pl.Out[pl.Tensor[[8, 8], pl.FP32]]):
    return merged_tiles(x, w, n, y)


@pytest.mark.launcher
@pytest.mark.parametrize("k", [5, 0])
def test_an_ifs_tile_yields_of_one_type_in_other_memory_merge(k: int) -> None:
    """pypto's phi takes the first branch's type; a later branch's tile of the same shape and dtype in another
    memory space (a fill in Vec against a matmul's Acc) is moved to it, as a loop carry is, not refused."""
    rng = np.random.default_rng(49)
    x = rng.integers(-4, 5, (8, 16)).astype(np.float32)
    w = rng.integers(-4, 5, (16, 8)).astype(np.float32)
    n = np.array([[k, 0, 0, 0, 0, 0, 0, 0]], np.int32)
    y = np.zeros((8, 8), np.float32)
    merged_tiles_orch(x, w, n, y)
    p = x[:, :k] @ w[:k]
    want = p * 2 + p.max(-1, keepdims=True) if k else np.full((8, 8), 2.0, np.float32)
    np.testing.assert_array_equal(y, want)
