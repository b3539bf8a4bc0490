"""The check harness run in-process on COMM_WORLD: every collective, checked call by call.

The launcher (``tests/test_mpi_suites.py``) runs this module at N = 1, 2, 3, 4, 5 and 8 ranks; the
matrix below is built at import time from N, so each size runs its own slice of it.  Every case makes
at least 20 back-to-back calls on one signal buffer (``run_check``: inputs differ per rank, position
and iteration; results compared with the NumPy oracle after every call; signal cells checked zero and
native MPI compared at every block end).

Design: the whole suite must fit in ~20 minutes over the six sizes on a 2-core machine (8 ranks are
4x oversubscribed), so the full cross product is run where it is cheap and the expensive dimensions
rotate with the case index i and N, so that across the six sizes every value of every dimension is
met (pairwise coverage), and no dimension is dropped:

======  ===========================================  ======  ======  ==========  ==========  =========
tier    collectives                                  size    dtype   reduce op   back end    N
======  ===========================================  ======  ======  ==========  ==========  =========
full    all 7, allreduce mesh + ring                 17      both    all 4       both        every N
one     allreduce mesh + ring, reduce_scatter      1       both    all 4       rotates     every N
        (the push collectives reject SIZE=1 by
        contract: tests/check/test_check_rejections.py)
mid     all 7, allreduce mesh + ring                 4097    both    rotates     rotates     every N
large   all 7, allreduce mesh + ring                 65537   rotates rotates     rotates     every N
ring<NR allreduce ring, SIZE = NR - 1 (< NR)         NR-1    both    all 4       rotates     N >= 2
valid   mesh partial-valid rectangles; ring prefix   2-D     rotates rotates     both        every N
a2av    all_to_all_v, MAX_RECV 1 and 3 (random       17, 33  both    -           both        every N
        counts in [-1, M+2]: 0 and > MAX_RECV)
roots   broadcast from every root                    33      rotates -           rotates     every N
======  ===========================================  ======  ======  ==========  ==========  =========

"rotates" = picked by ``(i + N) % k``.  One case in three of the mid/large tiers also runs with
``stage_pieces`` (puts/gets land piece by piece, so a concurrent reader can see a partial transfer).

Measured wall time of this module (2 cores, see the report in the harness PR): about 15 s at N=1 up
to about 4 minutes at N=8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import MATRIX_BACKENDS as BACKENDS
from helpers import agree
from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.blocks import QUIET
from pldemu.harness.check import CheckResult, run_check
from pldemu.ir import AllreduceMode, DType, ReduceOp
from pldemu.runtime.options import RuntimeOptions

pytestmark = pytest.mark.mpi(min_size=1)

N = MPI.COMM_WORLD.Get_size()
ITERS = 20
OPS = tuple(ReduceOp)
DTYPES = (DType.FP16, DType.FP32)
TIMEOUT = 60.0  # seconds one wait may take: generous, 8 ranks share 2 cores


@dataclass(frozen=True)
class Case:
    """One run_check: the CollectiveSpec fields, the back end and the runtime knobs."""

    spec: dict[str, Any]
    backend: str
    stage_pieces: bool = False
    iters: int = ITERS
    block: int | None = None
    tags: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        s = self.spec
        parts = [*self.tags, s["name"]]
        if s["name"] == "allreduce":
            parts.append(s.get("mode", AllreduceMode.mesh).name)
        if s["name"] != "barrier":
            parts.append(s.get("dtype", DType.FP32).value)
        if s["name"] in ("allreduce", "reduce_scatter"):
            parts.append(s.get("reduce", ReduceOp.Sum).name.lower())
        if "shape" in s:
            parts.append("x".join(map(str, s["shape"])))
        else:
            parts.append(f"s{s.get('size', 1024)}")
        if "valid_shape" in s:
            parts.append("v" + "x".join(map(str, s["valid_shape"])))
        if s["name"] == "broadcast":
            parts.append(f"root{s.get('root', 0)}")
        if s["name"] == "all_to_all_v":
            parts.append(f"m{s.get('max_recv', 4)}")
        parts.append(self.backend)
        if self.stage_pieces:
            parts.append("pieces")
        return "-".join(parts)


COMBOS: tuple[tuple[str, AllreduceMode | None], ...] = (
    ("allreduce", AllreduceMode.mesh),
    ("allreduce", AllreduceMode.ring),
    ("allgather", None),
    ("reduce_scatter", None),
    ("broadcast", None),
    ("barrier", None),
    ("all_to_all", None),
    ("all_to_all_v", None),
)
REDUCING = ("allreduce", "reduce_scatter")


def _spec(name: str, mode: AllreduceMode | None, **kw: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"name": name, **kw}
    if mode is not None:
        s["mode"] = mode
    if name not in REDUCING:
        s.pop("reduce", None)
    if name == "barrier":
        s.pop("dtype", None)
    return s


def build_matrix(n: int) -> list[Case]:
    """The cases run at ``n`` ranks (see the module docstring for the design)."""
    cases: list[Case] = []
    # full: size 17, the whole cross product on both back ends.
    for backend in BACKENDS:
        for name, mode in COMBOS:
            for dtype in DTYPES if name != "barrier" else (DType.FP32,):
                for op in OPS if name in REDUCING else (ReduceOp.Sum,):
                    cases.append(
                        Case(
                            _spec(name, mode, dtype=dtype, reduce=op, size=17, max_recv=2),
                            backend,
                            tags=("full",),
                        )
                    )
    # one: SIZE=1 where it is legal (the push collectives reject rows under one alignment unit).
    i = 0
    for name, mode in COMBOS:
        if name not in REDUCING:
            continue
        for dtype in DTYPES:
            for op in OPS:
                cases.append(
                    Case(
                        _spec(name, mode, dtype=dtype, reduce=op, size=1),
                        BACKENDS[(i + n) % 2],
                        tags=("one",),
                    )
                )
                i += 1
    # mid: every collective, mode and dtype; op, back end and stage_pieces rotate with i and N.
    i = 0
    for name, mode in COMBOS:
        for dtype in DTYPES if name != "barrier" else (DType.FP32,):
            cases.append(
                Case(
                    _spec(name, mode, dtype=dtype, reduce=OPS[(i + n) % 4], size=4097, max_recv=2),
                    BACKENDS[(i + n) % 2],
                    stage_pieces=(i + n) % 3 == 0,
                    tags=("mid",),
                )
            )
            i += 1
    # large: every collective and mode once; dtype, op, back end and stage_pieces rotate with i and N.
    for i, (name, mode) in enumerate(COMBOS):
        cases.append(
            Case(
                _spec(
                    name,
                    mode,
                    dtype=DTYPES[(i + n) % 2],
                    reduce=OPS[(i + n // 2) % 4],
                    size=65537,
                    max_recv=2,
                ),
                BACKENDS[(i // 2 + n) % 2],
                stage_pieces=(i + n) % 3 == 0,
                tags=("large",),
            )
        )
    # ring with SIZE < NR: FP32 segments floor(i*SIZE/NR) and FP16 16-aligned segments are mostly empty.
    if n >= 2:
        for j, (dtype, op) in enumerate((d, o) for d in DTYPES for o in OPS):
            cases.append(
                Case(
                    _spec("allreduce", AllreduceMode.ring, dtype=dtype, reduce=op, size=n - 1),
                    BACKENDS[(j + n) % 2],
                    tags=("ringltnr",),
                )
            )
    # valid: partial-valid mesh rectangles (<= 16 KiB) and a ring prefix, on both back ends.
    shapes = (
        ((4, 64), (3, 17), AllreduceMode.mesh),
        ((16, 1024), (4, 1024), AllreduceMode.mesh),
        ((8, 512), (5, 300), AllreduceMode.mesh),
        ((4, 64), (3, 64), AllreduceMode.ring),
    )
    for j, (shape, valid, mode) in enumerate(shapes):
        for b, backend in enumerate(BACKENDS):
            k = j + b + n
            dtype = DTYPES[k % 2] if shape != (16, 1024) else DType.FP32
            cases.append(
                Case(
                    _spec("allreduce", mode, dtype=dtype, reduce=OPS[k % 4], shape=shape, valid_shape=valid),
                    backend,
                    tags=("valid",),
                )
            )
    # a fully valid 2-D target spanning several chunks.
    cases.append(
        Case(
            _spec("allreduce", AllreduceMode.mesh, dtype=DTYPES[n % 2], reduce=OPS[n % 4], shape=(3, 3000)),
            BACKENDS[n % 2],
            tags=("valid",),
        )
    )
    # a2av: random counts (0, negative, > MAX_RECV) at two MAX_RECV, both dtypes and back ends.
    for j, (max_recv, size) in enumerate(((1, 17), (3, 33))):
        for b, dtype in enumerate(DTYPES):
            cases.append(
                Case(
                    _spec("all_to_all_v", None, dtype=dtype, size=size, max_recv=max_recv),
                    BACKENDS[(j + b) % 2],
                    iters=24,
                    block=6,
                    tags=("a2av",),
                )
            )
    # roots: broadcast from every root.
    for root in range(n):
        cases.append(
            Case(
                _spec("broadcast", None, dtype=DTYPES[(root + n) % 2], size=33, root=root),
                BACKENDS[root % 2],
                tags=("roots",),
            )
        )
    return cases


MATRIX = build_matrix(N)


def run_case(comm: MPI.Intracomm, case: Case) -> CheckResult:
    """Build the case's program and run the harness on it (quietly)."""
    spec = CollectiveSpec(**case.spec)
    options = RuntimeOptions(
        timeout=TIMEOUT, windows=case.backend, seed=len(case.id), stage_pieces=case.stage_pieces
    )
    return run_check(
        comm, collective_program(spec), case.iters, options, case.block, hooks=QUIET
    )


