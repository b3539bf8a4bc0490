"""``pldemu check sin|cos|select``: the lowered tile recipes run on every rank, checked against NumPy.

sin / cos: every rank evaluates its own slice of a sweep of |x| <= 2*pi*1024 (plus the special points
0, pi/2, pi, 3pi/2, 2pi and a NaN) through the lowered FP32 recipe and compares with NumPy in float64:
max abs error (and its x), max error in FP32 ulps of the reference, the count over 1e-5 and NaN
propagation. A case fails on any error over 1e-5 or a NaN that does not propagate.

select: every (route, dtype, cmp_type, tail, NaN) case of :data:`SELECT_CASES` is built as a program
(load with valid extents, cmp/cmps, select, store), lowered for the chosen backend, run on every rank
with rank-dependent data and compared bit for bit with ``numpy.where`` inside the valid region (and
"untouched" outside it). The figures are combined over ranks with MPI reductions in the harness.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pldemu.ir import CmpType, Const, DType, Program, ProgramBuilder
from pldemu.lowering import lower_composite_ops, lower_composite_ops_with_report
from pldemu.lowering.backend import Backend
from pldemu.runtime.interpreter import ProgramInstance
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from mpi4py import MPI


SWEEP = 2 * np.pi * 1024
"""The validated input range of the trig recipe: |x| <= 2*pi*1024."""
TOLERANCE = 1e-5
SIN_ROWS = 64
SPECIAL = (0.0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi)

_NP_CMP: dict[CmpType, Callable[[Any, Any], np.ndarray]] = {
    CmpType.EQ: np.equal, CmpType.NE: np.not_equal, CmpType.LT: np.less,
    CmpType.LE: np.less_equal, CmpType.GT: np.greater, CmpType.GE: np.greater_equal,
}


# ----------------------------------------------------------------------------------------------
# sin / cos
# ----------------------------------------------------------------------------------------------


def trig_program(fn: str, rows: int, cols: int, backend: Backend) -> Program:
    """load -> tile.sin|tile.cos -> store on an FP32 [rows, cols] local tensor, lowered."""
    pb = ProgramBuilder(f"check_{fn}")
    x = pb.local("x", "fp32", [rows, cols])
    out = pb.local("out", "fp32", [rows, cols])
    fb = pb.function()
    pld = fb.pld
    t = pld.tile.load(x, [0, 0], [rows, cols], hint="t")
    y = (pld.tile.sin if fn == "sin" else pld.tile.cos)(t, hint="y")
    pld.tile.store(y, [0, 0], out)
    return lower_composite_ops(pb.build(), backend=backend)


def sweep_points(it: int, rank: int, nranks: int, iters: int, n: int) -> np.ndarray:
    """Rank ``rank``'s FP32 points of iteration ``it``: an interleaved slice of one global linspace."""
    total = iters * nranks * n
    g = (np.arange(n, dtype=np.float64) * iters * nranks + it * nranks + rank)
    return (-SWEEP + 2 * SWEEP * g / max(total - 1, 1)).astype(np.float32)


@dataclass
class TrigStats:
    """Error figures of one rank (or, after :meth:`combine`, of all ranks)."""

    points: int = 0
    max_abs: float = 0.0
    worst_x: float = 0.0
    max_ulp: float = 0.0
    over_tol: int = 0
    special_max: float = 0.0
    nan_ok: bool = True

    def add(self, x: np.ndarray, y: np.ndarray, ref: np.ndarray) -> None:
        err = np.abs(y.astype(np.float64) - ref)
        self.points += x.size
        i = int(np.argmax(err))
        if err.flat[i] > self.max_abs:
            self.max_abs, self.worst_x = float(err.flat[i]), float(x.flat[i])
        ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        self.max_ulp = max(self.max_ulp, float(np.max(err / ulp)))
        self.over_tol += int(np.count_nonzero(err > TOLERANCE))

    def combine(self, comm: MPI.Intracomm) -> TrigStats:
        rows = comm.allgather(self)
        best = max(rows, key=lambda s: s.max_abs)
        return TrigStats(sum(s.points for s in rows), best.max_abs, best.worst_x, max(s.max_ulp for s in rows),
                         sum(s.over_tol for s in rows), max(s.special_max for s in rows),
                         all(s.nan_ok for s in rows))

    @property
    def ok(self) -> bool:
        return self.over_tol == 0 and self.nan_ok and self.special_max <= TOLERANCE


def run_trig_check(comm: MPI.Intracomm, fn: str, cols: int, iters: int, backend: Backend,
                   options: RuntimeOptions) -> TrigStats:
    """Run the lowered sin/cos recipe ``iters`` times on this rank's sweep slice; all-rank stats."""
    program = trig_program(fn, SIN_ROWS, cols, backend)
    ref_fn = np.sin if fn == "sin" else np.cos
    stats = TrigStats()
    n = SIN_ROWS * cols
    with ProgramInstance(program, comm, options) as inst:
        for it in range(iters):
            x = sweep_points(it, comm.Get_rank(), comm.Get_size(), iters, n).reshape(SIN_ROWS, cols)
            if it == 0:
                x.flat[: len(SPECIAL)] = np.array(SPECIAL, np.float32)
                x.flat[len(SPECIAL)] = np.nan
            inst.local("x")[...] = x
            inst.run()
            y = inst.local("out").copy()
            finite = ~np.isnan(x)
            ref = ref_fn(x.astype(np.float64))
            stats.add(x[finite], y[finite], ref[finite])
            if it == 0:
                k = len(SPECIAL)
                stats.special_max = float(np.max(np.abs(y.flat[:k] - ref.flat[:k])))
                stats.nan_ok = bool(np.isnan(y.flat[k]))
    return stats.combine(comm)


