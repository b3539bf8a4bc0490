"""A tiny multi-rank simulator of lowered programs, for the lowering tests only.

It is NOT the project's interpreter (pldemu.runtime owns that): it exists so the lowering tests can
check the recipes end to end without MPI. Every rank runs the program as a Python generator; a seeded
random scheduler interleaves them at every remote access, notify and wait poll, so ordering bugs in
a recipe (a missing barrier, a wrong generation) show up as wrong data, a deadlock or a non-zero
signal cell. Memory is sequentially consistent; windows start NaN (poison), signals start zero.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp
from pldemu.ir.nodes import (
    NR,
    Arg,
    Assign,
    BinOp,
    BufferKind,
    Call,
    Const,
    Eval,
    Expr,
    For,
    If,
    ListExpr,
    NotStatic,
    Program,
    Return,
    Seq,
    Stmt,
    TensorType,
    Var,
    While,
    evaluate,
    fold_binop,
)
from pldemu.ir.ops import Op

Gen = Generator[str, None, Any]
STEP, BLOCKED = "step", "blocked"


class SimError(AssertionError):
    """The program did something illegal (out of bounds, Set on a counter, ...) or deadlocked."""


class Deadlock(SimError):
    pass


@dataclass(frozen=True)
class TRef:
    """A tensor value: a buffer (each rank has its own copy) seen through a packed shape."""

    buf: str
    shape: tuple[int, ...]
    valid: tuple[int, ...] | None


@dataclass(frozen=True)
class Tile:
    data: np.ndarray
    valid: tuple[int, ...]


class _Return(Exception):
    pass


_BINARY: Mapping[Op, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    Op.TILE_ADD: np.add, Op.TILE_SUB: np.subtract, Op.TILE_MUL: np.multiply,
    Op.TILE_MAXIMUM: np.maximum, Op.TILE_MINIMUM: np.minimum,
}

REDUCE_NP: Mapping[ReduceOp, Callable[..., np.ndarray]] = {
    ReduceOp.Sum: np.add, ReduceOp.Max: np.maximum, ReduceOp.Min: np.minimum, ReduceOp.Prod: np.multiply,
}


def eval_shape(dims: tuple[Expr, ...], nranks: int) -> tuple[int, ...]:
    out = []
    for d in dims:
        v = _static(d, nranks)
        out.append(v)
    return tuple(out)


def _static(e: Expr, nranks: int) -> int:
    try:
        return int(evaluate(e, nranks))
    except NotStatic:
        raise SimError(f"not a static NR expression: {e}") from None


@dataclass
class Stats:
    """What the run did, for assertions."""

    notifies: int = 0
    waits: int = 0
    set_notifies: int = 0
    eq_waits: int = 0
    steps: int = 0
    log: list[tuple[int, int, str, tuple[int, ...], int]] = field(default_factory=list)
    """Every notify: (from rank, to rank, buffer, cell, value)."""


class Machine:
    """``nranks`` ranks running ``program``; ``init(rank, buffer_name, shape, dtype)`` may fill buffers."""

    def __init__(self, program: Program, nranks: int,
                 init: Callable[[int, str, tuple[int, ...], np.dtype], np.ndarray | None] | None = None,
                 seed: int = 0, max_steps: int = 5_000_000) -> None:
        self.program, self.n, self.rng, self.max_steps = program, nranks, random.Random(seed), max_steps
        self.stats = Stats()
        self.kinds = {b.var.name: b.kind for b in program.buffers}
        self.mem: list[dict[str, np.ndarray]] = []
        for r in range(nranks):
            bufs: dict[str, np.ndarray] = {}
            for b in program.buffers:
                t = b.var.type
                assert isinstance(t, TensorType)
                shape = eval_shape(t.shape, nranks)
                dt = t.dtype.np
                given = init(r, b.var.name, shape, dt) if init is not None else None
                if given is not None:
                    arr = np.array(given, dtype=dt).reshape(shape)
                elif b.kind is BufferKind.SIGNAL:
                    arr = np.zeros(shape, dtype=dt)
                elif t.dtype.is_float:
                    arr = np.full(shape, np.nan, dtype=dt)
                else:
                    arr = np.full(shape, -12345, dtype=dt)
                bufs[b.var.name] = np.ascontiguousarray(arr).reshape(-1)
            self.mem.append(bufs)
        self.globals: dict[str, Any] = {}
        for b in program.buffers:
            t = b.var.type
            assert isinstance(t, TensorType)
            shape = eval_shape(t.shape, nranks)
            valid = eval_shape(t.valid_shape, nranks) if t.valid_shape is not None else None
            self.globals[b.var.name] = TRef(b.var.name, shape, valid)

    # -- public ---------------------------------------------------------------------------------

    def run(self) -> Machine:
        gens = {r: self._rank(r) for r in range(self.n)}
        blocked: set[int] = set()
        while gens:
            r = self.rng.choice(sorted(gens))
            try:
                event = next(gens[r])
            except StopIteration:
                del gens[r]
                blocked.discard(r)
                continue
            self.stats.steps += 1
            if self.stats.steps > self.max_steps:
                raise SimError("step limit exceeded")
            if event == BLOCKED:
                blocked.add(r)
                if blocked >= set(gens):
                    raise Deadlock(f"deadlock: ranks {sorted(blocked)} all wait; signals {self.signals()}")
            else:
                blocked.clear()
        return self

    def array(self, rank: int, name: str) -> np.ndarray:
        ref = self.globals[name]
        return self.mem[rank][name].reshape(ref.shape)

    def signals(self) -> dict[str, list[list[int]]]:
        return {name: [self.mem[r][name].tolist() for r in range(self.n)]
                for name, kind in self.kinds.items() if kind is BufferKind.SIGNAL}

    # -- execution ------------------------------------------------------------------------------

    def _rank(self, r: int) -> Gen:
        env: dict[str, Any] = dict(self.globals)
        env[NR.name] = self.n
        with contextlib.suppress(_Return):
            yield from self._seq(r, env, self.program.function().body.stmts)

    def _seq(self, r: int, env: dict[str, Any], stmts: tuple[Stmt, ...]) -> Gen:
        for s in stmts:
            yield from self._stmt(r, env, s)

    def _stmt(self, r: int, env: dict[str, Any], s: Stmt) -> Gen:
        if isinstance(s, Assign):
            env[s.var.name] = yield from self._eval(r, env, s.value)
        elif isinstance(s, Eval):
            yield from self._eval(r, env, s.call)
        elif isinstance(s, Seq):
            yield from self._seq(r, env, s.stmts)
        elif isinstance(s, For):
            start = yield from self._eval(r, env, s.start)
            stop = yield from self._eval(r, env, s.stop)
            step = yield from self._eval(r, env, s.step)
            for i in range(int(start), int(stop), int(step)):
                env[s.var.name] = i
                yield from self._seq(r, env, s.body.stmts)
        elif isinstance(s, While):
            while (yield from self._eval(r, env, s.cond)):
                yield from self._seq(r, env, s.body.stmts)
        elif isinstance(s, If):
            if (yield from self._eval(r, env, s.cond)):
                yield from self._seq(r, env, s.then.stmts)
            elif s.orelse is not None:
                yield from self._seq(r, env, s.orelse.stmts)
        elif isinstance(s, Return):
            raise _Return
        else:
            raise SimError(f"unknown statement {s!r}")

    def _eval(self, r: int, env: dict[str, Any], e: Arg) -> Gen:
        if isinstance(e, ListExpr):
            out = []
            for item in e.items:
                out.append((yield from self._eval(r, env, item)))
            return out
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            if e.name not in env:
                raise SimError(f"rank {r}: {e.name} is not defined")
            return env[e.name]
        if isinstance(e, BinOp):
            a = yield from self._eval(r, env, e.lhs)
            b = yield from self._eval(r, env, e.rhs)
            return fold_binop(e.op, _py(a), _py(b))
        assert isinstance(e, Call)
        args = []
        for a in e.args:
            args.append((yield from self._eval(r, env, a)))
        return (yield from self._call(r, e, args))

    # -- ops ------------------------------------------------------------------------------------

    def _view(self, rank: int, t: TRef) -> np.ndarray:
        return self.mem[rank][t.buf].reshape(t.shape)

    def _region(self, t: TRef, offs: Any, ext: Any, what: str, writes: bool = False) -> Any:
        limit = t.valid if (writes and t.valid is not None) else t.shape
        if len(offs) != len(t.shape) or len(ext) != len(t.shape):
            raise SimError(f"{what}: rank mismatch {offs} {ext} for {t.shape}")
        for o, x, d in zip(offs, ext, limit, strict=True):
            if x < 0 or o < 0 or (x > 0 and o + x > d):
                raise SimError(f"{what}: region {offs}+{ext} outside {limit} of {t.buf}")
        return tuple(slice(int(o), int(o) + int(x)) for o, x in zip(offs, ext, strict=True))

    def _call(self, r: int, call: Call, a: list[Any]) -> Gen:
        op = call.op
        shape: Any
        valid: Any
        if op is Op.GET_COMM_CTX:
            return "ctx"
        if op is Op.RANK:
            return r
        if op is Op.NRANKS:
            return self.n
        if op is Op.TENSOR_VIEW:
            t: TRef = a[0]
            shape = tuple(int(x) for x in a[1])
            if int(np.prod(shape)) != int(np.prod(t.shape)):
                raise SimError(f"tensor.view {t.shape} -> {shape} changes the element count")
            valid = tuple(int(x) for x in a[2]) if len(a) > 2 else None
            return TRef(t.buf, shape, valid)
        if op is Op.TENSOR_READ:
            return _py(self._view(r, a[0])[tuple(int(i) for i in a[1])])
        if op is Op.TENSOR_WRITE:
            self._view(r, a[0])[tuple(int(i) for i in a[1])] = a[2]
            return None
        if op is Op.TILE_CREATE:
            shape = tuple(int(x) for x in a[0])
            dt = call.attr("dtype")
            assert isinstance(dt, DType)
            return Tile(np.full(shape, np.nan, dtype=dt.np), shape)
        if op in (Op.TILE_LOAD, Op.REMOTE_LOAD):
            if op is Op.REMOTE_LOAD:
                yield STEP
                t, rank, offs, shape = a[0], int(a[1]), a[2], a[3]
                rest = a[4:]
            else:
                t, rank, offs, shape = a[0], r, a[1], a[2]
                rest = a[3:]
            shape = [int(x) for x in shape]
            valid = [int(x) for x in rest[0]] if rest else shape
            if any(v > s or v < 1 for v, s in zip(valid, shape, strict=True)):
                raise SimError(f"{op.text}: valid {valid} not within tile {shape}")
            region = self._region(t, offs, valid, op.text)
            data = np.full(shape, np.nan, dtype=self.mem[rank][t.buf].dtype)
            data[tuple(slice(0, v) for v in valid)] = self._view(rank, t)[region]
            return Tile(data, tuple(valid))
        if op is Op.TILE_STORE:
            tile, offs, t = a[0], a[1], a[2]
            region = self._region(t, offs, list(tile.valid), op.text, writes=True)
            self._view(r, t)[region] = tile.data[tuple(slice(0, v) for v in tile.valid)]
            return None
        if op is Op.TILE_SET_VALIDSHAPE:
            tile, valid = a[0], tuple(int(x) for x in a[1])
            if any(v > s or v < 0 for v, s in zip(valid, tile.data.shape, strict=True)):
                raise SimError(f"tile.set_validshape {valid} outside {tile.data.shape}")
            return Tile(tile.data, valid)
        if op in _BINARY:
            x, y = a[0], a[1]
            if x.data.shape != y.data.shape:
                raise SimError(f"{op.text}: shapes {x.data.shape} {y.data.shape}")
            return Tile(_BINARY[op](x.data, y.data).astype(x.data.dtype), x.valid)
        if op in (Op.PUT, Op.GET):
            yield STEP
            dst, peer, src = a[0], int(a[1]), a[2]
            if op is Op.PUT and call.attr("atomic") is not AtomicType.None_:
                raise SimError("atomic put is not used by the recipes")
            src_rank, dst_rank = (r, peer) if op is Op.PUT else (peer, r)
            if len(a) > 4:
                doffs, soffs, shape = a[4], a[5], [int(x) for x in a[6]]
            else:
                doffs, soffs = [0] * len(dst.shape), [0] * (len(src.shape) if isinstance(src, TRef) else 2)
                shape = list(dst.shape)
            if isinstance(src, Tile):
                data = src.data[tuple(slice(int(o), int(o) + x) for o, x in zip(soffs, shape, strict=True))]
            else:
                data = self._view(src_rank, src)[self._region(src, soffs, shape, op.text)]
            self._view(dst_rank, dst)[self._region(dst, doffs, shape, op.text, writes=True)] = data
            return None
        if op is Op.NOTIFY:
            yield STEP
            sig, peer, cell, value = a[0], int(a[1]), a[2], int(a[3])
            self.stats.notifies += 1
            arr = self._view(peer, sig)
            idx = tuple(int(c) for c in cell)
            self.stats.log.append((r, peer, sig.buf, idx, value))
            if call.attr("op") is NotifyOp.Set:
                self.stats.set_notifies += 1
                arr[idx] = value
            else:
                arr[idx] = arr[idx] + value
            return None
        if op is Op.WAIT:
            sig, cell, expected = a[0], a[1], int(a[2])
            self.stats.waits += 1
            idx = tuple(int(c) for c in cell)
            eq = call.attr("cmp") is WaitCmp.Eq
            if eq:
                self.stats.eq_waits += 1
            while True:
                v = int(self._view(r, sig)[idx])
                if (v == expected) if eq else (v >= expected):
                    return None
                yield BLOCKED
        raise SimError(f"the simulator does not implement {op.text}")


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v