@pytest.mark.parametrize("case", MATRIX, ids=[c.id for c in MATRIX])
def test_collective(comm: MPI.Intracomm, case: Case) -> None:
    result = run_case(comm, case)
    assert result.iters == case.iters
    assert all(row.count >= 1 for row in result.rows)
    agree(comm, result.ok, f"{result.summary()}\n    first error: {result.first_error}")


def test_matrix_covers_every_dimension() -> None:
    """Across the six launcher sizes, the matrix meets every value of every dimension."""
    everything = [c for n in (1, 2, 3, 4, 5, 8) for c in build_matrix(n)]
    seen: dict[str, set[object]] = {}
    for c in everything:
        s = c.spec
        for key in ("name", "mode", "dtype", "reduce", "size"):
            if key in s:
                seen.setdefault(key, set()).add(s[key])
        seen.setdefault("backend", set()).add(c.backend)
        seen.setdefault("pieces", set()).add(c.stage_pieces)
    assert seen["name"] == {n for n, _ in COMBOS}
    assert seen["mode"] == set(AllreduceMode)
    assert seen["dtype"] == set(DTYPES)
    assert seen["reduce"] == set(OPS)
    assert {1, 17, 4097, 65537} <= seen["size"]
    assert seen["backend"] == set(BACKENDS)
    assert seen["pieces"] == {False, True}
    assert all(c.iters >= 20 for c in everything)
    # The large size meets every collective, dtype, op and back end somewhere.
    large = [c for c in everything if c.spec.get("size") == 65537]
    assert {c.spec["name"] for c in large} == {n for n, _ in COMBOS}
    assert {c.spec.get("dtype") for c in large} >= set(DTYPES)
    assert {c.spec.get("reduce") for c in large if c.spec["name"] in REDUCING} == set(OPS)
    assert {c.backend for c in large} == set(BACKENDS)
    ids = [c.id for c in MATRIX]
    assert len(ids) == len(set(ids)), "case ids must be unique"