TRIG_HEADER = (f"#{'op':>5} {'backend':>7} {'points':>10} {'max_abs_err':>12} {'worst_x':>14} {'max_ulp':>8} "
               f"{'n>1e-5':>7} {'special':>9} {'NaN':>4}  result")


def trig_row(fn: str, backend: Backend, s: TrigStats) -> str:
    return (f" {fn:>5} {backend.name:>7} {s.points:>10} {s.max_abs:>12.3e} {s.worst_x:>14.6f} {s.max_ulp:>8.2f} "
            f"{s.over_tol:>7} {s.special_max:>9.2e} {'ok' if s.nan_ok else 'LOST':>4}  {'PASS' if s.ok else 'FAIL'}")


# ----------------------------------------------------------------------------------------------
# select
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectCase:
    """One select check: route (tile/tile, tile/scalar, scalar/tile), dtypes, compare, geometry."""

    route: str
    dtype: DType
    cmp: CmpType
    valid: tuple[int, int] = (16, 128)
    shape: tuple[int, int] = (16, 128)
    nan: bool = False
    cmp_dtype: DType | None = None  # BF16 is selected through an FP32 compare
    clamp: bool = False

    @property
    def label(self) -> str:
        tail = "" if self.valid == self.shape else f" valid{list(self.valid)}"
        via = f" via {self.cmp_dtype.value} cmp" if self.cmp_dtype is not None else ""
        what = "clamp(-2,2)" if self.clamp else f"{self.route} {self.cmp.name}"
        dims = "" if self.shape == (16, 128) else f"{list(self.shape)}"
        return f"{what} {self.dtype.value}{dims}{via}{tail}{' NaN' if self.nan else ''}"


ROUTES = ("tile/tile", "tile/scalar", "scalar/tile")


def _select_cases() -> tuple[SelectCase, ...]:
    out = [SelectCase(r, DType.FP32, c) for r in ROUTES for c in CmpType]
    out += [SelectCase(r, DType.FP32, CmpType.GT, valid=v) for r in ROUTES for v in ((11, 128), (16, 100), (11, 100))]
    out += [SelectCase("tile/scalar", DType.FP32, c, nan=True) for c in CmpType]
    out += [SelectCase("tile/tile", DType.FP32, c, nan=True) for c in CmpType]
    out += [SelectCase(r, d, CmpType.GT) for d in (DType.FP16, DType.INT16) for r in ROUTES]
    out += [SelectCase(r, DType.BF16, CmpType.GT, cmp_dtype=DType.FP32) for r in ROUTES]
    out += [SelectCase(r, DType.FP32, CmpType.GE, shape=(16, 512), valid=(16, 512)) for r in ROUTES]
    out.append(SelectCase("tile/scalar", DType.FP32, CmpType.LE, clamp=True))
    return tuple(out)


SELECT_CASES = _select_cases()
FALSE_SCALAR, TRUE_SCALAR, THRESHOLD = -3, 7, 0


def _lit(value: float, dtype: DType) -> Any:
    return Const(float(value) if dtype.is_float else int(value), dtype)


def select_source(case: SelectCase) -> Program:
    """src -> (cmp against u or cmps against 0) -> tile.select by route -> out (not lowered)."""
    pb = ProgramBuilder("check_select")
    rows, cols = case.shape
    cdt = case.cmp_dtype or case.dtype
    src = pb.local("src", case.dtype.value, [rows, cols])
    other = pb.local("other", case.dtype.value, [rows, cols])
    out = pb.local("out", case.dtype.value, [rows, cols])
    csrc = pb.local("csrc", cdt.value, [rows, cols]) if case.cmp_dtype is not None else src
    fb = pb.function()
    pld = fb.pld
    valid = list(case.valid)
    t = pld.tile.load(src, [0, 0], [rows, cols], valid_shape=valid, hint="t")
    u = pld.tile.load(other, [0, 0], [rows, cols], valid_shape=valid, hint="u")
    c = pld.tile.load(csrc, [0, 0], [rows, cols], valid_shape=valid, hint="c") if case.cmp_dtype else t
    if case.clamp:  # min(max(t, -2), 2) as two selects: the reference's clamp idiom
        hi = pld.tile.select(pld.tile.cmps(t, _lit(2, cdt), "LE", hint="le"), t, _lit(2, case.dtype), hint="hi")
        r = pld.tile.select(pld.tile.cmps(hi, _lit(-2, cdt), "GE", hint="ge"), hi, _lit(-2, case.dtype), hint="r")
    else:
        if case.route == "tile/tile":
            mask = pld.tile.cmp(c, u if case.cmp_dtype is None else c, case.cmp.name, hint="m")
        else:
            mask = pld.tile.cmps(c, _lit(THRESHOLD, cdt), case.cmp.name, hint="m")
        on_true: Any = _lit(TRUE_SCALAR, case.dtype) if case.route == "scalar/tile" else t
        on_false: Any = _lit(FALSE_SCALAR, case.dtype) if case.route == "tile/scalar" else u
        r = pld.tile.select(mask, on_true, on_false, hint="r")
    pld.tile.store(r, [0, 0], out)
    return pb.build()


