"""Whole-program verifier: buffer declarations, defined-before-use, types of every call and statement.

Run after every pass in the tests. Raises ``VerifyError`` listing every problem found. Names are
scoped with ``pldemu.ir.scope.Scope`` (the parser's rules); expressions are visited with the IR
walker (``pldemu.ir.walk.walk_expr``), one node check per sub-expression.
"""

from __future__ import annotations

from pldemu.ir import nodes as ir
from pldemu.ir.dtypes import DType
from pldemu.ir.ops import Op
from pldemu.ir.scope import Scope
from pldemu.ir.signatures import IRTypeError, make_call
from pldemu.ir.tasks import scope_problems, task_problems
from pldemu.ir.walk import MAX_NESTING, program_depth, walk_expr


class VerifyError(ValueError):
    """The program is malformed; ``problems`` lists every finding."""

    def __init__(self, program: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"program {program} failed verification:\n  " + "\n  ".join(problems))


class _Verifier:
    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.problems: list[str] = []
        self.where = ""
        self.task_depth = 0
        """Tasks enclosing the statement being checked (a kernel submits no task)."""
        self.manual_depth = 0
        """Manual scopes enclosing it."""

    def fail(self, msg: str) -> None:
        self.problems.append(f"{self.where}: {msg}" if self.where else msg)

    def run(self) -> None:
        p = self.program
        seen: dict[str, ir.Type] = {ir.NR.name: ir.NR.type}
        for b in p.buffers:
            name = b.var.name
            if name in seen:
                self.fail(f"buffer {name} declared twice or shadows NR")
            t = b.var.type
            if not isinstance(t, ir.TensorType):
                self.fail(f"buffer {name} must have a tensor type")
                continue
            if (b.kind is ir.BufferKind.LOCAL) == t.window:
                self.fail(f"buffer {name}: kind {b.kind.value} disagrees with window={t.window}")
            if b.kind is ir.BufferKind.SIGNAL and t.dtype is not DType.INT32:
                self.fail(f"signal {name} must be int32, got {t.dtype.value}")
            for d in t.shape + (t.valid_shape or ()):
                self._expr(d, Scope.of({ir.NR.name: ir.NR.type}))
            seen[name] = t
        if p.nranks is not None and p.nranks < 1:
            self.fail(f"nranks must be >= 1, got {p.nranks}")
        names = [f.name for f in p.functions]
        if len(set(names)) != len(names):
            self.fail("function names must be unique")
        if p.entry not in names:
            self.fail(f"entry function {p.entry!r} is not defined")
        for f in p.functions:
            self.function(f, seen)

    def function(self, f: ir.Function, globals_: dict[str, ir.Type]) -> None:
        self.where = f"func {f.name}"
        scope = Scope.of(globals_)
        for prm in f.params:
            scope.bind(prm.name, prm.type)
        self.seq(f.body, scope)

    def seq(self, s: ir.Seq, scope: Scope) -> None:
        for st in s.stmts:
            self.stmt(st, scope)

    def stmt(self, s: ir.Stmt, scope: Scope) -> None:
        if isinstance(s, ir.Assign):
            self._expr(s.value, scope)
            vt = s.value.type
            if isinstance(vt, ir.NoneType):
                self.fail(f"{s.var.name} is assigned the result of a call that returns nothing")
            if s.var.type != vt:
                self.fail(f"{s.var.name}: declared type differs from its value's type")
            prev = scope.names.get(s.var.name)
            if prev is not None and prev != s.var.type and not _compatible_rebind(prev, s.var.type):
                self.fail(f"{s.var.name} re-assigned with a different type")
            scope.bind(s.var.name, s.var.type)
        elif isinstance(s, ir.Eval):
            self._expr(s.call, scope)
        elif isinstance(s, ir.Seq):
            self.seq(s, scope)
        elif isinstance(s, ir.For):
            for e in (s.start, s.stop, s.step):
                self._expr(e, scope)
                self._int_scalar(e, "for bound")
            inner = scope.child()
            inner.bind(s.var.name, s.var.type)
            # Names first defined inside the body are not defined after it (the loop may run 0 times).
            self.seq(s.body, inner)
        elif isinstance(s, ir.While):
            self._expr(s.cond, scope)
            self._bool(s.cond, "while condition")
            self.seq(s.body, scope.child())
        elif isinstance(s, ir.If):
            self._expr(s.cond, scope)
            self._bool(s.cond, "if condition")
            then, other = scope.child(), scope.child()
            self.seq(s.then, then)
            if s.orelse is not None:
                self.seq(s.orelse, other)
            scope.join_branches(then, other, "the if")
        elif isinstance(s, ir.Return):
            for v in s.values:
                self._expr(v, scope)
        elif isinstance(s, ir.Task):
            self.task(s, scope)
        elif isinstance(s, ir.TaskScope):
            self.task_scope(s, scope)
        else:
            self.fail(f"unknown statement {type(s).__name__}")

    def task(self, t: ir.Task, scope: Scope) -> None:
        """pypto's rules for a task (``pldemu.ir.tasks``), then its body as a block of its own."""
        for problem in task_problems(t, self.task_depth, self.manual_depth):
            self.fail(problem)
        self._expr(t.blocks, scope)
        self._int_scalar(t.blocks, "spmd block count")
        for d in t.deps:
            self._expr(d, scope)
            if d.type != ir.TASK_ID:
                self.fail(f"task dep {ir.format_expr(d)} is not a task id")
        for v in t.no_dep:
            self._expr(v, scope)
            if not isinstance(v, ir.Var) or not isinstance(v.type, ir.TensorType):
                self.fail(f"nodep entry {ir.format_expr(v)} is not a tensor")
        inner = scope.child()
        if t.block_var is not None:
            inner.bind(t.block_var.name, t.block_var.type)
        self.task_depth += 1
        self.seq(t.body, inner)
        self.task_depth -= 1
        if t.tid is not None:
            scope.bind(t.tid.name, t.tid.type)

    def task_scope(self, s: ir.TaskScope, scope: Scope) -> None:
        for problem in scope_problems(s, self.task_depth, self.manual_depth):
            self.fail(problem)
        self.manual_depth += s.manual
        self.seq(s.body, scope)
        self.manual_depth -= s.manual

    def _bool(self, e: ir.Expr, what: str) -> None:
        t = e.type
        if not ((isinstance(t, ir.ScalarType) and t.dtype in (DType.BOOL,)) or (isinstance(t, ir.ScalarType)
                and t.dtype.is_int)):
            self.fail(f"{what} must be a boolean or integer scalar")

    def _int_scalar(self, e: ir.Expr, what: str) -> None:
        t = e.type
        if not (isinstance(t, ir.ScalarType) and t.dtype.is_int):
            self.fail(f"{what} must be an integer scalar")

    def _expr(self, e: ir.Arg, scope: Scope) -> None:
        """Check every sub-expression of ``e``, operands before the node that uses them."""
        for node in walk_expr(e):
            self._node(node, scope)

    def _node(self, e: ir.Arg, scope: Scope) -> None:
        """The checks of one expression node (its operands are checked already)."""
        if isinstance(e, ir.ListExpr):
            return
        if isinstance(e, ir.Var):
            t = scope.get(e.name)
            if t is None:
                self.fail(f"{e.name} used before it is defined")
            elif t != e.type and not _compatible_rebind(t, e.type):
                self.fail(f"{e.name} used with a type that differs from its definition")
            return
        if isinstance(e, ir.Const):
            if isinstance(e.value, float) and not e.dtype.is_float:
                self.fail(f"constant {e.value!r} has the non-float dtype {e.dtype.value}")
            elif e.dtype.is_int and isinstance(e.value, int):
                lo, hi = e.dtype.int_range()
                if not lo <= e.value <= hi:
                    self.fail(f"constant {e.value} does not fit {e.dtype.value} ({lo} .. {hi})")
            return
        if isinstance(e, ir.BinOp):
            for side in (e.lhs, e.rhs):
                if not isinstance(side.type, ir.ScalarType):
                    self.fail(f"operator {e.op.value} applied to a non-scalar")
            return
        if isinstance(e, ir.Call):
            self._call(e)
            if e.op is Op.DEFER_WAIT and not self.task_depth:
                self.fail("pld.system.defer_wait outside a task: it registers a completion condition of the "
                          "enclosing pl.at(level=pl.Level.CORE_GROUP) task")
            return
        self.fail(f"unknown expression {type(e).__name__}")

    def _call(self, e: ir.Call) -> None:
        """A call's recorded type and attributes are what the signature table deduces again."""
        try:
            again = make_call(e.op, e.args, dict(e.attrs))
        except IRTypeError as err:
            self.fail(str(err))
            return
        if again.type != e.type:
            self.fail(f"{e.op.text}: recorded result type differs from the deduced one")
        if again.attrs != e.attrs:
            self.fail(f"{e.op.text}: attributes are not canonical")


def _compatible_rebind(a: ir.Type, b: ir.Type) -> bool:
    """Tiles may be re-bound with a different valid shape (same physical tile)."""
    if isinstance(a, ir.TileType) and isinstance(b, ir.TileType):
        return a.dtype == b.dtype and a.shape == b.shape and a.memory == b.memory
    return False


def verify(program: ir.Program) -> ir.Program:
    """Check the program; return it unchanged or raise VerifyError with every problem."""
    depth, where = program_depth(program)
    if depth > MAX_NESTING:  # checked first: every other check recurses on the nesting
        raise VerifyError(program.name, [f"function {where}: nested {depth} levels deep (blocks and expressions; "
                                         f"at most {MAX_NESTING}); split it with intermediate assignments"])
    v = _Verifier(program)
    v.run()
    if v.problems:
        raise VerifyError(program.name, v.problems)
    return program


__all__ = ["VerifyError", "verify"]
