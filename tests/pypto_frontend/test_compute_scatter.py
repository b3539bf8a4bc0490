"""pypto's scatter index form: ``pl.scatter(input, dim, index, src)`` / ``pl.tensor.scatter`` (pypto's
``tensor.scatter``: ``out[b, index[b, k]] = src[b, k]`` on a copy of ``input``) and ``pl.tile.scatter(dst, src,
indexes)`` (flat offsets, ``dst`` rewritten in place), in both front ends; run against numpy, and pypto's
refusals at the user's line."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
R, S, K = 8, 32, 8  # an INT32 / FP32 row of 8 and an FP16 / INT16 row of 16 are 32 bytes (ptoas's alignment)


@pl.program
class Scatters:
    """y: src's columns scattered into a copy of x by a per-row column index (unified spelling, keywords), then
    ``pl.tile.scatter`` of the same src at flat offsets into a tile, read back without its result (DPS);
    h: the FP16 form with INT16 indices (``pl.tensor.scatter``, positional)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32], idx: pl.Tensor[[R, K], pl.INT32],
          flat: pl.Tensor[[R, K], pl.INT32], hx: pl.Tensor[[R, S], pl.FP16], hsrc: pl.Tensor[[R, 16], pl.FP16],
          hidx: pl.Tensor[[R, 16], pl.INT16], y: pl.Out[pl.Tensor[[2, R, S], pl.FP32]],
          h: pl.Out[pl.Tensor[[R, S], pl.FP16]]) -> None:
        y = pl.assemble(y, pl.scatter(x, dim=-1, index=idx, src=src), [0, 0, 0])
        t = pl.load(x, [0, 0], [R, S])
        pl.tile.scatter(t, pl.load(src, [0, 0], [R, K]), pl.load(flat, [0, 0], [R, K]))
        y = pl.assemble(y, t, [1, 0, 0])
        pl.store(pl.tensor.scatter(hx, 1, hidx, hsrc), [0, 0], h)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, R, S], pl.FP32], src: pl.Tensor[[NR, R, K], pl.FP32],
                  idx: pl.Tensor[[NR, R, K], pl.INT32], flat: pl.Tensor[[NR, R, K], pl.INT32],
                  hx: pl.Tensor[[NR, R, S], pl.FP16], hsrc: pl.Tensor[[NR, R, 16], pl.FP16],
                  hidx: pl.Tensor[[NR, R, 16], pl.INT16], y: pl.Out[pl.Tensor[[NR, 2, R, S], pl.FP32]],
                  h: pl.Out[pl.Tensor[[NR, R, S], pl.FP16]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], src[r], idx[r], flat[r], hx[r], hsrc[r], hidx[r], y[r], h[r], device=r)


def _columns(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Per row ``k`` distinct destination columns of ``S``, in a random order."""
    return np.stack([np.stack([rng.permutation(S)[:k] for _ in range(R)]) for _ in range(n)])


def _args(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(21)
    x = rng.standard_normal((n, R, S)).astype(np.float32)
    src = rng.standard_normal((n, R, K)).astype(np.float32)
    idx = _columns(rng, n, K).astype(np.int32)
    flat = np.stack([rng.permutation(R * S)[:R * K].reshape(R, K) for _ in range(n)]).astype(np.int32)
    hx = rng.standard_normal((n, R, S)).astype(np.float16)
    hsrc = rng.standard_normal((n, R, 16)).astype(np.float16)
    hidx = _columns(rng, n, 16).astype(np.int16)
    return (x, src, idx, flat, hx, hsrc, hidx, np.zeros((n, 2, R, S), np.float32), np.zeros((n, R, S), np.float16))


def _reference(x: np.ndarray, src: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``out[b, idx[b, k]] = src[b, k]`` on a copy of ``x``, element by element."""
    out = x.copy()
    for b in range(idx.shape[0]):
        for k in range(idx.shape[1]):
            out[b, idx[b, k]] = src[b, k]
    return out


def test_the_forms_translate_to_tile_scatter() -> None:
    built, _ = translate(Scatters, 1, _args(1))
    calls = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_SCATTER]
    assert [c.attr("per_row") for c in calls] == [1, 0, 1]


