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

from pldemu.ir import nodes as ir
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import Layout
from pldemu.ir.nodes import NR, ExprOps
from pldemu.ir.nodes import Assign as AssignStmt
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call

ListLike = ir.ListExpr | Sequence[ir.ExprLike]


def as_list(items: ListLike) -> ir.ListExpr:
    """Wrap a Python sequence of expressions/ints as a ListExpr."""
    if isinstance(items, ir.ListExpr):
        return items
    return ir.ListExpr(tuple(ir.as_expr(i) for i in items))


_IR_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(_IR_DIR.rstrip(os.sep)) + os.sep
_EXAMPLES_DIR = _PACKAGE_DIR + "examples" + os.sep


def _caller_origin() -> ir.SourcePos | None:
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
    return ir.SourcePos(file, frame.f_lineno)


def _dtype(d: DType | str) -> DType:
    return d if isinstance(d, DType) else DType.parse(d)


class FunctionBuilder:
    """Accumulates the statements of one function; nested blocks via context managers."""

    def __init__(self, name: str = "main", params: Sequence[ir.Var] = (), used_names: Iterable[str] = ()) -> None:
        self.name = name
        self.params = tuple(params)
        self._blocks: list[list[ir.Stmt]] = [[]]
        self._names: set[str] = set(used_names) | {p.name for p in params}
        self._counters: dict[str, int] = {}
        self._temp_counter = 0
        self.pld = Pld(self)
        self.origin: ir.SourcePos | None = None
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

    def emit(self, stmt: ir.Stmt) -> None:
        """Append ``stmt`` to the current block. An assignment or call statement without an origin gets
        :attr:`origin` (set by the lowering while it expands a composite), else the line of the user's
        Python file that built it (the first caller outside ``pldemu``), so reports can point there."""
        if isinstance(stmt, (AssignStmt, ir.Eval)) and stmt.origin is None:
            origin = self.origin if self.origin is not None else _caller_origin()
            if origin is not None:
                stmt = dataclasses.replace(stmt, origin=origin)
        self._blocks[-1].append(stmt)

    def assigned_last(self, var: ir.Var) -> bool:
        """Whether the statement just emitted is ``var = value``."""
        block = self._blocks[-1]
        return bool(block) and isinstance(block[-1], AssignStmt) and block[-1].var == var

    def retarget_last(self, fresh: ir.Var, existing: ir.Var) -> bool:
        """Make the statement just emitted, ``fresh = value``, assign ``existing`` instead (a front end
        re-binding a name, as in ``acc = add(acc, x)`` inside a loop); False when it is not that."""
        block = self._blocks[-1]
        last = block[-1] if block else None
        if not isinstance(last, AssignStmt) or last.var != fresh or fresh.type != existing.type:
            return False
        block[-1] = dataclasses.replace(last, var=existing)
        return True

    def let(self, hint: str, value: ir.ExprLike) -> ir.Var:
        """Bind ``value`` to a fresh variable and return it."""
        e = ir.as_expr(value)
        var = ir.Var(self.fresh(hint), e.type)
        self.emit(AssignStmt(var, e))
        return var

    def assign(self, var: ir.Var, value: ir.ExprLike) -> None:
        """Re-assign an existing variable (loop-carried state in while loops)."""
        e = ir.as_expr(value)
        if e.type != var.type:
            raise TypeError(f"cannot assign a {e.type} to {var.name} of type {var.type}")
        self.emit(AssignStmt(var, e))

    def assign_to(self, var: ir.Var, value: ir.Expr) -> ir.Var:
        """Bind ``value`` to the given variable (its type is taken from the value)."""
        target = ir.Var(var.name, value.type)
        self._names.add(var.name)
        self.emit(AssignStmt(target, value))
        return target

    def op(self, op: Op, args: Sequence[ir.Arg | ir.ExprLike | ListLike], attrs: dict[str, ir.AttrValue] | None = None,
           hint: str = "t") -> ir.Var | None:
        """Emit ``op(args)``: bound to a fresh variable, or as an Eval when it returns nothing."""
        call = self.call(op, args, attrs)
        if call.type == ir.NONE:
            self.emit(ir.Eval(call))
            return None
        return self.let(hint, call)

    def call(self, op: Op, args: Sequence[ir.Arg | ir.ExprLike | ListLike],
             attrs: dict[str, ir.AttrValue] | None = None) -> ir.Call:
        """Build (but do not emit) a checked call."""
        conv: list[ir.Arg] = []
        for a in args:
            if isinstance(a, (list, tuple)):
                conv.append(as_list(a))
            elif isinstance(a, ir.ListExpr):
                conv.append(a)
            else:
                assert not isinstance(a, Sequence)
                conv.append(ir.as_expr(a))
        return make_call(op, conv, attrs)

    def ret(self, *values: ir.ExprLike) -> None:
        self.emit(ir.Return(tuple(ir.as_expr(v) for v in values)))

    # -- structured control flow --------------------------------------------------------------

    @contextmanager
    def block(self) -> Iterator[list[ir.Stmt]]:
        """Collect the statements emitted inside the ``with`` into a fresh list."""
        self._blocks.append([])
        try:
            yield self._blocks[-1]
        finally:
            self._blocks.pop()

    @contextmanager
    def for_range(self, start: ir.ExprLike, stop: ir.ExprLike | None = None, step: ir.ExprLike = 1,
                  hint: str = "i", kind: ir.LoopKind = ir.LoopKind.RANGE) -> Iterator[ir.Var]:
        """``for var in range(start, stop, step)`` (``for_range(n)`` counts from 0); ``kind``: a
        ``parallel`` or ``pipeline`` loop."""
        if stop is None:
            start, stop = 0, start
        var = ir.Var(self.fresh(hint), ir.INDEX)
        with self.block() as body:
            yield var
        self.emit(ir.For(var, ir.as_expr(start), ir.as_expr(stop), ir.as_expr(step), ir.Seq(tuple(body)), kind))

    @contextmanager
    def enclosing(self) -> Iterator[None]:
        """Emit into the block around the innermost open one: before the structured statement (a task, a
        loop) that block becomes."""
        inner = self._blocks.pop()
        try:
            yield
        finally:
            self._blocks.append(inner)

    @contextmanager
    def task(self, kind: ir.TaskKind, tid_hint: str | None = "tid", **fields: object) -> Iterator[ir.Task]:
        """A task whose body is what the ``with`` emits; yields a placeholder whose ``tid`` is the task id
        variable (None when ``tid_hint`` is None). ``fields``: the other ``ir.Task`` fields."""
        tid = ir.Var(self.fresh(tid_hint), ir.TASK_ID) if tid_hint is not None else None
        head = ir.Task(kind, ir.Seq(), tid, **fields)  # type: ignore[arg-type]
        origin = head.origin or self.origin  # now: the body's statements move self.origin to their own lines
        with self.block() as body:
            yield head
        self.emit(dataclasses.replace(head, body=ir.Seq(tuple(body)), origin=origin))

    @contextmanager
    def task_scope(self, manual: bool) -> Iterator[None]:
        """``pl.scope()`` / ``pl.manual_scope()`` around what the ``with`` emits."""
        with self.block() as body:
            yield
        self.emit(ir.TaskScope(manual, ir.Seq(tuple(body))))

    @contextmanager
    def while_(self, cond: ir.ExprLike) -> Iterator[None]:
        with self.block() as body:
            yield
        self.emit(ir.While(ir.as_expr(cond), ir.Seq(tuple(body))))

    @contextmanager
    def if_(self, cond: ir.ExprLike) -> Iterator[None]:
        with self.block() as body:
            yield
        self.emit(ir.If(ir.as_expr(cond), ir.Seq(tuple(body)), None))

    @contextmanager
    def else_(self) -> Iterator[None]:
        """The else branch of the If emitted just before."""
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], ir.If) or block[-1].orelse is not None:
            raise ValueError("else_() must directly follow an if_() block without an else")
        last = block.pop()
        assert isinstance(last, ir.If)
        with self.block() as body:
            yield
        self.emit(ir.If(last.cond, last.then, ir.Seq(tuple(body))))

    # -- results --------------------------------------------------------------------------------

    def body(self) -> ir.Seq:
        if len(self._blocks) != 1:
            raise ValueError("unclosed block in function builder")
        return ir.Seq(tuple(self._blocks[0]))

    def build(self) -> ir.Function:
        return ir.Function(self.name, self.params, self.body())


