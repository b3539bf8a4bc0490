"""``pldemu check tquant_mx``: the lowered MXFP8 quantisation run on every rank, checked byte for byte.

Every rank quantises its own data (rank-dependent seeds) through the lowered program (load ->
tile.tquant_mx -> reinterpret as INT8 / UINT8 -> store) and compares the FP8 data bytes and the E8M0
scale bytes (in the on-chip ZZ / NN byte order) with :func:`oracle_mx`, a NumPy + ml_dtypes model written
from the reference's formulas alone (frexp exponents, Python-float scaling, the ZZ offset formula element by
element): it shares no code with the handler. The dequantised values give the max relative error (over
elements that land in E4M3's normal range, clipped ones included: a group max scaled into (448, 512) is
clipped to 448, up to 1/8 off) and the SQNR in dB over every finite element. Cases: the reference's boundary pattern
(each value alone in a group, all together, with Inf, with NaN), all-zero groups, random groups spanning
the source dtype's exponent range, uniform(-2, 2) at --shape, and pypto's goldens (128 x 64
uniform(-2, 2) seeds 19 and 42; the power-of-two matmul pattern, axis 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from pldemu.ir import DType, FunctionBuilder, Op, Program, ProgramBuilder, Var
from pldemu.ir.dtypes import numpy_dtype
from pldemu.lowering import lower_composite_ops
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from mpi4py import MPI


GROUP = 32
E4M3_LARGEST = 448.0
E4M3_SMALLEST_NORMAL = 2.0 ** -6


def public_shapes(axis: int, shape: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(quant, scale) shapes of tile.tquant_mx: axis 1 [M, K], [M, K/32]; axis 0 [K, N], [K/32, N]."""
    a, b = shape
    return ((a, b), (a, b // GROUP)) if axis == 1 else ((b, a), (b // GROUP, a))


def quantising(pb: ProgramBuilder, axis: int, dtype: str, shape: tuple[int, int]) -> tuple[FunctionBuilder, Var, Var]:
    """Declare ``x`` and start the entry function of ``pb``: ``t = tile.load(x)``, ``mx =
    tile.tquant_mx(t)`` and its projections; returns (the function, quant, scale)."""
    x = pb.local("x", dtype, list(shape))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(shape), hint="t")
    mx = fb.let("mx", fb.call(Op.TILE_TQUANT_MX, [t], {"group_axis": axis}))
    return (fb, fb.let("quant", fb.call(Op.TUPLE_GET_ITEM, [mx], {"index": 0})),
            fb.let("scale", fb.call(Op.TUPLE_GET_ITEM, [mx], {"index": 1})))


def tquant_program(axis: int, dtype: str, shape: tuple[int, int]) -> Program:
    """x -> tile.tquant_mx -> (quant as int8 -> q, scale as uint8 -> s), lowered."""
    qshape, sshape = public_shapes(axis, shape)
    pb = ProgramBuilder(f"tquant_mx_axis{axis}")
    fb, quant, scale = quantising(pb, axis, dtype, shape)
    q_bytes = fb.let("q_bytes", fb.call(Op.TILE_REINTERPRET_VIEW, [quant], {"dtype": DType.INT8}))
    s_bytes = fb.let("s_bytes", fb.call(Op.TILE_REINTERPRET_VIEW, [scale], {"dtype": DType.UINT8}))
    fb.pld.tile.store(q_bytes, [0, 0], pb.local("q", "int8", list(qshape)))
    fb.pld.tile.store(s_bytes, [0, 0], pb.local("s", "uint8", list(sshape)))
    return lower_composite_ops(pb.build())


# ----------------------------------------------------------------------------------------------
# The oracle (from the reference's formulas; shares nothing with runtime/ops/mx.py)
# ----------------------------------------------------------------------------------------------


def _shared_exponent(group: list[float]) -> int:
    """e8m0 of one group: 0xFF with a NaN, else max(E - 8, 0) of the biased exponent of max |x|."""
    if any(math.isnan(v) for v in group):
        return 0xFF
    amax = max(abs(v) for v in group)
    if math.isinf(amax):
        biased = 255
    elif amax < 2.0 ** -126:
        biased = 0  # zero and FP32 subnormals
    else:
        biased = math.frexp(amax)[1] + 126
    return max(biased - 8, 0)


def zz_offset(m: int, g: int, cols: int) -> int:
    """Byte offset of exponent (m, g) in a ZZ tile of ``cols`` exponents per row (16 x 2 boxes)."""
    return ((m // 16) * (cols // 2) + g // 2) * 32 + (m % 16) * 2 + g % 2


def oracle_mx(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(FP8 data bytes [quant shape], scale bytes [scale shape], memory order) of tile.tquant_mx."""
    src = np.asarray(x, np.float64) if axis == 1 else np.asarray(x, np.float64).T
    rows, cols = src.shape
    e = np.zeros((rows, cols // GROUP), np.int64) if axis == 1 else np.zeros((rows // GROUP, cols), np.int64)
    scaled = np.empty_like(src)
    for (i, j), _ in np.ndenumerate(e):
        sl = (i, slice(j * GROUP, (j + 1) * GROUP)) if axis == 1 else (slice(i * GROUP, (i + 1) * GROUP), j)
        e[i, j] = _shared_exponent([float(v) for v in src[sl]])
        factor = math.nan if e[i, j] == 0xFF else 2.0 ** (127 - int(e[i, j]))
        scaled[sl] = src[sl] * factor
    data = np.clip(scaled, -E4M3_LARGEST, E4M3_LARGEST).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    logical = e if axis == 1 else e.T  # ZZ is built over [M, G] (axis 1) or the transposed [N, K/32] (axis 0)
    zz = np.zeros(logical.size, np.uint8)
    for (m, g), v in np.ndenumerate(logical):
        zz[zz_offset(m, g, logical.shape[1])] = v
    return data, zz.reshape(e.shape if axis == 0 else logical.shape)


def scale_values(s_bytes: np.ndarray, axis: int, qshape: tuple[int, int]) -> np.ndarray:
    """The per-element scale 2^(e8m0 - 127) of the public [quant shape] from the ZZ / NN scale bytes."""
    rows, cols = qshape
    flat = s_bytes.reshape(-1)
    if axis == 1:
        e = np.array([[flat[zz_offset(m, g, cols // GROUP)] for g in range(cols // GROUP)] for m in range(rows)])
        per = np.repeat(e, GROUP, axis=1)
    else:
        e = np.array([[flat[zz_offset(n, g, rows // GROUP)] for n in range(cols)] for g in range(rows // GROUP)])
        per = np.repeat(e, GROUP, axis=0)
    return per.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def dequantise(q_bytes: np.ndarray, s_bytes: np.ndarray, axis: int) -> np.ndarray:
    """FP8 data times its E8M0 scale, as float64, in the quant layout ([M, K] or [K, N])."""
    data = q_bytes.view(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return data * scale_values(s_bytes, axis, q_bytes.shape)


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------

BOUNDARY = (0.0, -0.0, 2.0 ** -149, -2.0 ** -149, 2.0 ** -130, -2.0 ** -130, float(np.nextafter(np.float32(448), 0)),
            -float(np.nextafter(np.float32(448), 0)), 448.0, -448.0, float(np.nextafter(np.float32(448), np.inf)),
            -float(np.nextafter(np.float32(448), np.inf)), 896.0, float(np.nextafter(np.float32(896), np.inf)),
            math.inf, math.nan)
"""The reference's fp32 boundary pattern (gen_data.py)."""

_EXP_RANGE = {"fp32": (-140, 127), "bf16": (-133, 127), "fp16": (-24, 15)}


def _groups_to_matrix(groups: np.ndarray, axis: int, shape: tuple[int, int]) -> np.ndarray:
    """Lay [n, 32] groups into a source of ``shape`` so each is one group along ``axis``."""
    a, b = shape
    if axis == 1:
        return groups.reshape(a, b)
    return groups.reshape(b // GROUP, a, GROUP).transpose(0, 2, 1).reshape(b, a).T


def boundary_source(axis: int, shape: tuple[int, int]) -> np.ndarray:
    """Each boundary value alone in a group, then all finite ones, with Inf, with NaN; zero groups after."""
    n = shape[0] * shape[1] // GROUP
    groups = np.zeros((n, GROUP))
    finite = [v for v in BOUNDARY if math.isfinite(v)]
    rows = [[v] for v in BOUNDARY] + [finite, [*finite, math.inf], [*finite, math.inf, math.nan],
                                      [-v for v in finite]]
    for i, vals in enumerate(rows[:n]):
        groups[i, : len(vals)] = vals
    return _groups_to_matrix(groups, axis, shape)


def random_groups_source(axis: int, shape: tuple[int, int], dtype: str, seed: int) -> np.ndarray:
    """Groups with random magnitudes across the source dtype's exponent range, zeros and sign mixes."""
    rng = np.random.default_rng(seed)
    n = shape[0] * shape[1] // GROUP
    lo, hi = _EXP_RANGE[dtype]
    base = rng.integers(lo, hi - 2, size=(n, 1))
    spread = rng.integers(-12, 3, size=(n, GROUP))
    groups = rng.uniform(-1.0, 1.0, size=(n, GROUP)) * np.exp2(np.clip(base + spread, lo, hi - 1))
    groups[rng.random((n, GROUP)) < 0.05] = 0.0
    return _groups_to_matrix(groups, axis, shape)


def matmul_pattern() -> np.ndarray:
    """pypto's test_quantized_matmul_mx A: [64, 256], group g of row r = 2^(code - 127)."""
    a = np.zeros((64, 256))
    for r in range(64):
        for g in range(8):
            a[r, g * 32:(g + 1) * 32] = 2.0 ** (100 + ((r // 16) * 13 + (r % 16) * 7 + g * 3) % 64 - 127)
    return a


def cases(axis: int, dtype: str, shape: tuple[int, int], rank: int) -> Iterator[tuple[str, np.ndarray]]:
    """(name, source) of every case on ``rank`` (random cases differ per rank)."""
    yield "boundary", boundary_source(axis, shape)
    yield "zeros", np.zeros(shape)
    yield "random groups", random_groups_source(axis, shape, dtype, 1000 + rank)
    yield "uniform(-2,2)", np.random.default_rng(7 + rank).uniform(-2, 2, shape)
    for seed in (19, 42):
        src = np.random.default_rng(seed).uniform(-2, 2, (128, 64))
        yield f"golden seed {seed}", src
    if axis == 1:
        yield "matmul pow2", matmul_pattern()


# ----------------------------------------------------------------------------------------------
# Running and comparing
# ----------------------------------------------------------------------------------------------


@dataclass
class MxResult:
    """One case on all ranks: groups quantised, wrong bytes, dequantised error."""

    case: str
    groups: int = 0
    wrong_data: int = 0
    wrong_scale: int = 0
    max_rel: float = 0.0
    signal: float = 0.0
    noise: float = 0.0

    @property
    def sqnr_db(self) -> float:
        if self.noise == 0.0:
            return math.inf
        return 10.0 * math.log10(self.signal / self.noise) if self.signal > 0 else -math.inf

    @property
    def ok(self) -> bool:
        return self.wrong_data == 0 and self.wrong_scale == 0

    def add(self, other: MxResult) -> None:
        self.groups += other.groups
        self.wrong_data += other.wrong_data
        self.wrong_scale += other.wrong_scale
        self.max_rel = max(self.max_rel, other.max_rel)
        self.signal += other.signal
        self.noise += other.noise


def compare(case: str, x: np.ndarray, axis: int, q: np.ndarray, s: np.ndarray) -> MxResult:
    """Bytes against the oracle, then the dequantised error over finite sources."""
    want_q, want_s = oracle_mx(x, axis)
    res = MxResult(case, x.size // GROUP, int(np.count_nonzero(q.view(np.uint8) != want_q)),
                   int(np.count_nonzero(s != want_s)))
    src = (x if axis == 1 else x.T).astype(np.float64)
    deq = dequantise(q, s, axis)
    finite = np.isfinite(src) & np.isfinite(deq)  # clipped elements count: clipping is part of MXFP8's error
    err = np.where(finite, deq - src, 0.0)
    normal = finite & (np.abs(src) >= E4M3_SMALLEST_NORMAL * scale_values(s, axis, q.shape)) & (src != 0)
    if np.any(normal):
        res.max_rel = float(np.max(np.abs(err[normal]) / np.abs(src[normal])))
    res.signal, res.noise = float(np.sum(np.where(finite, src, 0.0) ** 2)), float(np.sum(err ** 2))
    return res


def run_mx_check(comm: MPI.Intracomm, axis: int, dtype: str, shape: tuple[int, int], options: RuntimeOptions
                 ) -> list[MxResult]:
    """Every case on every rank through the lowered program; results summed over ranks."""
    from pldemu.runtime.interpreter import ProgramInstance  # MPI: the launcher imports this module too

    programs: dict[tuple[int, int], Program] = {}
    out: list[MxResult] = []
    for name, source in cases(axis, dtype, shape, comm.Get_rank()):
        with np.errstate(over="ignore"):
            x = source.astype(numpy_dtype(dtype))
        key = (int(x.shape[0]), int(x.shape[1]))
        program = programs.setdefault(key, tquant_program(axis, dtype, (key[0], key[1])))
        with ProgramInstance(program, comm, options) as inst:
            inst.local("x")[...] = x
            inst.run()
            q, s = inst.local("q").copy(), inst.local("s").copy()
        mine = compare(name, x.astype(np.float64), axis, q, s)
        total = MxResult(name)
        for r in comm.allgather(mine):
            total.add(r)
        out.append(total)
    return out


MX_HEADER = (f"#{'case':>18} {'axis':>4} {'dtype':>5} {'groups':>8} {'#wrong_data':>11} {'#wrong_scale':>12} "
             f"{'max_rel_err':>11} {'SQNR(dB)':>9}  verdict")


def mx_row(r: MxResult, axis: int, dtype: str) -> str:
    """One nccl-tests style row."""
    return (f"{r.case:>19} {axis:>4} {dtype:>5} {r.groups:>8} {r.wrong_data:>11} {r.wrong_scale:>12} "
            f"{r.max_rel:>11.4g} {r.sqnr_db:>9.2f}  {'ok' if r.ok else 'MISMATCH'}")


__all__ = ["MX_HEADER", "MxResult", "compare", "dequantise", "mx_row", "oracle_mx", "quantising", "run_mx_check",
           "tquant_program", "zz_offset"]