def select_inputs(case: SelectCase, rank: int) -> dict[str, np.ndarray]:
    """The reference test's source ``(arange % 9) - 4``, shifted per rank; ``other`` = 0 (maximum idiom)."""
    rows, cols = case.shape
    base = ((np.arange(rows * cols).reshape(rows, cols) + rank) % 9 - 4).astype(np.float64)
    if case.nan:
        base[::3, ::5] = np.nan
    src = base.astype(case.dtype.np)
    other = ((np.arange(rows * cols).reshape(rows, cols) * 7 + rank) % 5 - 2).astype(case.dtype.np)
    if case.nan:
        other[1::4, ::7] = np.nan
    data = {"src": src, "other": other}
    if case.cmp_dtype is not None:
        data["csrc"] = base.astype(case.cmp_dtype.np)
    return data


def select_expected(case: SelectCase, data: dict[str, np.ndarray]) -> np.ndarray:
    """numpy.where of the same case (IEEE compares; the scalar narrowed to the tile dtype)."""
    t, u = data["src"], data["other"]
    c = data.get("csrc", t)
    dt = case.dtype.np
    cdt = c.dtype.type
    with np.errstate(invalid="ignore"):
        if case.clamp:
            hi = np.where(c <= cdt(2), t, dt.type(2))
            return np.where(hi.astype(c.dtype) >= cdt(-2), hi, dt.type(-2))
        if case.route == "tile/tile":
            pred = _NP_CMP[case.cmp](c, u if case.cmp_dtype is None else c)
        else:
            pred = _NP_CMP[case.cmp](c, cdt(THRESHOLD))
    on_true = np.full_like(t, TRUE_SCALAR) if case.route == "scalar/tile" else t
    on_false = np.full_like(t, FALSE_SCALAR) if case.route == "tile/scalar" else u
    return np.where(pred, on_true, on_false)


@dataclass(frozen=True)
class SelectResult:
    case: SelectCase
    emitted: str
    wrong: int
    outside: int

    @property
    def ok(self) -> bool:
        return self.wrong == 0 and self.outside == 0


def _bits(a: np.ndarray) -> np.ndarray:
    """Bit patterns, so NaN == NaN and -0 != 0 in the comparison."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def run_select_case(comm: MPI.Intracomm, case: SelectCase, backend: Backend, options: RuntimeOptions) -> SelectResult:
    """One select case on every rank: wrong elements in the valid region, touched ones outside it."""
    report = lower_composite_ops_with_report(select_source(case), backend=backend)
    emitted = "; ".join(c.lowered.note or "" for c in report.calls)
    program = report.program
    data = select_inputs(case, comm.Get_rank())
    sentinel = np.full(case.shape, 99, case.dtype.np)
    with ProgramInstance(program, comm, options) as inst:
        for name, arr in data.items():
            inst.local(name)[...] = arr
        inst.local("out")[...] = sentinel
        inst.run()
        got = inst.local("out").copy()
    want = select_expected(case, data)
    box = tuple(slice(0, v) for v in case.valid)
    wrong = int(np.count_nonzero(_bits(got[box]) != _bits(want[box])))
    mask = np.ones(case.shape, bool)
    mask[box] = False
    outside = int(np.count_nonzero(_bits(got)[mask] != _bits(sentinel)[mask]))
    return SelectResult(case, emitted, comm.allreduce(wrong), comm.allreduce(outside))


SELECT_HEADER = f"#{'case':<44} {'emitted':<56} {'#wrong':>7} {'outside':>7}  result"


def select_row(r: SelectResult) -> str:
    return f" {r.case.label:<44} {r.emitted:<56} {r.wrong:>7} {r.outside:>7}  {'PASS' if r.ok else 'FAIL'}"


def run_select_check(comm: MPI.Intracomm, backend: Backend, options: RuntimeOptions,
                     cases: Sequence[SelectCase] = SELECT_CASES) -> list[SelectResult]:
    """Every select case the backend can lower (8-bit on a2a3 is refused at lowering, never run)."""
    return [run_select_case(comm, c, backend, options) for c in cases]


__all__ = [
    "SELECT_CASES",
    "SELECT_HEADER",
    "TRIG_HEADER",
    "SelectCase",
    "SelectResult",
    "TrigStats",
    "run_select_check",
    "run_trig_check",
    "select_expected",
    "select_inputs",
    "select_row",
    "select_source",
    "sweep_points",
    "trig_program",
    "trig_row",
]