class ProgramBuilder:
    """Declares a program's buffers and functions."""

    def __init__(self, name: str, nranks: int | None = None) -> None:
        self.name = name
        self.nranks = nranks
        self._buffers: list[ir.BufferDecl] = []
        self._functions: list[FunctionBuilder] = []

    def _declare(self, name: str, kind: ir.BufferKind, t: ir.TensorType) -> ir.Var:
        if name == ir.NR.name or any(b.var.name == name for b in self._buffers):
            raise ValueError(f"buffer name {name!r} is reserved or declared twice")
        var = ir.Var(name, t)
        self._buffers.append(ir.BufferDecl(var, kind))
        return var

    def window(self, name: str, dtype: DType | str, shape: Sequence[ir.ExprLike],
               valid_shape: Sequence[ir.ExprLike] | None = None, *, layout: Layout = Layout.ND,
               strides: Sequence[int] | None = None) -> ir.Var:
        """A data window (DistributedTensor): peers can put/get/remote_load it."""
        t = ir.TensorType(_dtype(dtype), tuple(ir.as_expr(d) for d in shape),
                       None if valid_shape is None else tuple(ir.as_expr(d) for d in valid_shape),
                       True, layout, None if strides is None else tuple(strides))
        return self._declare(name, ir.BufferKind.WINDOW, t)

    def signal(self, name: str, shape: Sequence[ir.ExprLike]) -> ir.Var:
        """An INT32 signal window, zero at allocation."""
        t = ir.TensorType(DType.INT32, tuple(ir.as_expr(d) for d in shape), None, True)
        return self._declare(name, ir.BufferKind.SIGNAL, t)

    def local(self, name: str, dtype: DType | str, shape: Sequence[ir.ExprLike]) -> ir.Var:
        """A rank-local tensor (not reachable by peers)."""
        t = ir.TensorType(_dtype(dtype), tuple(ir.as_expr(d) for d in shape), None, False)
        return self._declare(name, ir.BufferKind.LOCAL, t)

    def function(self, name: str = "main") -> FunctionBuilder:
        fb = FunctionBuilder(name, used_names=[b.var.name for b in self._buffers] + [ir.NR.name])
        self._functions.append(fb)
        return fb

    def build(self, entry: str = "main") -> ir.Program:
        return ir.Program(self.name, tuple(self._buffers), tuple(f.build() for f in self._functions), entry,
                       self.nranks)


