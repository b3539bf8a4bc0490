"""Python builder API for programs, with the ``pld`` vocabulary.

No global "current program": a ``ProgramBuilder`` declares buffers, ``ProgramBuilder.function``
returns a ``FunctionBuilder``, and ``FunctionBuilder.pld`` is the vocabulary bound to that builder::

    pb = ProgramBuilder("demo")
    data = pb.window("data", "fp32", [1, 17])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function("main")
    pld = fb.pld
    out = pld.tensor.allreduce(data, sig, op="sum", mode="ring")
    with fb.for_range(0, 3) as i:
        pld.tensor.barrier(sig)
    program = pb.build()

The lowering pass emits its recipes through the same ``FunctionBuilder``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import Layout
from pldemu.ir.nodes import (
    INDEX,
    NONE,
    NR,
    Arg,
    AttrValue,
    BufferDecl,
    BufferKind,
    Call,
    Eval,
    Expr,
    ExprLike,
    ExprOps,
    For,
    Function,
    If,
    ListExpr,
    Program,
    Return,
    Seq,
    SourcePos,
    Stmt,
    TensorType,
    Var,
    While,
    as_expr,
)
from pldemu.ir.nodes import Assign as AssignStmt
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call

ListLike = ListExpr | Sequence[ExprLike]


def as_list(items: ListLike) -> ListExpr:
    """Wrap a Python sequence of expressions/ints as a ListExpr."""
    if isinstance(items, ListExpr):
        return items
    return ListExpr(tuple(as_expr(i) for i in items))


_IR_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(_IR_DIR.rstrip(os.sep)) + os.sep
_EXAMPLES_DIR = _PACKAGE_DIR + "examples" + os.sep


def _caller_origin() -> SourcePos | None:
    """The line of the user's code that is building a statement: the first frame outside
    ``pldemu/ir``, when it is outside the ``pldemu`` package too, or one of its examples (pldemu's own
    builders, the lowering and the built-in collectives, are nobody's source)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_IR_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    file = frame.f_code.co_filename
    if file.startswith(_PACKAGE_DIR) and not file.startswith(_EXAMPLES_DIR):
        return None
    return SourcePos(file, frame.f_lineno)


def _dtype(d: DType | str) -> DType:
    return d if isinstance(d, DType) else DType.parse(d)


class FunctionBuilder:
    """Accumulates the statements of one function; nested blocks via context managers."""

    def __init__(self, name: str = "main", params: Sequence[Var] = (), used_names: Iterable[str] = ()) -> None:
        self.name = name
        self.params = tuple(params)
        self._blocks: list[list[Stmt]] = [[]]
        self._names: set[str] = set(used_names) | {p.name for p in params}
        self._counters: dict[str, int] = {}
        self._temp_counter = 0
        self.pld = Pld(self)
        self.origin: SourcePos | None = None
        """The origin given to every statement emitted without one (None: the builder's caller's line)."""

    # -- names and statements -----------------------------------------------------------------

    def reserve(self, names: Iterable[str]) -> None:
        """Mark names as taken (buffers, existing variables) so fresh names never collide."""
        self._names.update(names)

    def temp(self, base: str, role: str) -> str:
        """A fresh temporary named from ``base`` (a composite's target) and its ``role`` in the recipe.

        One counter per function, shared by every composite lowered into it (BuildName's temp_counter_).
        """
        self._temp_counter += 1
        return self.fresh(f"{base}_{role}_{self._temp_counter - 1}")

    def fresh(self, hint: str) -> str:
        """A new unique name derived from ``hint`` (``hint``, then ``hint_1``, ``hint_2``, ...)."""
        if hint not in self._names:
            self._names.add(hint)
            return hint
        n = self._counters.get(hint, 0)
        while True:
            n += 1
            name = f"{hint}_{n}"
            if name not in self._names:
                self._counters[hint] = n
                self._names.add(name)
                return name

    def emit(self, stmt: Stmt) -> None:
        """Append ``stmt`` to the current block. An assignment or call statement without an origin gets
        :attr:`origin` (set by the lowering while it expands a composite), else the line of the user's
        Python file that built it (the first caller outside ``pldemu``), so reports can point there."""
        if isinstance(stmt, (AssignStmt, Eval)) and stmt.origin is None:
            origin = self.origin if self.origin is not None else _caller_origin()
            if origin is not None:
                stmt = dataclasses.replace(stmt, origin=origin)
        self._blocks[-1].append(stmt)

    def retarget_last(self, fresh: Var, existing: Var) -> bool:
        """Make the statement just emitted, ``fresh = value``, assign ``existing`` instead (a front end
        re-binding a name, as in ``acc = add(acc, x)`` inside a loop); False when it is not that."""
        block = self._blocks[-1]
        last = block[-1] if block else None
        if not isinstance(last, AssignStmt) or last.var != fresh or fresh.type != existing.type:
            return False
        block[-1] = dataclasses.replace(last, var=existing)
        return True

    def let(self, hint: str, value: ExprLike) -> Var:
        """Bind ``value`` to a fresh variable and return it."""
        e = as_expr(value)
        var = Var(self.fresh(hint), e.type)
        self.emit(AssignStmt(var, e))
        return var

    def assign(self, var: Var, value: ExprLike) -> None:
        """Re-assign an existing variable (loop-carried state in while loops)."""
        e = as_expr(value)
        if e.type != var.type:
            raise TypeError(f"cannot assign a {e.type} to {var.name} of type {var.type}")
        self.emit(AssignStmt(var, e))

    def assign_to(self, var: Var, value: Expr) -> Var:
        """Bind ``value`` to the given variable (its type is taken from the value)."""
        target = Var(var.name, value.type)
        self._names.add(var.name)
        self.emit(AssignStmt(target, value))
        return target

    def op(self, op: Op, args: Sequence[Arg | ExprLike | ListLike], attrs: dict[str, AttrValue] | None = None,
           hint: str = "t") -> Var | None:
        """Emit ``op(args)``: bound to a fresh variable, or as an Eval when it returns nothing."""
        call = self.call(op, args, attrs)
        if call.type == NONE:
            self.emit(Eval(call))
            return None
        return self.let(hint, call)

    def call(self, op: Op, args: Sequence[Arg | ExprLike | ListLike],
             attrs: dict[str, AttrValue] | None = None) -> Call:
        """Build (but do not emit) a checked call."""
        conv: list[Arg] = []
        for a in args:
            if isinstance(a, (list, tuple)):
                conv.append(as_list(a))
            elif isinstance(a, ListExpr):
                conv.append(a)
            else:
                assert not isinstance(a, Sequence)
                conv.append(as_expr(a))
        return make_call(op, conv, attrs)

    def ret(self, *values: ExprLike) -> None:
        self.emit(Return(tuple(as_expr(v) for v in values)))

    # -- structured control flow --------------------------------------------------------------

    @contextmanager
    def block(self) -> Iterator[list[Stmt]]:
        """Collect the statements emitted inside the ``with`` into a fresh list."""
        self._blocks.append([])
        try:
            yield self._blocks[-1]
        finally:
            self._blocks.pop()

    @contextmanager
    def for_range(self, start: ExprLike, stop: ExprLike | None = None, step: ExprLike = 1,
                  hint: str = "i") -> Iterator[Var]:
        """``for var in range(start, stop, step)`` (``for_range(n)`` counts from 0)."""
        if stop is None:
            start, stop = 0, start
        var = Var(self.fresh(hint), INDEX)
        with self.block() as body:
            yield var
        self.emit(For(var, as_expr(start), as_expr(stop), as_expr(step), Seq(tuple(body))))

    @contextmanager
    def while_(self, cond: ExprLike) -> Iterator[None]:
        with self.block() as body:
            yield
        self.emit(While(as_expr(cond), Seq(tuple(body))))

    @contextmanager
    def if_(self, cond: ExprLike) -> Iterator[None]:
        with self.block() as body:
            yield
        self.emit(If(as_expr(cond), Seq(tuple(body)), None))

    @contextmanager
    def else_(self) -> Iterator[None]:
        """The else branch of the If emitted just before."""
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], If) or block[-1].orelse is not None:
            raise ValueError("else_() must directly follow an if_() block without an else")
        last = block.pop()
        assert isinstance(last, If)
        with self.block() as body:
            yield
        self.emit(If(last.cond, last.then, Seq(tuple(body))))

    # -- results --------------------------------------------------------------------------------

    def body(self) -> Seq:
        if len(self._blocks) != 1:
            raise ValueError("unclosed block in function builder")
        return Seq(tuple(self._blocks[0]))

    def build(self) -> Function:
        return Function(self.name, self.params, self.body())