@pytest.mark.launcher
def test_scatters_run_on_two_ranks() -> None:
    x, src, idx, flat, hx, hsrc, hidx, y, h = _args(2)
    ir.compile(Scatters, distributed_config=DistributedConfig(device_ids=[0, 1]))(x, src, idx, flat, hx, hsrc, hidx,
                                                                                  y, h)
    for r in range(2):
        np.testing.assert_array_equal(y[r, 0], _reference(x[r], src[r], idx[r]))
        flat_out = x[r].reshape(-1).copy()
        flat_out[flat[r].reshape(-1)] = src[r].reshape(-1)
        np.testing.assert_array_equal(y[r, 1], flat_out.reshape(R, S))
        np.testing.assert_array_equal(h[r], _reference(hx[r], hsrc[r], hidx[r]))


@pl.jit.incore
def jit_scatter(x: pl.Tensor, src: pl.Tensor, idx: pl.Tensor, y: pl.Out[pl.Tensor]):
    return pl.store(pl.scatter(x, -1, idx, src), [0, 0], y)


@pl.jit
def jit_entry(x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32], idx: pl.Tensor[[R, K], pl.INT32],
              y: pl.Out[pl.Tensor[[R, S], pl.FP32]]):
    return jit_scatter(x, src, idx, y)


def test_a_jit_kernel_spells_the_index_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path))  # pypto's build folder, not the working one
    x, src, idx = (a[0] for a in _args(1)[:3])
    args = [x, src, idx, np.zeros_like(x)]
    built, _ = translate(jit_entry.compile(*args).program, 1, args)
    (call,) = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_SCATTER]
    assert call.attr("per_row") == 1 and call.type.shape == (R, S)


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32],
              idx: pl.Tensor[[R, K], pl.INT32], hidx: pl.Tensor[[R, 16], pl.INT16],
              y: pl.Out[pl.Tensor[[R, S], pl.FP32]]) -> None:
            out = x
            if mistake == "dim":
                out = pl.scatter(x, 0, idx, src)  # MARK-dim
            if mistake == "mixed":
                out = pl.scatter(x, -1, idx, src, dst=x)  # MARK-mixed
            if mistake == "missing":
                out = pl.scatter(x, dim=-1, index=idx)  # MARK-missing
            if mistake == "neither":
                out = pl.scatter(x)  # MARK-neither
            if mistake == "index-width":
                out = pl.scatter(x, -1, hidx, x)  # MARK-index-width
            pl.store(out, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32],
                      idx: pl.Tensor[[R, K], pl.INT32], hidx: pl.Tensor[[R, 16], pl.INT16],
                      y: pl.Out[pl.Tensor[[R, S], pl.FP32]]) -> None:
            self.k(x, src, idx, hidx, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("dim", "The operator tensor.scatter currently supports dim=-1 (last axis) only, got dim=0"),
    ("mixed", "scatter() index form (dim, index, src) and mask form (mask_pattern, dst) are mutually exclusive"),
    ("missing", "scatter() index form requires dim, index and src"),
    ("neither", "scatter() requires (dim, index, src) for index form, or (mask_pattern=<int>, dst=...)"),
    ("index-width", "The operator tensor.scatter with input dtype fp32 (4 bytes) requires index dtype of 4 bytes, "
                    "but got int16 (2 bytes)"),
])
def test_pyptos_refusals_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, S), np.float32), np.zeros((R, K), np.float32), np.zeros((R, K), np.int32),
            np.zeros((R, 16), np.int16), np.zeros((R, S), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


@pl.program
class OutOfRange:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32], idx: pl.Tensor[[R, K], pl.INT32],
          y: pl.Out[pl.Tensor[[R, S], pl.FP32]]) -> None:
        pl.store(pl.scatter(x, -1, idx, src), [0, 0], y)  # MARK-range

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, S], pl.FP32], src: pl.Tensor[[R, K], pl.FP32],
                  idx: pl.Tensor[[R, K], pl.INT32], y: pl.Out[pl.Tensor[[R, S], pl.FP32]]) -> None:
        self.k(x, src, idx, y)


@pytest.mark.launcher
def test_an_index_outside_the_row_is_refused_when_it_runs() -> None:
    idx = np.zeros((R, K), np.int32)
    idx[3, 5] = S
    with pytest.raises(Exception, match=re.escape(f"tile.scatter: index {S} is outside a row's {S} elements")):
        ir.compile(OutOfRange, distributed_config=DistributedConfig(device_ids=[0]))(
            np.zeros((R, S), np.float32), np.zeros((R, K), np.float32), idx, np.zeros((R, S), np.float32))


def _line_of(marker: str) -> int:
    src, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(i for i, line in enumerate(src, 1) if marker in line and "_line_of" not in line)
