"""IR nodes: types, expressions, statements, functions and programs. All frozen dataclasses.

A program is plain data: it declares the buffers (data windows, signal windows, rank-local tensors)
and the function that every rank runs. Rank and rank count are runtime queries inside that function
(`pld.system.rank` / `pld.system.nranks`); buffer shapes may mention the symbol ``NR`` (the rank
count), which is bound when the program is instantiated on a communicator.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.ir.enums import Layout, MemorySpace, TileLayout, enum_text
from pldemu.ir.ops import Op

# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarType:
    dtype: DType


@dataclass(frozen=True)
class TensorType:
    """A global-memory tensor. ``window=True`` makes it a DistributedTensor (peers can access it)."""

    dtype: DType
    shape: tuple[Expr, ...]
    valid_shape: tuple[Expr, ...] | None = None
    window: bool = False
    layout: Layout = Layout.ND
    strides: tuple[int, ...] | None = None  # None: packed row-major


@dataclass(frozen=True)
class TileType:
    """An on-chip tile: a static physical shape and an optional (possibly dynamic) valid shape."""

    dtype: DType
    shape: tuple[int, ...]
    valid_shape: tuple[Expr, ...] | None = None
    memory: MemorySpace = MemorySpace.Vec
    layout: TileLayout = TileLayout.ND
    """Byte arrangement; a non-ND tile's data holds its bytes in memory order (see tile.tmov_x2zz)."""


@dataclass(frozen=True)
class TupleType:
    """The type of a multi-result op (tile.tquant_mx, tile.tquant_mx_raw) and of tuple.make."""

    elements: tuple[Type, ...]


@dataclass(frozen=True)
class CommCtxType:
    """The communication context of a window (its communicator)."""


@dataclass(frozen=True)
class NoneType:
    """Type of calls evaluated for effect only."""


Type = ScalarType | TensorType | TileType | TupleType | CommCtxType | NoneType

INDEX = ScalarType(DType.INDEX)
INT32 = ScalarType(DType.INT32)
BOOL = ScalarType(DType.BOOL)
FP32 = ScalarType(DType.FP32)
NONE = NoneType()
COMM_CTX = CommCtxType()

# ----------------------------------------------------------------------------------------------
# Expressions
# ----------------------------------------------------------------------------------------------


class BinOpKind(enum.Enum):
    """Scalar binary operators; the value is the text-form spelling."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    FLOORDIV = "//"
    MOD = "%"
    DIV = "/"
    """True division of floats (pypto's ``FloatDiv``: ``arith.divf`` on the device), IEEE: ``x / 0`` is inf."""
    TDIV = "tdiv"
    """C's signed division, truncating toward zero (``tdiv(-1, 4)`` is 0; ``-1 // 4`` is -1)."""
    TREM = "trem"
    """C's ``%``: the remainder of :attr:`TDIV`, with the dividend's sign (``trem(-1, 4)`` is -1; ``-1 % 4`` is 3)."""
    MIN = "min"
    MAX = "max"
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    AND = "and"
    OR = "or"

    @property
    def is_compare(self) -> bool:
        return self in _COMPARE

    @property
    def is_logic(self) -> bool:
        return self in (BinOpKind.AND, BinOpKind.OR)

    @property
    def is_function(self) -> bool:
        """Printed as ``min(a, b)`` / ``trem(a, b)`` rather than infix."""
        return self in (BinOpKind.MIN, BinOpKind.MAX, BinOpKind.TDIV, BinOpKind.TREM)

    @property
    def is_truncating(self) -> bool:
        """C's truncating division or remainder (:attr:`TDIV`, :attr:`TREM`): where an operand is negative its
        value may differ from the floor operators' (:attr:`FLOORDIV`, :attr:`MOD`)."""
        return self in (BinOpKind.TDIV, BinOpKind.TREM)


_COMPARE = frozenset({BinOpKind.EQ, BinOpKind.NE, BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE})


class ExprOps:
    """Python operators that build IR expressions (``a + b``, ``a // 2``); comparisons are methods."""

    def __add__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.ADD, self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.ADD, other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.SUB, self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.SUB, other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.MUL, self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.MUL, other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.FLOORDIV, self, other)

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.FLOORDIV, other, self)

    def __mod__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.MOD, self, other)

    def __rmod__(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.MOD, other, self)

    def eq(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.EQ, self, other)

    def ne(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.NE, self, other)

    def lt(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.LT, self, other)

    def le(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.LE, self, other)

    def gt(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.GT, self, other)

    def ge(self, other: ExprLike) -> Expr:
        return _arith(BinOpKind.GE, self, other)