class ProgramBuilder:
    """Declares a program's buffers and functions."""

    def __init__(self, name: str, nranks: int | None = None) -> None:
        self.name = name
        self.nranks = nranks
        self._buffers: list[BufferDecl] = []
        self._functions: list[FunctionBuilder] = []

    def _declare(self, name: str, kind: BufferKind, t: TensorType) -> Var:
        if name == NR.name or any(b.var.name == name for b in self._buffers):
            raise ValueError(f"buffer name {name!r} is reserved or declared twice")
        var = Var(name, t)
        self._buffers.append(BufferDecl(var, kind))
        return var

    def window(self, name: str, dtype: DType | str, shape: Sequence[ExprLike],
               valid_shape: Sequence[ExprLike] | None = None, *, layout: Layout = Layout.ND,
               strides: Sequence[int] | None = None) -> Var:
        """A data window (DistributedTensor): peers can put/get/remote_load it."""
        t = TensorType(_dtype(dtype), tuple(as_expr(d) for d in shape),
                       None if valid_shape is None else tuple(as_expr(d) for d in valid_shape),
                       True, layout, None if strides is None else tuple(strides))
        return self._declare(name, BufferKind.WINDOW, t)

    def signal(self, name: str, shape: Sequence[ExprLike]) -> Var:
        """An INT32 signal window, zero at allocation."""
        t = TensorType(DType.INT32, tuple(as_expr(d) for d in shape), None, True)
        return self._declare(name, BufferKind.SIGNAL, t)

    def local(self, name: str, dtype: DType | str, shape: Sequence[ExprLike]) -> Var:
        """A rank-local tensor (not reachable by peers)."""
        t = TensorType(_dtype(dtype), tuple(as_expr(d) for d in shape), None, False)
        return self._declare(name, BufferKind.LOCAL, t)

    def function(self, name: str = "main") -> FunctionBuilder:
        fb = FunctionBuilder(name, used_names=[b.var.name for b in self._buffers] + [NR.name])
        self._functions.append(fb)
        return fb

    def build(self, entry: str = "main") -> Program:
        return Program(self.name, tuple(self._buffers), tuple(f.build() for f in self._functions), entry,
                       self.nranks)


