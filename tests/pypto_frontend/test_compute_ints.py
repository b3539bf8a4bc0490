"""INT8 / UINT8 / INT16 / UINT16 / UINT32 / INT64 through pypto's elementwise, scalar-operand and scalar ops
(two's-complement wrap, as the device's registers), and ``pl.cast`` as pypto's LegalizeTileCast leaves
it: a chain of native casts, each hop in the cast's mode, and pypto's refusals."""

from __future__ import annotations

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
C = 32
INT_TYPES = [(pl.INT8, np.int8), (pl.UINT8, np.uint8), (pl.INT16, np.int16), (pl.UINT16, np.uint16),
             (pl.INT32, np.int32), (pl.UINT32, np.uint32), (pl.INT64, np.int64)]


def _wrapping(dt):  # type: ignore[no-untyped-def]
    @pl.program
    class Wrap:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: pl.Tensor[[2, C], dt], b: pl.Tensor[[2, C], dt], y: pl.Out[pl.Tensor[[9, 2, C], dt]]) -> None:
            x = pl.load(a, [0, 0], [2, C])
            z = pl.load(b, [0, 0], [2, C])
            y = pl.assemble(y, pl.add(x, z), [0, 0, 0])
            y = pl.assemble(y, pl.mul(x, z), [1, 0, 0])
            y = pl.assemble(y, pl.sub(x, z), [2, 0, 0])
            y = pl.assemble(y, pl.add(x, 200), [3, 0, 0])
            y = pl.assemble(y, pl.mul(x, 300), [4, 0, 0])
            y = pl.assemble(y, pl.sub(x, -129), [5, 0, 0])
            y = pl.assemble(y, pl.maximum(x, z), [6, 0, 0])
            y = pl.assemble(y, pl.minimum(x, 70000), [7, 0, 0])
            u = pl.read(a, [0, 0])
            v = pl.read(a, [0, 1])
            pl.write(y, [8, 0, 0], u * v)
            pl.write(y, [8, 0, 1], u + v)
            pl.write(y, [8, 0, 2], u - v - v)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, a: pl.Tensor[[NR, 2, C], dt], b: pl.Tensor[[NR, 2, C], dt],
                 y: pl.Out[pl.Tensor[[NR, 9, 2, C], dt]]) -> None:
            for r in pl.range(pld.world_size()):
                self.k(a[r], b[r], y[r], device=r)

    return Wrap


def _wrap(values: list[int], nd: type) -> np.ndarray:
    info = np.iinfo(nd)
    span = int(info.max) - int(info.min) + 1
    return np.array([(v - int(info.min)) % span + int(info.min) for v in values], dtype=nd)


def _golden(a: np.ndarray, b: np.ndarray, nd: type) -> np.ndarray:
    """Exact Python integers, wrapped once to the dtype (modular arithmetic: the same as wrapping each step)."""
    ai, bi = a.astype(object), b.astype(object)
    rows = [ai + bi, ai * bi, ai - bi, ai + 200, ai * 300, ai + 129, np.maximum(ai, bi), ai]  # row 7: below
    out = np.stack([_wrap(list(r.ravel()), nd).reshape(a.shape) for r in rows])
    u, v = int(a[0, 0]), int(a[0, 1])
    last = np.zeros(a.shape, nd)
    last[0, :3] = _wrap([u * v, u + v, u - v - v], nd)
    return np.concatenate([out, last[None]])


@pytest.mark.launcher
@pytest.mark.parametrize(("dt", "nd"), INT_TYPES, ids=[str(n.__name__) for _, n in INT_TYPES])
def test_integer_ops_wrap_as_the_device(dt, nd) -> None:  # type: ignore[no-untyped-def]
    info = np.iinfo(nd)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, (1, 2, C), endpoint=True, dtype=nd)
    b = rng.integers(info.min, info.max, (1, 2, C), endpoint=True, dtype=nd)
    a[0, 0, :2] = [info.max - 1, info.max - 2]  # the scalar products overflow
    y = np.zeros((1, 9, 2, C), nd)
    ir.compile(_wrapping(dt), distributed_config=DistributedConfig(device_ids=[0]))(a, b, y)
    want = _golden(a[0], b[0], nd)
    # The minimum's scalar is narrowed to the dtype first (70000 wraps in 8 and 16 bits), as pypto narrows it.
    want[7] = np.minimum(a[0], _wrap([70000], nd)[0])
    np.testing.assert_array_equal(y[0, :8], want[:8])
    np.testing.assert_array_equal(y[0, 8, 0, :3], want[8, 0, :3])