@dataclass(frozen=True)
class Var(ExprOps):
    """A named value. Names are unique per function; a name may be re-assigned with the same type."""

    name: str
    type: Type

    def __repr__(self) -> str:
        return f"Var({self.name})"


@dataclass(frozen=True)
class Const(ExprOps):
    """A literal scalar. Integer literals are INDEX unless typed otherwise."""

    value: int | float | bool
    dtype: DType = DType.INDEX

    @property
    def type(self) -> ScalarType:
        return ScalarType(self.dtype)


@dataclass(frozen=True)
class BinOp(ExprOps):
    op: BinOpKind
    lhs: Expr
    rhs: Expr

    @property
    def type(self) -> ScalarType:
        if self.op.is_compare or self.op.is_logic:
            return BOOL
        return ScalarType(join_scalar(self.lhs.type, self.rhs.type))


@dataclass(frozen=True)
class ListExpr:
    """A bracketed list of scalar expressions: offsets, shapes, cells."""

    items: tuple[Expr, ...]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


AttrValue = int | float | bool | str | DType | enum.IntEnum


@dataclass(frozen=True)
class Call(ExprOps):
    """An op application. ``type`` is the deduced result type (see pldemu.ir.signatures)."""

    op: Op
    args: tuple[Arg, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    type: Type = field(default=NONE)

    def attr(self, name: str) -> AttrValue:
        for key, value in self.attrs:
            if key == name:
                return value
        raise KeyError(f"{self.op.text} has no attribute {name!r}")


Expr = Var | Const | BinOp | Call
Arg = Expr | ListExpr
ExprLike = Expr | ExprOps | int | float | bool


def as_expr(value: ExprLike) -> Expr:
    """Wrap Python literals as Const; pass expressions through."""
    if isinstance(value, bool):
        return Const(value, DType.BOOL)
    if isinstance(value, int):
        return Const(value, DType.INDEX)
    if isinstance(value, float):
        return Const(value, DType.FP32)
    if isinstance(value, (Var, Const, BinOp, Call)):
        return value
    raise TypeError(f"cannot use {value!r} as an IR expression")


def join_scalar(a: Type, b: Type) -> DType:
    """The dtype of a scalar binary op, pypto's PromoteSameCategoryDtype: the wider of the two, the left one when
    they are as wide (``UINT32 + INT32`` is UINT32, ``INT32 + UINT32`` INT32, ``INT8 + INT16`` INT16). INDEX with
    INT64 is INDEX (one C++ ``int64_t``: pypto casts neither to the other). A BOOL joins the other operand as
    it, a float an integer as the float: pairs the pypto front end refuses, kept for pldemu's own IR."""
    da = a.dtype if isinstance(a, ScalarType) else DType.INDEX
    db = b.dtype if isinstance(b, ScalarType) else DType.INDEX
    if DType.INDEX in (da, db) and {da, db} <= {DType.INDEX, DType.INT64}:
        return DType.INDEX
    if DType.BOOL in (da, db) or da.is_float != db.is_float:
        return db if da is DType.BOOL or db.is_float else da
    return db if db.itemsize > da.itemsize else da


def _floordiv(a: int, b: int) -> int:
    return a // b


def trunc_div(a: Any, b: Any) -> Any:
    """C's ``a / b`` on signed integers: the quotient truncated toward zero (``trunc_div(-1, 4) == 0``).
    Exact for any Python int; a zero divisor raises ``ZeroDivisionError`` as ``//`` does."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def trunc_rem(a: Any, b: Any) -> Any:
    """C's ``a % b`` (``arith.remsi``, ``fmod`` for floats): ``a - b * trunc_div(a, b)``, with the sign of
    the dividend (``trunc_rem(-1, 4) == -1``, where Python's ``-1 % 4`` is 3)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def true_div(a: Any, b: Any) -> float:
    """IEEE ``a / b`` in doubles (``arith.divf``): a zero divisor gives a signed inf, or nan for ``0 / 0``."""
    try:
        return float(a) / float(b)
    except ZeroDivisionError:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


_FOLD: dict[BinOpKind, Callable[[Any, Any], int | float | bool]] = {
    BinOpKind.ADD: lambda a, b: a + b,
    BinOpKind.SUB: lambda a, b: a - b,
    BinOpKind.MUL: lambda a, b: a * b,
    BinOpKind.FLOORDIV: _floordiv,
    BinOpKind.MOD: lambda a, b: a % b,
    BinOpKind.DIV: true_div,
    BinOpKind.TDIV: trunc_div,
    BinOpKind.TREM: trunc_rem,
    BinOpKind.MIN: min,
    BinOpKind.MAX: max,
    BinOpKind.EQ: lambda a, b: a == b,
    BinOpKind.NE: lambda a, b: a != b,
    BinOpKind.LT: lambda a, b: a < b,
    BinOpKind.LE: lambda a, b: a <= b,
    BinOpKind.GT: lambda a, b: a > b,
    BinOpKind.GE: lambda a, b: a >= b,
    BinOpKind.AND: lambda a, b: bool(a) and bool(b),
    BinOpKind.OR: lambda a, b: bool(a) or bool(b),
}


def fold_binop(op: BinOpKind, a: int | float | bool, b: int | float | bool) -> int | float | bool:
    """Evaluate a binary operator on Python values (shared by folding and the interpreter)."""
    result: int | float | bool = _FOLD[op](a, b)
    return result


def _arith(op: BinOpKind, lhs: ExprLike, rhs: ExprLike) -> Expr:
    """Build ``lhs op rhs`` with constant folding and the identities that keep printed IR short."""
    a, b = as_expr(lhs), as_expr(rhs)
    if isinstance(a, Const) and isinstance(b, Const):
        node = BinOp(op, a, b)
        try:
            value = evaluate(node)
        except FoldError:
            return node  # leave the error (a division by zero) to run time / the verifier
        if isinstance(value, bool):
            return Const(value, DType.BOOL)
        return Const(value, join_scalar(a.type, b.type))
    if op == BinOpKind.ADD:
        if _is_const(a, 0):
            return b
        if _is_const(b, 0):
            return a
    if op == BinOpKind.SUB and _is_const(b, 0):
        return a
    if op == BinOpKind.MUL:
        if _is_const(a, 1):
            return b
        if _is_const(b, 1):
            return a
    if op in (BinOpKind.FLOORDIV, BinOpKind.TDIV) and _is_const(b, 1):
        return a
    return BinOp(op, a, b)


def _is_const(e: Expr, value: int) -> bool:
    return isinstance(e, Const) and not isinstance(e.value, bool) and e.value == value


def binop(op: BinOpKind, lhs: ExprLike, rhs: ExprLike) -> Expr:
    """Public constructor for any binary operator, folding constants."""
    return _arith(op, lhs, rhs)


def emin(a: ExprLike, b: ExprLike) -> Expr:
    return _arith(BinOpKind.MIN, a, b)


def emax(a: ExprLike, b: ExprLike) -> Expr:
    return _arith(BinOpKind.MAX, a, b)


def ceildiv(a: ExprLike, b: ExprLike) -> Expr:
    """ceil(a / b) for positive b, as (a + b - 1) // b."""
    return _arith(BinOpKind.FLOORDIV, _arith(BinOpKind.SUB, _arith(BinOpKind.ADD, a, b), 1), b)


def static_int(e: ExprLike) -> int | None:
    """The value of an expression if it is an integer literal, else None."""
    x = as_expr(e) if not isinstance(e, (Var, Const, BinOp, Call)) else e
    if isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool):
        return x.value
    return None


# ----------------------------------------------------------------------------------------------
# The evaluator of static expressions (literals, lists of them, operators, and NR when bound)
# ----------------------------------------------------------------------------------------------


class NotStatic(ValueError):
    """``expr`` (a sub-expression of what was evaluated) has no value before run time."""

    def __init__(self, expr: Arg) -> None:
        self.expr = expr
        super().__init__(expr)

    def __str__(self) -> str:
        return f"not a static expression: {format_expr(self.expr)}"


class FoldError(ArithmeticError):
    """Operator ``expr`` faulted on its static operands (``cause``: e.g. a division by zero)."""

    def __init__(self, expr: BinOp, cause: ArithmeticError) -> None:
        self.expr, self.cause = expr, cause
        super().__init__(str(cause))


def evaluate(e: Arg, nr: int | None = None, *, integer: bool = False) -> Any:
    """The value of ``e`` if it is known before run time: the one evaluator of the IR.

    Literals, bracketed lists (a tuple), binary operators (``fold_binop``) and, when ``nr`` is given,
    the rank-count symbol NR. ``integer``: every value along the way must be an integer (not a
    bool), as in shape arithmetic. Raises ``NotStatic`` naming the first sub-expression (operands
    left to right) that has no static value, ``FoldError`` naming the operator that faulted.
    """
    value: Any
    if isinstance(e, Const):
        value = e.value
    elif isinstance(e, Var) and nr is not None and e.name == NR_NAME:
        value = nr
    elif isinstance(e, ListExpr):
        return tuple(evaluate(item, nr, integer=integer) for item in e.items)
    elif isinstance(e, BinOp):
        a, b = evaluate(e.lhs, nr, integer=integer), evaluate(e.rhs, nr, integer=integer)
        try:
            value = fold_binop(e.op, a, b)
        except ArithmeticError as err:
            raise FoldError(e, err) from None
    else:
        raise NotStatic(e)
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        raise NotStatic(e)
    return value


def eval_nr(e: Expr, nr: int) -> int | None:
    """Value of an integer expression whose only free symbol is NR at ``nr``; None if it has no
    integer value (another symbol, a fault, a non-integer)."""
    try:
        value: int = evaluate(e, nr, integer=True)
    except (NotStatic, FoldError):
        return None
    return value


# ----------------------------------------------------------------------------------------------
# Statements
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourcePos:
    """Where a statement came from in the user's file: a ``.pld`` line, or the line of a Python builder
    file that emitted it; ``via``: the composite op (``pld.tensor.allreduce``) whose lowering produced
    the statement, when lowering moved it there."""

    file: str
    line: int
    via: str = ""
    placed_by: str = ""
    """The pass that placed this statement after the user's line (a memory-ordering marker:
    ``InsertCommFence``, or the toolchain's own drain), empty for the user's own statements."""

    def __str__(self) -> str:
        placed = f"placed by {self.placed_by}" if self.placed_by else ""
        if not self.file:  # a marker placed after a statement of no known line
            return placed
        name = self.file.rsplit("/", 1)[-1]
        return f"{name}:{self.line}" + (f", lowered from {self.via}" if self.via else "") + (
            f", {placed}" if placed else "")


@dataclass(frozen=True)
class Assign:
    var: Var
    value: Expr
    origin: SourcePos | None = field(default=None, compare=False, repr=False)
    """The user's line this statement comes from (not part of the statement's identity)."""


@dataclass(frozen=True)
class Eval:
    """Evaluate a call for its effect (notify, wait, put, store, ...)."""

    call: Call
    origin: SourcePos | None = field(default=None, compare=False, repr=False)
    """The user's line this statement comes from (not part of the statement's identity)."""


@dataclass(frozen=True)
class Seq:
    stmts: tuple[Stmt, ...] = ()


class LoopKind(enum.Enum):
    """How a ``for`` loop's iterations relate; the value is the text-form word before the bounds."""

    RANGE = "range"
    """Sequential (pypto's ``pl.range``; also what ``pl.unroll`` replicates)."""
    PARALLEL = "parallel"
    """pypto's ``pl.parallel``: the program asserts the iterations independent. In an Orchestration its
    submissions take no sequential-ancestor promotion (their ``Out`` arguments stay OUTPUT_EXISTING)."""
    PIPELINE = "pipeline"
    """pypto's ``pl.pipeline``: replicated at tile level inside a kernel; sequential for the task graph."""


@dataclass(frozen=True)
class For:
    """``for var in range(start, stop, step)``; bounds may be runtime expressions."""

    var: Var
    start: Expr
    stop: Expr
    step: Expr
    body: Seq
    kind: LoopKind = LoopKind.RANGE


class TaskKind(enum.Enum):
    """What submitted a task (pypto's kinds of dispatch); the value is the text-form word."""

    KERNEL = "kernel"
    """An InCore function called from an Orchestration (one kernel dispatch)."""
    CORE_GROUP = "core_group"
    """A ``with pl.at(level=pl.Level.CORE_GROUP)`` region, outlined into its own kernel."""
    SPMD = "spmd"
    """``pl.spmd(n)`` / ``pl.spmd_submit``: one task of ``blocks`` logical blocks, concurrent with each other."""
    DUMMY = "dummy"
    """``pl.system.task_dummy(deps=...)``: a join with no work and no core."""


TASK_ID = ScalarType(DType.INT64)
"""The type of a task id (pypto's ``pl.Scalar[pl.TASK_ID]``); ``INVALID_TASK`` is the invalid id."""
INVALID_TASK = -1


@dataclass(frozen=True)
class Task:
    """One task the Orchestration submits: its kernel body runs on a core of the rank once every task it
    depends on has completed (``pldemu.runtime.taskdeps`` derives the automatic edges from the body).

    ``tid``: the task id variable it binds (``with ... as tid``); ``deps``: explicit producers (task id
    scalars; an invalid id is skipped); ``no_dep``: tensors whose accesses make no automatic edge
    (``pl.no_dep`` / ``no_dep_args``); ``blocks`` / ``block_var``: an SPMD task's block count and the
    index each block sees; ``early_resolve``: pypto's ``allow_early_resolve`` scheduling hint."""

    kind: TaskKind
    body: Seq
    tid: Var | None = None
    name: str = ""
    blocks: Expr = field(default_factory=lambda: Const(1))
    block_var: Var | None = None
    deps: tuple[Expr, ...] = ()
    no_dep: tuple[Var, ...] = ()
    early_resolve: bool = False
    origin: SourcePos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TaskScope:
    """``pl.scope()`` (AUTO) or ``pl.manual_scope()``: inside a manual scope tasks neither look up nor
    record tensor accesses, so only explicit ``deps`` order them."""

    manual: bool
    body: Seq


@dataclass(frozen=True)
class While:
    """Re-evaluates ``cond`` before every trip; the body re-assigns the variables it tests."""

    cond: Expr
    body: Seq


@dataclass(frozen=True)
class If:
    cond: Expr
    then: Seq
    orelse: Seq | None = None


@dataclass(frozen=True)
class Return:
    values: tuple[Expr, ...] = ()


Stmt = Assign | Eval | Seq | For | While | If | Return | Task | TaskScope

# ----------------------------------------------------------------------------------------------
# Functions and programs
# ----------------------------------------------------------------------------------------------


class BufferKind(enum.Enum):
    """What a declared buffer stands for; the value is the text-form keyword."""

    WINDOW = "window"  # data window (HCCL memory), poison-filled at allocation
    SIGNAL = "signal"  # INT32 signal window, zero at allocation
    LOCAL = "local"  # rank-local tensor, not reachable by peers


@dataclass(frozen=True)
class BufferDecl:
    var: Var
    kind: BufferKind
    group: tuple[int, ...] | None = None
    """A window of a communication sub-domain: the global ranks of its group, in order (group-local rank
    ``i`` is ``group[i]``). On such a window ``pld.system.get_comm_ctx`` gives the group's rank and size
    and a ``peer`` operand is group-local. None: the world, every rank in rank order."""


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[Var, ...]
    body: Seq


NR_NAME = "NR"
NR = Var(NR_NAME, INDEX)
"""The rank-count symbol that buffer shapes may use; bound when a program is instantiated."""


@dataclass(frozen=True)
class Program:
    """Buffers plus functions; every rank runs ``entry``. ``nranks`` pins the rank count if set."""

    name: str
    buffers: tuple[BufferDecl, ...]
    functions: tuple[Function, ...]
    entry: str = "main"
    nranks: int | None = None

    def function(self, name: str | None = None) -> Function:
        wanted = name or self.entry
        for f in self.functions:
            if f.name == wanted:
                return f
        raise KeyError(f"program {self.name} has no function {wanted!r}")

    def buffer(self, name: str) -> BufferDecl:
        for b in self.buffers:
            if b.var.name == name:
                return b
        raise KeyError(f"program {self.name} has no buffer {name!r}")

    def replace_function(self, fn: Function) -> Program:
        funcs = tuple(fn if f.name == fn.name else f for f in self.functions)
        return Program(self.name, self.buffers, funcs, self.entry, self.nranks)


# ----------------------------------------------------------------------------------------------
# The text of an expression (the .pld printer's, kept here so that the IR's own messages can use it)
# ----------------------------------------------------------------------------------------------


def format_const(c: Const) -> str:
    """A literal as the ``.pld`` text writes it (a non-default dtype as ``5:int32``)."""
    v = c.value
    if isinstance(v, bool):
        text = "true" if v else "false"
        return text if c.dtype is DType.BOOL else f"{text}:{c.dtype.value}"
    if isinstance(v, int):
        text = str(v)
        return text if c.dtype is DType.INDEX else f"{text}:{c.dtype.value}"
    if math.isnan(v):
        text = "nan"
    elif math.isinf(v):
        text = "inf" if v > 0 else "-inf"
    else:
        text = repr(float(v))
    return text if c.dtype is DType.FP32 else f"{text}:{c.dtype.value}"


def format_attr(value: AttrValue) -> str:
    """An attribute value as the ``.pld`` text writes it."""
    if isinstance(value, DType):
        return value.value
    if isinstance(value, enum.IntEnum):
        return enum_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def format_expr(e: Expr | ListExpr) -> str:
    """Print an expression; nested infix operands are parenthesised so parsing is unambiguous."""
    if isinstance(e, ListExpr):
        return "[" + ", ".join(format_expr(i) for i in e.items) + "]"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return format_const(e)
    if isinstance(e, BinOp):
        if e.op.is_function:
            return f"{e.op.value}({format_expr(e.lhs)}, {format_expr(e.rhs)})"
        return f"{expr_operand(e.lhs)} {e.op.value} {expr_operand(e.rhs)}"
    if isinstance(e, Call):
        parts = [format_expr(a) for a in e.args]
        parts += [f"{k}={format_attr(v)}" for k, v in e.attrs]
        return f"{e.op.text}({', '.join(parts)})"
    raise TypeError(f"not an expression: {e!r}")


def expr_operand(e: Arg) -> str:
    """``e`` as an operand of an infix operator: parenthesised when it is itself infix or a negative literal."""
    text = format_expr(e)
    if isinstance(e, BinOp) and not e.op.is_function:
        return f"({text})"
    if isinstance(e, Const) and ":" not in text and text.startswith("-"):
        return f"({text})"
    return text


def format_dims(dims: tuple[Expr, ...]) -> str:
    """``[d0, d1, ...]``."""
    return "[" + ", ".join(format_expr(d) for d in dims) + "]"