def _hint(v: ExprLike, suffix: str) -> str:
    return f"{v.name}_{suffix}" if isinstance(v, Var) else suffix


class _Namespace:
    def __init__(self, fb: FunctionBuilder) -> None:
        self._fb = fb


class TensorNS(_Namespace):
    """``pld.tensor.*``: the collectives and global-tensor helpers."""

    def allreduce(self, target: Var, signal: Var, *, op: str | AttrValue = "Sum",
                  mode: str | AttrValue = "mesh") -> Var:
        return self._result(Op.ALLREDUCE, [target, signal], {"op": op, "mode": mode}, target)

    def allgather(self, local_data: Var, target: Var, signal: Var) -> Var:
        return self._result(Op.ALLGATHER, [local_data, target, signal], {}, target)

    def reduce_scatter(self, target: Var, signal: Var, *, op: str | AttrValue = "Sum") -> Var:
        return self._result(Op.REDUCE_SCATTER, [target, signal], {"op": op}, target)

    def broadcast(self, target: Var, signal: Var, *, root: int) -> Var:
        return self._result(Op.BROADCAST, [target, signal], {"root": root}, target)

    def barrier(self, signal: Var) -> Var:
        return self._result(Op.BARRIER, [signal], {}, signal)

    def all_to_all(self, input: Var, target: Var, signal: Var) -> Var:
        return self._result(Op.ALL_TO_ALL, [input, target, signal], {}, target)

    def all_to_all_v(self, input: Var, target: Var, signal: Var, send_counts: Var, recv_counts: Var) -> Var:
        return self._result(Op.ALL_TO_ALL_V, [input, target, signal, send_counts, recv_counts], {}, target)

    def view(self, tensor: Var, shape: ListLike, valid_shape: ListLike | None = None) -> Var:
        args: list[Arg | ListLike] = [tensor, as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._result(Op.TENSOR_VIEW, args, {}, tensor, "view")

    def read(self, tensor: Var, indices: ListLike) -> Var:
        return self._result(Op.TENSOR_READ, [tensor, as_list(indices)], {}, tensor, "val")

    def write(self, tensor: Var, indices: ListLike, value: ExprLike) -> None:
        self._fb.op(Op.TENSOR_WRITE, [tensor, as_list(indices), as_expr(value)])

    def _result(self, op: Op, args: Sequence[Arg | ListLike], attrs: dict[str, AttrValue], base: ExprLike,
                suffix: str = "out") -> Var:
        out = self._fb.op(op, args, attrs, hint=_hint(base, suffix))
        assert out is not None
        return out


class TileNS(_Namespace):
    """``pld.tile.*`` distributed data movement plus the local ``tile.*`` ops."""

    def put(self, dst: Var, peer: ExprLike, src: Var, stage: Var, dst_offsets: ListLike | None = None,
            src_offsets: ListLike | None = None, shape: ListLike | None = None, *,
            atomic: str | AttrValue = "None") -> None:
        self._fb.op(Op.PUT, [dst, as_expr(peer), src, stage, *_region(dst_offsets, src_offsets, shape)],
                    {"atomic": atomic})

    def get(self, dst: Var, peer: ExprLike, src: Var, stage: Var, dst_offsets: ListLike | None = None,
            src_offsets: ListLike | None = None, shape: ListLike | None = None) -> None:
        self._fb.op(Op.GET, [dst, as_expr(peer), src, stage, *_region(dst_offsets, src_offsets, shape)])

    def remote_load(self, window: Var, peer: ExprLike, offsets: ListLike, shape: Sequence[int],
                    valid_shape: ListLike | None = None, hint: str = "rtile") -> Var:
        args: list[Arg | ListLike] = [window, as_expr(peer), as_list(offsets), as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.REMOTE_LOAD, args, {}, hint)

    def create(self, shape: Sequence[int], dtype: DType | str, mem: str | AttrValue = "Vec",
               hint: str = "stage") -> Var:
        return self._var(Op.TILE_CREATE, [as_list(shape)], {"dtype": _dtype(dtype), "mem": mem}, hint)

    def full(self, shape: Sequence[int], value: ExprLike, dtype: DType | str, hint: str = "fill",
             valid_shape: ListLike | None = None) -> Var:
        args: list[Arg | ListLike] = [as_list(shape), as_expr(value)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.TILE_FULL, args, {"dtype": _dtype(dtype)}, hint)

    def load(self, tensor: Var, offsets: ListLike, shape: Sequence[int], valid_shape: ListLike | None = None,
             hint: str = "ltile") -> Var:
        args: list[Arg | ListLike] = [tensor, as_list(offsets), as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.TILE_LOAD, args, {}, hint)

    def store(self, tile: Var, offsets: ListLike, tensor: Var) -> None:
        self._fb.op(Op.TILE_STORE, [tile, as_list(offsets), tensor])

    def set_validshape(self, tile: Var, valid_shape: ListLike, hint: str | None = None) -> Var:
        return self._var(Op.TILE_SET_VALIDSHAPE, [tile, as_list(valid_shape)], {}, hint or tile.name)

    def fillpad(self, tile: Var, pad: str | AttrValue = "zero", hint: str | None = None) -> Var:
        return self._var(Op.TILE_FILLPAD, [tile], {"pad": pad}, hint or tile.name)

    def binary(self, op: Op, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self._var(op, [lhs, rhs], {}, hint)

    def add(self, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self.binary(Op.TILE_ADD, lhs, rhs, hint)

    def sub(self, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self.binary(Op.TILE_SUB, lhs, rhs, hint)

    def mul(self, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self.binary(Op.TILE_MUL, lhs, rhs, hint)

    def maximum(self, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self.binary(Op.TILE_MAXIMUM, lhs, rhs, hint)

    def minimum(self, lhs: Var, rhs: Var, hint: str = "acc") -> Var:
        return self.binary(Op.TILE_MINIMUM, lhs, rhs, hint)

    def adds(self, tile: Var, scalar: ExprLike, hint: str = "acc") -> Var:
        return self._var(Op.TILE_ADDS, [tile, as_expr(scalar)], {}, hint)

    def muls(self, tile: Var, scalar: ExprLike, hint: str = "acc") -> Var:
        return self._var(Op.TILE_MULS, [tile, as_expr(scalar)], {}, hint)

    def cast(self, tile: Var, dtype: DType | str, hint: str = "cast", mode: str | AttrValue = "None") -> Var:
        return self._var(Op.TILE_CAST, [tile], {"dtype": _dtype(dtype), "mode": mode}, hint)

    def sin(self, tile: Var, hint: str = "sin") -> Var:
        return self._var(Op.TILE_SIN, [tile], {}, hint)

    def cos(self, tile: Var, hint: str = "cos") -> Var:
        return self._var(Op.TILE_COS, [tile], {}, hint)

    def cmp(self, lhs: Var, rhs: Var, cmp_type: str | AttrValue, hint: str = "mask") -> Var:
        return self._var(Op.TILE_CMP, [lhs, rhs], {"cmp_type": cmp_type}, hint)

    def cmps(self, lhs: Var, rhs: ExprLike, cmp_type: str | AttrValue, hint: str = "mask") -> Var:
        return self._var(Op.TILE_CMPS, [lhs, as_expr(rhs)], {"cmp_type": cmp_type}, hint)

    def select(self, cond: Var, on_true: ExprLike, on_false: ExprLike, hint: str = "sel") -> Var:
        return self._var(Op.TILE_SELECT, [cond, as_expr(on_true), as_expr(on_false)], {}, hint)

    def sel(self, mask: Var, lhs: Var, rhs: Var, tmp: Var, hint: str = "sel") -> Var:
        return self._var(Op.TILE_SEL, [mask, lhs, rhs, tmp], {}, hint)

    def sels(self, mask: Var, src: Var, tmp: Var, scalar: ExprLike, hint: str = "sel") -> Var:
        return self._var(Op.TILE_SELS, [mask, src, tmp, as_expr(scalar)], {}, hint)

    def _var(self, op: Op, args: Sequence[Arg | ListLike], attrs: dict[str, AttrValue], hint: str) -> Var:
        out = self._fb.op(op, args, attrs, hint=hint)
        assert out is not None
        return out


def _region(dst_offsets: ListLike | None, src_offsets: ListLike | None,
            shape: ListLike | None) -> list[ListExpr]:
    given = [x is not None for x in (dst_offsets, src_offsets, shape)]
    if not any(given):
        return []
    if not all(given):
        raise ValueError("dst_offsets, src_offsets and shape come together or not at all")
    assert dst_offsets is not None and src_offsets is not None and shape is not None
    return [as_list(dst_offsets), as_list(src_offsets), as_list(shape)]


class SystemNS(_Namespace):
    """``pld.system.*``: signals and rank queries, and the ``system.*`` memory-ordering markers."""

    def notify(self, signal: Var, peer: ExprLike, offsets: ListLike, value: ExprLike, *,
               op: str | AttrValue = "AtomicAdd") -> None:
        self._fb.op(Op.NOTIFY, [signal, as_expr(peer), as_list(offsets), as_expr(value)], {"op": op})

    def wait(self, signal: Var, offsets: ListLike, expected: ExprLike, *, cmp: str | AttrValue = "Ge") -> None:
        self._fb.op(Op.WAIT, [signal, as_list(offsets), as_expr(expected)], {"cmp": cmp})

    def fence(self) -> None:
        """``system.fence()``: every earlier write of this rank completes, to every target."""
        self._fb.op(Op.FENCE, [])

    def cacheinvalid(self, tensor: Var | None = None, shapes: ListLike | None = None,
                     offsets: ListLike | None = None) -> None:
        """``system.cacheinvalid()`` (whole global memory) or ``system.cacheinvalid(t, shapes, offsets)``
        (the region form: on the device only the 64-byte line holding the view's base)."""
        given = [x is not None for x in (tensor, shapes, offsets)]
        if any(given) and not all(given):
            raise ValueError("system.cacheinvalid takes tensor, shapes and offsets together or none of them")
        if tensor is None or shapes is None or offsets is None:
            self._fb.op(Op.CACHEINVALID, [])
            return
        self._fb.op(Op.CACHEINVALID, [tensor, as_list(shapes), as_list(offsets)])

    def get_comm_ctx(self, window: Var, hint: str = "ctx") -> Var:
        out = self._fb.op(Op.GET_COMM_CTX, [window], hint=hint)
        assert out is not None
        return out

    def rank(self, ctx: Var, hint: str = "me") -> Var:
        out = self._fb.op(Op.RANK, [ctx], hint=hint)
        assert out is not None
        return out

    def nranks(self, ctx: Var, hint: str = "nr") -> Var:
        out = self._fb.op(Op.NRANKS, [ctx], hint=hint)
        assert out is not None
        return out


class Pld:
    """The ``pld`` vocabulary bound to one FunctionBuilder."""

    def __init__(self, fb: FunctionBuilder) -> None:
        self.tensor = TensorNS(fb)
        self.tile = TileNS(fb)
        self.system = SystemNS(fb)


__all__ = ["NR", "ExprOps", "FunctionBuilder", "Pld", "ProgramBuilder", "as_list"]
