"""Helpers of the lowering tests: inputs, reference semantics, simulation, IR walkers."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise

import numpy as np
from ir_helpers import roundtrip as _roundtrip  # tests/ir_helpers.py (tests/ is on sys.path)
from lowering_sim import REDUCE_NP, Machine

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, Call, DType, For, Function, Program, ReduceOp, Seq, Var
from pldemu.ir.nodes import INDEX, Const, format_expr
from pldemu.ir.ops import Op
from pldemu.ir.walk import program_calls
from pldemu.lowering import lower_composite_ops


def roundtrip(program: Program) -> None:
    """print -> parse -> structurally equal (the IR suite's shared helper)."""
    _roundtrip(program)


def looped(program: Program, calls: int) -> Program:
    """The program with main's body wrapped in ``for it in range(0, calls)`` (back-to-back calls)."""
    main = program.function()
    body = Seq((For(Var("it", INDEX), Const(0), Const(calls), Const(1), main.body),))
    return replace(program, functions=(Function(main.name, main.params, body),))


def calls_of(program: Program, op: Op | None = None) -> list[Call]:
    return [c for c in program_calls(program) if op is None or c.op is op]


def wait_generations(program: Program) -> list[str]:
    """The printed ``expected`` of every wait site, in program order."""
    return [format_expr(c.args[2]) for c in calls_of(program, Op.WAIT)]


def values_for(op: ReduceOp | None, rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """Small integer-valued data: every reduction (sum, prod of +-1) is exact in FP16."""
    if op is ReduceOp.Prod:
        return rng.choice([-1.0, 1.0], size=shape).astype(dt)
    if op in (ReduceOp.Max, ReduceOp.Min):
        return rng.integers(-50, 51, size=shape).astype(dt)
    if dt.kind == "f":
        return rng.integers(-4, 5, size=shape).astype(dt)
    return rng.integers(-100, 100, size=shape).astype(dt)


def make_inputs(spec: CollectiveSpec, nranks: int, seed: int) -> dict[str, list[np.ndarray]]:
    """Per-rank initial contents of the buffers that carry data in."""
    rng = np.random.default_rng(seed)
    dt = spec.dtype.np
    n, size, m = nranks, spec.size, spec.max_recv
    op = spec.reduce if spec.name in ("allreduce", "reduce_scatter") else None
    shapes: dict[str, tuple[int, ...]] = {  # type: ignore[assignment]
        "allreduce": {"target": spec.target_shape},
        "allgather": {"local_data": (1, size)},
        "reduce_scatter": {"target": (n, size)},
        "broadcast": {"target": spec.target_shape},
        "barrier": {},
        "all_to_all": {"input": (n, size)},
        "all_to_all_v": {"input": (n * m, size)},
    }[spec.name]
    out = {name: [values_for(op, rng, shape, dt) for _ in range(n)] for name, shape in shapes.items()}
    if spec.name == "all_to_all_v":
        out["send_counts"] = [rng.integers(-1, m + 3, size=(n,)).astype(np.int32) for _ in range(n)]
        out["recv_counts"] = [rng.integers(-9, 9, size=(n, 1)).astype(np.int32) for _ in range(n)]  # stale
    return out


def reference(spec: CollectiveSpec, nranks: int, inputs: dict[str, list[np.ndarray]],
              calls: int) -> dict[str, list[tuple[tuple[slice, ...], np.ndarray]]]:
    """Expected (region, values) per buffer per rank after ``calls`` back-to-back calls."""
    n = nranks
    exp: dict[str, list[tuple[tuple[slice, ...], np.ndarray]]] = {}
    red = REDUCE_NP[spec.reduce]
    if spec.name == "allreduce":
        box = tuple(slice(0, v) for v in (spec.valid_shape or spec.target_shape))
        vals = [x[box].astype(np.float64) for x in inputs["target"]]
        for _ in range(calls):
            total = vals[0]
            for v in vals[1:]:
                total = red(total, v)
            vals = [total] * n
        exp["target"] = [(box, vals[r]) for r in range(n)]
    elif spec.name == "reduce_scatter":
        t = [x.astype(np.float64).copy() for x in inputs["target"]]
        for _ in range(calls):
            for r in range(n):
                total = t[0][r]
                for p in range(1, n):
                    total = red(total, t[p][r])
                t[r][r] = total
        exp["target"] = [((slice(r, r + 1), slice(None)), t[r][r:r + 1]) for r in range(n)]
    elif spec.name == "allgather":
        full = np.concatenate([x for x in inputs["local_data"]], axis=0)
        exp["target"] = [((slice(None), slice(None)), full)] * n
    elif spec.name == "broadcast":
        root = inputs["target"][spec.root]
        exp["target"] = [(tuple(slice(None) for _ in root.shape), root)] * n
    elif spec.name == "all_to_all":
        exp["target"] = [((slice(None), slice(None)), np.stack([inputs["input"][s][p] for s in range(n)]))
                         for p in range(n)]
    elif spec.name == "all_to_all_v":
        m = spec.max_recv
        rows = [[int(min(max(int(inputs["send_counts"][s][p]), 0), m)) for p in range(n)] for s in range(n)]
        exp["target"], exp["recv_counts"] = [], []
        for p in range(n):
            for s in range(n):
                k = rows[s][p]
                exp["target"].append(((slice(s * m, s * m + k), slice(None)),
                                      inputs["input"][s][p * m:p * m + k]))
            exp["recv_counts"].append(((slice(None), slice(None)),
                                       np.array([[rows[s][p]] for s in range(n)], dtype=np.int32)))
    return exp


def simulate(spec: CollectiveSpec, nranks: int, seed: int = 0, calls: int = 1,
             program: Program | None = None) -> Machine:
    """Lower and run ``spec`` on ``nranks`` simulated ranks; assert results and all-zero signals."""
    base = program if program is not None else collective_program(spec).program
    lowered = lower_composite_ops(looped(base, calls) if calls > 1 else base)
    inputs = make_inputs(spec, nranks, seed)

    def init(rank: int, name: str, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray | None:
        vals = inputs.get(name)
        return None if vals is None else vals[rank]

    machine = Machine(lowered, nranks, init=init, seed=seed).run()
    expected = reference(spec, nranks, inputs, calls)
    n = nranks
    for name, items in expected.items():
        per_rank = len(items) // n
        for p in range(n):
            got = machine.array(p, name)
            for region, want in items[p * per_rank:(p + 1) * per_rank]:
                ok = np.array_equal(got[region].astype(np.float64), np.asarray(want, dtype=np.float64))
                assert ok, f"{spec} NR={n} rank {p} {name}{region}: got {got[region]} want {want}"
    for name, per in machine.signals().items():
        if name == "recv_counts":
            continue
        assert all(v == 0 for rank in per for v in np.ravel(rank)), f"{name} not zero: {per}"
    assert machine.stats.set_notifies == 0 and machine.stats.eq_waits == 0
    return machine


def specs_all(size: int = 17, dtype: DType = DType.FP32) -> Iterator[CollectiveSpec]:
    """One spec per collective (both allreduce modes)."""
    for name in ("allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "all_to_all", "all_to_all_v"):
        if name == "allreduce":
            for mode in AllreduceMode:
                yield CollectiveSpec(name, mode=mode, dtype=dtype, size=size)
        else:
            yield CollectiveSpec(name, dtype=dtype, size=size)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ring_chunks(size: int, nranks: int, dtype: DType) -> int:
    """Independent reference: ceil(L / C) with L the longest ring segment."""
    chunk, align = 16384 // dtype.itemsize, 32 // dtype.itemsize
    c = ceil_div(size, align) * align if size < chunk else chunk
    if dtype is DType.FP16:
        bounds = [min(ceil_div(i * size, 16 * nranks) * 16, size) for i in range(nranks + 1)]
    else:
        bounds = [i * size // nranks for i in range(nranks + 1)]
    longest = max(b - a for a, b in pairwise(bounds))
    assert longest == (min(ceil_div(size, 16 * nranks) * 16, size) if dtype is DType.FP16
                       else math.ceil(size / nranks))  # the spec's L is the true longest segment
    return ceil_div(longest, c)