def _hint(v: ir.ExprLike, suffix: str) -> str:
    return f"{v.name}_{suffix}" if isinstance(v, ir.Var) else suffix


class _Namespace:
    def __init__(self, fb: FunctionBuilder) -> None:
        self._fb = fb


class TensorNS(_Namespace):
    """``pld.tensor.*``: the collectives and global-tensor helpers."""

    def allreduce(self, target: ir.Var, signal: ir.Var, *, op: str | ir.AttrValue = "Sum",
                  mode: str | ir.AttrValue = "mesh", lanes: int = 1) -> ir.Var:
        return self._result(Op.ALLREDUCE, [target, signal], {"op": op, "mode": mode, "lanes": lanes}, target)

    def allgather(self, local_data: ir.Var, target: ir.Var, signal: ir.Var) -> ir.Var:
        return self._result(Op.ALLGATHER, [local_data, target, signal], {}, target)

    def reduce_scatter(self, target: ir.Var, signal: ir.Var, *, op: str | ir.AttrValue = "Sum") -> ir.Var:
        return self._result(Op.REDUCE_SCATTER, [target, signal], {"op": op}, target)

    def broadcast(self, target: ir.Var, signal: ir.Var, *, root: int) -> ir.Var:
        return self._result(Op.BROADCAST, [target, signal], {"root": root}, target)

    def barrier(self, signal: ir.Var) -> ir.Var:
        return self._result(Op.BARRIER, [signal], {}, signal)

    def all_to_all(self, input: ir.Var, target: ir.Var, signal: ir.Var) -> ir.Var:
        return self._result(Op.ALL_TO_ALL, [input, target, signal], {}, target)

    def all_to_all_v(self, input: ir.Var, target: ir.Var, signal: ir.Var, send_counts: ir.Var, recv_counts: ir.Var) -> ir.Var:
        return self._result(Op.ALL_TO_ALL_V, [input, target, signal, send_counts, recv_counts], {}, target)

    def create(self, shape: ListLike, dtype: DType | str, hint: str = "created") -> ir.Var:
        """A rank-local tensor allocated when the statement runs, at ``shape`` evaluated then (run-time
        extents allowed); a fresh buffer each time it runs, undefined (poisoned) until written."""
        out = self._fb.op(Op.TENSOR_CREATE, [as_list(shape)], {"dtype": _dtype(dtype), "name": hint}, hint=hint)
        assert out is not None
        return out

    def view(self, tensor: ir.Var, shape: ListLike, valid_shape: ListLike | None = None) -> ir.Var:
        args: list[ir.Arg | ListLike] = [tensor, as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._result(Op.TENSOR_VIEW, args, {}, tensor, "view")

    def read(self, tensor: ir.Var, indices: ListLike) -> ir.Var:
        return self._result(Op.TENSOR_READ, [tensor, as_list(indices)], {}, tensor, "val")

    def write(self, tensor: ir.Var, indices: ListLike, value: ir.ExprLike) -> None:
        self._fb.op(Op.TENSOR_WRITE, [tensor, as_list(indices), ir.as_expr(value)])

    def _result(self, op: Op, args: Sequence[ir.Arg | ListLike], attrs: dict[str, ir.AttrValue], base: ir.ExprLike,
                suffix: str = "out") -> ir.Var:
        out = self._fb.op(op, args, attrs, hint=_hint(base, suffix))
        assert out is not None
        return out


class TileNS(_Namespace):
    """``pld.tile.*`` distributed data movement plus the local ``tile.*`` ops."""

    def put(self, dst: ir.Var, peer: ir.ExprLike, src: ir.Var, stage: ir.Var, dst_offsets: ListLike | None = None,
            src_offsets: ListLike | None = None, shape: ListLike | None = None, *,
            atomic: str | ir.AttrValue = "None") -> None:
        self._fb.op(Op.PUT, [dst, ir.as_expr(peer), src, stage, *_region(dst_offsets, src_offsets, shape)],
                    {"atomic": atomic})

    def get(self, dst: ir.Var, peer: ir.ExprLike, src: ir.Var, stage: ir.Var, dst_offsets: ListLike | None = None,
            src_offsets: ListLike | None = None, shape: ListLike | None = None) -> None:
        self._fb.op(Op.GET, [dst, ir.as_expr(peer), src, stage, *_region(dst_offsets, src_offsets, shape)])

    def remote_load(self, window: ir.Var, peer: ir.ExprLike, offsets: ListLike, shape: Sequence[int],
                    valid_shape: ListLike | None = None, hint: str = "rtile") -> ir.Var:
        args: list[ir.Arg | ListLike] = [window, ir.as_expr(peer), as_list(offsets), as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.REMOTE_LOAD, args, {}, hint)

    def create(self, shape: Sequence[int], dtype: DType | str, mem: str | ir.AttrValue = "Vec",
               hint: str = "stage") -> ir.Var:
        return self._var(Op.TILE_CREATE, [as_list(shape)], {"dtype": _dtype(dtype), "mem": mem}, hint)

    def full(self, shape: Sequence[int], value: ir.ExprLike, dtype: DType | str, hint: str = "fill",
             valid_shape: ListLike | None = None) -> ir.Var:
        args: list[ir.Arg | ListLike] = [as_list(shape), ir.as_expr(value)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.TILE_FULL, args, {"dtype": _dtype(dtype)}, hint)

    def load(self, tensor: ir.Var, offsets: ListLike, shape: Sequence[int], valid_shape: ListLike | None = None,
             hint: str = "ltile") -> ir.Var:
        args: list[ir.Arg | ListLike] = [tensor, as_list(offsets), as_list(shape)]
        if valid_shape is not None:
            args.append(as_list(valid_shape))
        return self._var(Op.TILE_LOAD, args, {}, hint)

    def store(self, tile: ir.Var, offsets: ListLike, tensor: ir.Var, *, atomic: str | ir.AttrValue = "None") -> None:
        self._fb.op(Op.TILE_STORE, [tile, as_list(offsets), tensor], {"atomic": atomic})

    def set_validshape(self, tile: ir.Var, valid_shape: ListLike, hint: str | None = None) -> ir.Var:
        return self._var(Op.TILE_SET_VALIDSHAPE, [tile, as_list(valid_shape)], {}, hint or tile.name)

    def fillpad(self, tile: ir.Var, pad: str | ir.AttrValue = "zero", hint: str | None = None) -> ir.Var:
        return self._var(Op.TILE_FILLPAD, [tile], {"pad": pad}, hint or tile.name)

    def binary(self, op: Op, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self._var(op, [lhs, rhs], {}, hint)

    def add(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_ADD, lhs, rhs, hint)

    def sub(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_SUB, lhs, rhs, hint)

    def mul(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_MUL, lhs, rhs, hint)

    def maximum(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_MAXIMUM, lhs, rhs, hint)

    def minimum(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_MINIMUM, lhs, rhs, hint)

    def adds(self, tile: ir.Var, scalar: ir.ExprLike, hint: str = "acc") -> ir.Var:
        return self._var(Op.TILE_ADDS, [tile, ir.as_expr(scalar)], {}, hint)

    def muls(self, tile: ir.Var, scalar: ir.ExprLike, hint: str = "acc") -> ir.Var:
        return self._var(Op.TILE_MULS, [tile, ir.as_expr(scalar)], {}, hint)

    def cast(self, tile: ir.Var, dtype: DType | str, hint: str = "cast", mode: str | ir.AttrValue = "None") -> ir.Var:
        return self._var(Op.TILE_CAST, [tile], {"dtype": _dtype(dtype), "mode": mode}, hint)

    def sin(self, tile: ir.Var, hint: str = "sin") -> ir.Var:
        return self._var(Op.TILE_SIN, [tile], {}, hint)

    def cos(self, tile: ir.Var, hint: str = "cos") -> ir.Var:
        return self._var(Op.TILE_COS, [tile], {}, hint)

    def unary(self, op: Op, tile: ir.Var, tmp: ir.Var | None = None, hint: str = "u") -> ir.Var:
        """A unary math op (tile.exp, log, sqrt, rsqrt, recip, neg, abs); ``tmp``: rsqrt's scratch."""
        return self._var(op, [tile] if tmp is None else [tile, tmp], {}, hint)

    def reduce(self, op: Op, tile: ir.Var, tmp: ir.Var | None = None, hint: str = "red") -> ir.Var:
        """A row / column reduction (tile.row_sum ... tile.col_min); ``tmp``: the scratch (binary-tree sums)."""
        return self._var(op, [tile] if tmp is None else [tile, tmp], {}, hint)

    def expand(self, op: Op, tile: ir.Var, vec: ir.Var, hint: str = "exp") -> ir.Var:
        """A row / column expand (tile.row_expand, tile.row_expand_add, ..., tile.col_expand_expdif)."""
        return self._var(op, [tile, vec], {}, hint)

    def div(self, lhs: ir.Var, rhs: ir.Var, hint: str = "acc") -> ir.Var:
        return self.binary(Op.TILE_DIV, lhs, rhs, hint)

    def divs(self, tile: ir.Var, scalar: ir.ExprLike, hint: str = "acc") -> ir.Var:
        return self._var(Op.TILE_DIVS, [tile, ir.as_expr(scalar)], {}, hint)

    def maximums(self, tile: ir.Var, scalar: ir.ExprLike, hint: str = "acc") -> ir.Var:
        return self._var(Op.TILE_MAXIMUMS, [tile, ir.as_expr(scalar)], {}, hint)

    def minimums(self, tile: ir.Var, scalar: ir.ExprLike, hint: str = "acc") -> ir.Var:
        return self._var(Op.TILE_MINIMUMS, [tile, ir.as_expr(scalar)], {}, hint)

    def reshape(self, tile: ir.Var, shape: Sequence[int], hint: str | None = None) -> ir.Var:
        """tile.reshape: the same elements in another shape (zero copy)."""
        return self._var(Op.TILE_RESHAPE, [tile, as_list(shape)], {}, hint or tile.name)

    def tile_slice(self, tile: ir.Var, shape: Sequence[int], offset: Sequence[ir.ExprLike],
                   hint: str | None = None) -> ir.Var:
        """tile.slice: a copy of a static window of the tile at ``offset``."""
        return self._var(Op.TILE_SLICE, [tile, as_list(shape), as_list(offset)], {}, hint or tile.name)

    def read(self, tile: ir.Var, indices: ListLike, hint: str = "val") -> ir.Var:
        """tile.read: one element of the tile as a scalar."""
        return self._var(Op.TILE_READ, [tile, as_list(indices)], {}, hint)

    def scalar_cast(self, value: ir.ExprLike, dtype: DType, hint: str = "cast") -> ir.Var:
        """scalar.cast: a numeric scalar as another numeric dtype (an integer wraps as the scalar register holds
        it; a float to an integer truncates and saturates; a float rounds to nearest even)."""
        return self._var(Op.SCALAR_CAST, [ir.as_expr(value)], {"dtype": dtype}, hint)

    def write(self, tile: ir.Var, indices: ListLike, value: ir.ExprLike) -> None:
        """tile.write: one element of the tile set in place."""
        self._fb.op(Op.TILE_WRITE, [tile, as_list(indices), ir.as_expr(value)])

    def assemble(self, target: ir.Var, source: ir.Var, offset: ListLike) -> None:
        """tile.assemble: the source's valid box written into the target tile at ``offset`` in place."""
        self._fb.op(Op.TILE_ASSEMBLE, [target, source, as_list(offset)])

    def concat(self, src0: ir.Var, src1: ir.Var, hint: str = "cat") -> ir.Var:
        """tile.concat: two 2-D tiles side by side (column-wise)."""
        return self._var(Op.TILE_CONCAT, [src0, src1], {}, hint)

    def transpose(self, tile: ir.Var, axis1: int, axis2: int, hint: str | None = None) -> ir.Var:
        """tile.transpose: a copy with two axes swapped."""
        return self._var(Op.TILE_TRANSPOSE, [tile, ir.as_expr(axis1), ir.as_expr(axis2)], {}, hint or tile.name)

    def move(self, tile: ir.Var, target_memory: str | ir.AttrValue, hint: str | None = None) -> ir.Var:
        """tile.move: the tile in another on-chip memory space (pypto's ``pl.move``)."""
        return self._var(Op.TILE_MOVE, [tile], {"target_memory": target_memory}, hint or tile.name)

    def matmul(self, lhs: ir.Var, rhs: ir.Var, hint: str = "mm") -> ir.Var:
        """tile.matmul (rank-2 operands) or tile.batch_matmul (an operand of rank >= 3): Left x Right -> Acc."""
        rank = max(len(t.shape) for t in (lhs.type, rhs.type) if isinstance(t, ir.TileType))
        return self._var(Op.TILE_MATMUL if rank == 2 else Op.TILE_BATCH_MATMUL, [lhs, rhs], {}, hint)

    def matmul_acc(self, acc: ir.Var, lhs: ir.Var, rhs: ir.Var, init_cond: ir.ExprLike | None = None,
                   hint: str = "acc") -> ir.Var:
        """tile.matmul_acc: ``acc + lhs @ rhs`` (``init_cond`` true: ``lhs @ rhs``); tile.batch_matmul_acc when an
        operand has rank >= 3 (no ``init_cond`` there, as in pypto)."""
        args: list[ir.Arg] = [acc, lhs, rhs]
        if init_cond is not None:
            args.append(ir.as_expr(init_cond))
        rank = max(len(t.shape) for t in (acc.type, lhs.type, rhs.type) if isinstance(t, ir.TileType))
        return self._var(Op.TILE_MATMUL_ACC if rank == 2 else Op.TILE_BATCH_MATMUL_ACC, args, {}, hint)

    def cmp(self, lhs: ir.Var, rhs: ir.Var, cmp_type: str | ir.AttrValue, hint: str = "mask") -> ir.Var:
        return self._var(Op.TILE_CMP, [lhs, rhs], {"cmp_type": cmp_type}, hint)

    def cmps(self, lhs: ir.Var, rhs: ir.ExprLike, cmp_type: str | ir.AttrValue, hint: str = "mask") -> ir.Var:
        return self._var(Op.TILE_CMPS, [lhs, ir.as_expr(rhs)], {"cmp_type": cmp_type}, hint)

    def select(self, cond: ir.Var, on_true: ir.ExprLike, on_false: ir.ExprLike, hint: str = "sel") -> ir.Var:
        return self._var(Op.TILE_SELECT, [cond, ir.as_expr(on_true), ir.as_expr(on_false)], {}, hint)

    def sel(self, mask: ir.Var, lhs: ir.Var, rhs: ir.Var, tmp: ir.Var, hint: str = "sel") -> ir.Var:
        return self._var(Op.TILE_SEL, [mask, lhs, rhs, tmp], {}, hint)

    def sels(self, mask: ir.Var, src: ir.Var, tmp: ir.Var, scalar: ir.ExprLike, hint: str = "sel") -> ir.Var:
        return self._var(Op.TILE_SELS, [mask, src, tmp, ir.as_expr(scalar)], {}, hint)

    def _var(self, op: Op, args: Sequence[ir.Arg | ListLike], attrs: dict[str, ir.AttrValue], hint: str) -> ir.Var:
        out = self._fb.op(op, args, attrs, hint=hint)
        assert out is not None
        return out


def _region(dst_offsets: ListLike | None, src_offsets: ListLike | None,
            shape: ListLike | None) -> list[ir.ListExpr]:
    given = [x is not None for x in (dst_offsets, src_offsets, shape)]
    if not any(given):
        return []
    if not all(given):
        raise ValueError("dst_offsets, src_offsets and shape come together or not at all")
    assert dst_offsets is not None and src_offsets is not None and shape is not None
    return [as_list(dst_offsets), as_list(src_offsets), as_list(shape)]


class SystemNS(_Namespace):
    """``pld.system.*``: signals and rank queries, and the ``system.*`` memory-ordering markers."""

    def notify(self, signal: ir.Var, peer: ir.ExprLike, offsets: ListLike, value: ir.ExprLike, *,
               op: str | ir.AttrValue = "AtomicAdd") -> None:
        self._fb.op(Op.NOTIFY, [signal, ir.as_expr(peer), as_list(offsets), ir.as_expr(value)], {"op": op})

    def wait(self, signal: ir.Var, offsets: ListLike, expected: ir.ExprLike, *, cmp: str | ir.AttrValue = "Ge") -> None:
        self._fb.op(Op.WAIT, [signal, as_list(offsets), ir.as_expr(expected)], {"cmp": cmp})

    def defer_wait(self, signal: ir.Var, offsets: ListLike, expected: ir.ExprLike) -> None:
        """``pld.system.defer_wait``: the enclosing task completes once ``signal[offsets] >= expected``."""
        self._fb.op(Op.DEFER_WAIT, [signal, as_list(offsets), ir.as_expr(expected)], {"cmp": "Ge"})

    def fence(self) -> None:
        """``system.fence()``: every earlier write of this rank completes, to every target."""
        self._fb.op(Op.FENCE, [])

    def bar_all(self) -> None:
        """``system.bar_all()``: the pipe drain; every earlier DMA read of this rank has its bytes."""
        self._fb.op(Op.BAR_ALL, [])

    def dispatch_end(self) -> None:
        """``system.dispatch_end()``: the tasks of the HOST dispatch before it complete here."""
        self._fb.op(Op.DISPATCH_END, [])

    def aiv_lane(self, lane: int, sync: bool = False) -> None:
        """``system.aiv_lane {lane, sync}``: the AIV lane the code after it runs on (-1: the region ended), or the
        cross-lane barrier that lane passes (``sync``)."""
        self._fb.op(Op.AIV_LANE, [], {"lane": lane, "sync": int(sync)})

    def host_task(self, task: int) -> None:
        """``system.host_task(task=N)``: host task N (a SubWorker) runs here, in the calling process."""
        self._fb.op(Op.HOST_TASK, [], {"task": task})

    def cacheinvalid(self, tensor: ir.Var | None = None, shapes: ListLike | None = None,
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

    def get_comm_ctx(self, window: ir.Var, hint: str = "ctx") -> ir.Var:
        out = self._fb.op(Op.GET_COMM_CTX, [window], hint=hint)
        assert out is not None
        return out

    def rank(self, ctx: ir.Var, hint: str = "me") -> ir.Var:
        out = self._fb.op(Op.RANK, [ctx], hint=hint)
        assert out is not None
        return out

    def nranks(self, ctx: ir.Var, hint: str = "nr") -> ir.Var:
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