@pl.program
class Quant:
    """pypto-lib's INT8 quantisation chain (FP32 -rint-> INT32 -round-> FP16 -trunc-> INT8) and a direct
    FP32 -> INT8 and BF16 -> INT8 cast (2 and 3 native hops on a2a3), INT64 -> FP16."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[2, C], pl.FP32], w: pl.Tensor[[2, C], pl.BF16], n: pl.Tensor[[2, C], pl.INT64],
          q: pl.Out[pl.Tensor[[3, 2, C], pl.INT8]], h: pl.Out[pl.Tensor[[2, C], pl.FP16]]) -> None:
        t = pl.load(x, [0, 0], [2, C])
        i32 = pl.cast(t, pl.INT32, mode="rint")
        f16 = pl.cast(i32, pl.FP16, mode="round")
        q = pl.assemble(q, pl.cast(f16, pl.INT8, mode="trunc"), [0, 0, 0])
        q = pl.assemble(q, pl.tile.cast(t, target_type=pl.INT8, mode="trunc"), [1, 0, 0])
        q = pl.assemble(q, pl.cast(w, pl.INT8, mode="floor"), [2, 0, 0])
        pl.store(pl.cast(pl.load(n, [0, 0], [2, C]), pl.FP16, mode="round"), [0, 0], h)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[NR, 2, C], pl.FP32], w: pl.Tensor[[NR, 2, C], pl.BF16],
             n: pl.Tensor[[NR, 2, C], pl.INT64], q: pl.Out[pl.Tensor[[NR, 3, 2, C], pl.INT8]],
             h: pl.Out[pl.Tensor[[NR, 2, C], pl.FP16]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(x[r], w[r], n[r], q[r], h[r], device=r)


def _quant_args() -> tuple[np.ndarray, ...]:
    import ml_dtypes

    rng = np.random.default_rng(2)
    x = rng.uniform(-300, 300, (1, 2, C)).astype(np.float32)
    x[0, 0, :6] = [2.5, -2.5, 127.6, -128.4, 0.49999997, 65519.0]
    w = rng.uniform(-200, 200, (1, 2, C)).astype(ml_dtypes.bfloat16)
    n = rng.integers(-70000, 70000, (1, 2, C)).astype(np.int64)
    n[0, 0, :3] = [2049, 65519, -65521]
    return x, w, n, np.zeros((1, 3, 2, C), np.int8), np.zeros((1, 2, C), np.float16)


def test_casts_translate_to_pyptos_chains() -> None:
    built, _ = translate(Quant, 1, _quant_args())
    casts = [(dict(c.attrs)["dtype"].value, dict(c.attrs)["mode"].name) for f in built.program.functions
             for c in function_calls(f) if c.op is Op.TILE_CAST]
    assert casts == [("int32", "RINT"), ("fp16", "ROUND"), ("int8", "TRUNC"),
                     ("fp16", "TRUNC"), ("int8", "TRUNC"),
                     ("fp32", "FLOOR"), ("fp16", "FLOOR"), ("int8", "FLOOR"),
                     ("fp32", "ROUND"), ("fp16", "ROUND")]


@pytest.mark.launcher
def test_cast_chains_run_hop_by_hop() -> None:
    x, w, n, q, h = _quant_args()
    ir.compile(Quant, distributed_config=DistributedConfig(device_ids=[0]))(x, w, n, q, h)
    x0 = x[0].astype(np.float64)
    i32 = np.rint(x0)  # ties to even
    f16 = i32.astype(np.float16)  # nearest; no FP16 ties among these integers (|v| <= 300, and 65519)
    np.testing.assert_array_equal(q[0, 0], np.clip(np.trunc(f16.astype(np.float64)), -128, 127).astype(np.int8))
    # FP32 -> FP16 truncating (toward zero), then FP16 -> INT8 truncating, saturating.
    t16 = np.array([_toward_zero_fp16(v) for v in x0.ravel()]).reshape(x0.shape)
    np.testing.assert_array_equal(q[0, 1], np.clip(np.trunc(t16), -128, 127).astype(np.int8))
    np.testing.assert_array_equal(q[0, 2], np.clip(np.floor(w[0].astype(np.float64)), -128, 127).astype(np.int8))
    # INT64 -> FP32 -> FP16 ("round": ties away): 2049 is a tie in FP16 (2048 / 2050), away gives 2050;
    # 65519 rounds to 65504 (below the half-way point to the overflow), -65521 overflows to -inf.
    assert list(h[0, 0, :3]) == [2050.0, 65504.0, -np.inf]


def _toward_zero_fp16(v: float) -> float:
    c = float(np.float16(v))
    if abs(c) > abs(v):
        c = float(np.nextafter(np.float16(c), np.float16(0)))
    return c


@pytest.mark.parametrize(("src", "dst", "message"), [
    ("UINT32", "FP32", "no native cast path from uint32 to fp32 for arch a2a3"),
    ("BF16", "INT64", "no native cast path from bf16 to int64 for arch a2a3"),
    ("INT32", "INT32", "a same-dtype cast is not a valid operation"),
])
def test_pyptos_cast_refusals_at_the_users_line(src: str, dst: str, message: str) -> None:
    s, d = getattr(pl, src), getattr(pl, dst)

    @pl.program
    class Refused:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[2, C], s], y: pl.Out[pl.Tensor[[2, C], d]]) -> None:
            pl.store(pl.cast(pl.load(x, [0, 0], [2, C]), d), [0, 0], y)  # the refused cast

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 2, C], s], y: pl.Out[pl.Tensor[[NR, 2, C], d]]) -> None:
            for r in pl.range(pld.world_size()):
                self.k(x[r], y[r], device=r)

    nd = {"UINT32": np.uint32, "FP32": np.float32, "INT64": np.int64, "INT32": np.int32}
    import ml_dtypes

    nd["BF16"] = ml_dtypes.bfloat16
    with pytest.raises(FrontendError, match=message) as err:
        translate(Refused, 1, (np.zeros((1, 2, C), nd[src]), np.zeros((1, 2, C), nd[dst])))
    assert "the refused cast" in str(err.value) or "test_compute_ints.py" in str(err.value)
