"""LowerCompositeOps: rewrite every ``pld.tensor.*`` collective call into its primitive recipe.

Function-level: each statement whose expression holds a call listed in ``rules.RULES`` is replaced
by the rule's statements followed by ``Assign(original LHS, result)``, so later uses keep the same
name. Nested for/while/if bodies are rewritten in place. A program without collectives comes back
as the very same object, and since no rule emits a listed op the pass is idempotent.

``variant`` (default: the recipes as specified) selects a deliberately broken recipe for the mutant
catalogue (``pldemu.mutants``); it reaches every rule through ``LoweringContext.variant``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.enums import AllreduceMode
from pldemu.ir.nodes import (
    NR,
    Arg,
    Assign,
    BinOp,
    Call,
    Eval,
    Expr,
    For,
    Function,
    If,
    ListExpr,
    Program,
    Return,
    Seq,
    Stmt,
    Var,
    While,
)
from pldemu.ir.ops import Op
from pldemu.ir.printer import format_attr, format_expr
from pldemu.ir.signatures import make_call
from pldemu.lowering.backend import STANDALONE, Backend
from pldemu.lowering.common import Lowered, LoweringContext, LoweringError, show_nr
from pldemu.lowering.rules import ARGS, RULES
from pldemu.lowering.variant import CORRECT, RecipeVariant

# ----------------------------------------------------------------------------------------------
# Reports (what the CLI summarises)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallReport:
    """One lowered collective: where it was, what it became."""

    function: str
    where: str
    call: Call
    lowered: Lowered
    emitted: tuple[tuple[str, int], ...]
    """Static count of emitted primitive call sites by op name (sorted)."""

    def summary(self, nranks: int | None = None) -> str:
        """One line: op and mode, primitives by kind, barriers (credits per cell), chunks, stage."""
        attrs = " ".join(f"{k}={format_attr(v)}" for k, v in self.call.attrs)
        kinds = ", ".join(f"{name} x{count}" for name, count in self.emitted)
        lw = self.lowered
        head = f"{self.call.op.text}" + (f" [{attrs}]" if attrs else "")
        at = self.where.split(": ", 1)[0]
        if lw.note is not None:  # a tile composite: what it became instead of barrier facts
            return f"{head} at {at}: {lw.note}; {kinds}"
        barriers = f"barriers/cell {show_nr(lw.credits, nranks)}"
        if lw.rows is not None:
            barriers += f" on each of {show_nr(lw.rows, nranks)} rows"
        chunks = f"chunks {show_nr(lw.chunks, nranks)}" if lw.chunks is not None else "chunks -"
        stage = f"stage {list(lw.stage)}" if lw.stage is not None else "stage -"
        return f"{head} at {at}: {kinds}; {barriers}; {chunks}; {stage}"


@dataclass(frozen=True)
class LoweringReport:
    program: Program
    calls: tuple[CallReport, ...]


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------


def lower_composite_ops(program: Program, *, variant: RecipeVariant = CORRECT,
                        backend: Backend = STANDALONE) -> Program:
    """Lower every composite of every function (see the module docstring) with ``variant``'s recipes;
    ``backend`` plans the tile.select scratch (standalone by default)."""
    return lower_composite_ops_with_report(program, variant=variant, backend=backend).program


def lower_composite_ops_with_report(program: Program, *, variant: RecipeVariant = CORRECT,
                                    backend: Backend = STANDALONE) -> LoweringReport:
    """``lower_composite_ops`` plus one ``CallReport`` per lowered call, in program order."""
    if not isinstance(variant, RecipeVariant):
        raise TypeError(f"variant must be a RecipeVariant, got {variant!r}")
    pending = {f.name: bool(_calls_in_function(f)) for f in program.functions}
    if not any(pending.values()):
        return LoweringReport(program, ())
    roots = {f.name: _alias_roots(program, f) for f in program.functions}
    _check_signal_conventions(program, roots)
    reports: list[CallReport] = []
    functions = []
    for f in program.functions:
        if not pending[f.name]:
            functions.append(f)
            continue
        lowering = _FunctionLowering(program, f, roots[f.name], variant, backend)
        functions.append(lowering.run())
        reports.extend(lowering.reports)
    lowered = Program(program.name, program.buffers, tuple(functions), program.entry, program.nranks)
    return LoweringReport(lowered, tuple(reports))


# ----------------------------------------------------------------------------------------------
# Traversal helpers
# ----------------------------------------------------------------------------------------------


def _exprs_of(s: Stmt) -> Iterator[Expr]:
    """The expressions a statement evaluates itself (not those of nested bodies)."""
    if isinstance(s, Assign):
        yield s.value
    elif isinstance(s, Eval):
        yield s.call
    elif isinstance(s, For):
        yield from (s.start, s.stop, s.step)
    elif isinstance(s, (While, If)):
        yield s.cond
    elif isinstance(s, Return):
        yield from s.values


def _bodies_of(s: Stmt) -> Iterator[Seq]:
    if isinstance(s, Seq):
        yield s
    elif isinstance(s, (For, While)):
        yield s.body
    elif isinstance(s, If):
        yield s.then
        if s.orelse is not None:
            yield s.orelse


def _walk(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    for s in stmts:
        yield s
        for body in _bodies_of(s):
            yield from _walk(body.stmts)


def _all_calls(e: Arg) -> Iterator[Call]:
    """Every call inside an expression, innermost first (evaluation order)."""
    if isinstance(e, ListExpr):
        for item in e.items:
            yield from _all_calls(item)
    elif isinstance(e, BinOp):
        yield from _all_calls(e.lhs)
        yield from _all_calls(e.rhs)
    elif isinstance(e, Call):
        for a in e.args:
            yield from _all_calls(a)
        yield e


def _calls(e: Arg) -> Iterator[Call]:
    """Collective calls inside an expression, innermost first (evaluation order)."""
    return (c for c in _all_calls(e) if c.op in RULES)


def _calls_in_function(f: Function) -> list[Call]:
    return [c for s in _walk(f.body.stmts) for e in _exprs_of(s) for c in _calls(e)]


def composite_calls(program: Program) -> tuple[Call, ...]:
    """Every call of a composite collective (``pld.tensor.*``, which only this pass can run) in
    ``program``, function by function in evaluation order; empty for a lowered program."""
    return tuple(c for f in program.functions for c in _calls_in_function(f))


def _alias_roots(program: Program, f: Function) -> Mapping[str, frozenset[str]]:
    """Variable -> the declared buffers it may stand for, through rebinds, tensor.view and collectives.

    Flow-insensitive (names may be re-assigned): the union over every binding, to a fixed point.
    """
    roots: dict[str, frozenset[str]] = {b.var.name: frozenset({b.var.name}) for b in program.buffers}
    for p in f.params:
        roots[p.name] = frozenset({p.name})
    assigns = [s for s in _walk(f.body.stmts) if isinstance(s, Assign)]
    changed = True
    while changed:
        changed = False
        for s in assigns:
            source = _alias_source(s.value)
            if source is None:
                continue
            new = roots.get(s.var.name, frozenset()) | roots.get(source.name, frozenset({source.name}))
            if new != roots.get(s.var.name):
                roots[s.var.name] = new
                changed = True
    return MappingProxyType(roots)


def _alias_source(e: Expr) -> Var | None:
    """The variable whose memory ``e`` denotes, if it denotes one."""
    if isinstance(e, Var):
        return e
    if isinstance(e, Call):
        index = 0 if e.op is Op.TENSOR_VIEW else ARGS[e.op].result if e.op in ARGS else None
        if index is not None and isinstance(e.args[index], Var):
            arg = e.args[index]
            assert isinstance(arg, Var)
            return arg
    return None


def _check_signal_conventions(program: Program, roots: Mapping[str, Mapping[str, frozenset[str]]]) -> None:
    """Reject a buffer used as a mesh signal ([NR, 1]) and as a ring signal ([2*(NR-1), NR]).

    The two conventions address cells differently, so one buffer serving both would let a mesh
    barrier count credits in cells a ring barrier also counts (ValidateMeshSignalShape's rule, applied
    across the whole program and through aliases).
    """
    first: dict[tuple[str, bool], str] = {}
    for f in program.functions:
        for s in _walk(f.body.stmts):
            for e in _exprs_of(s):
                for call in _calls(e):
                    if not call.op.is_collective:
                        continue
                    sig = call.args[ARGS[call.op].signal]
                    if not isinstance(sig, Var):
                        continue
                    ring = call.op is Op.ALLREDUCE and dict(call.attrs).get("mode") is AllreduceMode.ring
                    site = f"func {f.name}: {format_expr(call)}"
                    for root in roots[f.name].get(sig.name, frozenset({sig.name})):
                        other = first.get((root, not ring))
                        if other is not None:
                            mine, theirs = ("ring", "mesh") if ring else ("mesh", "ring")
                            raise LoweringError(
                                call.op, "signal",
                                f"a buffer used with one signal convention only; {root} is a {mine} signal here "
                                f"but a {theirs} signal at {other} (mesh [NR, 1] and ring [2 * (NR - 1), NR] "
                                "cells are addressed differently: give each its own signal)",
                                where=site)
                        first.setdefault((root, ring), site)


# ----------------------------------------------------------------------------------------------
# The rewriter of one function
# ----------------------------------------------------------------------------------------------


class _FunctionLowering:
    """Rewrites one function into a fresh FunctionBuilder; every temp name comes from its counter."""

    def __init__(self, program: Program, fn: Function, roots: Mapping[str, frozenset[str]],
                 variant: RecipeVariant, backend: Backend = STANDALONE) -> None:
        self.program, self.fn, self.roots, self.variant = program, fn, roots, variant
        self.backend = backend
        names = {b.var.name for b in program.buffers} | {NR.name}
        for s in _walk(fn.body.stmts):
            if isinstance(s, (Assign, For)):
                names.add(s.var.name)
        self.fb = FunctionBuilder(fn.name, fn.params, used_names=names)
        self.path: list[str] = []
        self.reports: list[CallReport] = []
        # The spec's composite_tuples_: the MakeTuples rules returned (by id) and the variables bound to
        # them or to SSA aliases of them, so TupleGetItem projections fold to the rule's destinations.
        # A user's own ``v = tuple.make(a, b)`` is never folded.
        self.made: set[int] = set()
        self.tuples: dict[str, tuple[Arg, ...]] = {}

    def run(self) -> Function:
        self.seq(self.fn.body.stmts)
        return self.fb.build()

    def seq(self, stmts: tuple[Stmt, ...]) -> None:
        for index, s in enumerate(stmts, 1):
            self.path.append(f"stmt {index}")
            self.stmt(s)
            self.path.pop()

    def block(self, body: Seq, label: str) -> Seq:
        self.path.append(label)
        with self.fb.block() as out:
            self.seq(body.stmts)
        self.path.pop()
        return Seq(tuple(out))

    def pending(self, e: Expr) -> bool:
        """True when ``e`` holds a composite call, a projection of a rule's tuple, or aliases one."""
        if isinstance(e, Var):
            return e.name in self.tuples
        return any(c.op in RULES or (c.op is Op.TUPLE_GET_ITEM and isinstance(c.args[0], Var)
                                     and c.args[0].name in self.tuples) for c in _all_calls(e))

    def stmt(self, s: Stmt) -> None:
        fb = self.fb
        if not any(self.pending(e) for e in _exprs_of(s)) and not any(
                self.pending(e) for b in _bodies_of(s) for x in _walk(b.stmts) for e in _exprs_of(x)):
            if isinstance(s, Assign):
                self.tuples.pop(s.var.name, None)
            fb.emit(s)  # nothing to lower: keep the statement object itself
            return
        if isinstance(s, Assign):
            value = self.expr(s.value, s)
            self.track(s.var, value)
            fb.emit(Assign(s.var, value))
        elif isinstance(s, Eval):
            value = self.expr(s.call, s)
            # A collective evaluated for effect leaves only its recipe behind.
            if s.call.op not in RULES:
                assert isinstance(value, Call)
                fb.emit(Eval(value))
        elif isinstance(s, Seq):
            fb.emit(self.block(s, "seq"))
        elif isinstance(s, For):
            start, stop, step = (self.expr(e, s) for e in (s.start, s.stop, s.step))
            fb.emit(For(s.var, start, stop, step, self.block(s.body, f"for {s.var.name}")))
        elif isinstance(s, While):
            if any(_calls(s.cond)):
                call = next(_calls(s.cond))
                raise LoweringError(call.op, "call site", "a statement, not part of a while condition "
                                    "(it would have to run once per trip)", where=self.where(s))
            fb.emit(While(s.cond, self.block(s.body, "while")))
        elif isinstance(s, If):
            cond = self.expr(s.cond, s)
            then = self.block(s.then, "if")
            orelse = None if s.orelse is None else self.block(s.orelse, "else")
            fb.emit(If(cond, then, orelse))
        elif isinstance(s, Return):
            fb.emit(Return(tuple(self.expr(v, s) for v in s.values)))
        else:  # pragma: no cover - Stmt is a closed union
            raise TypeError(f"not a statement: {s!r}")

    def expr(self, e: Expr, s: Stmt) -> Expr:
        """``e`` with every collective call lowered (its recipe emitted first) and replaced by its result."""
        if isinstance(e, BinOp):
            lhs, rhs = self.expr(e.lhs, s), self.expr(e.rhs, s)
            return e if (lhs is e.lhs and rhs is e.rhs) else BinOp(e.op, lhs, rhs)
        if not isinstance(e, Call):
            return e
        args = tuple(self.arg(a, s) for a in e.args)
        folded = self.fold(e, args)
        if folded is not None:
            return folded
        call = e if all(a is b for a, b in zip(args, e.args, strict=True)) else make_call(e.op, args, dict(e.attrs))
        if call.op not in RULES:
            return call
        return self.lower(call, s)

    def fold(self, e: Call, args: tuple[Arg, ...]) -> Expr | None:
        """A projection of a rule's MakeTuple (directly or through a tracked variable): the element."""
        if e.op is not Op.TUPLE_GET_ITEM:
            return None
        src = args[0]
        elements = (self.tuples.get(src.name) if isinstance(src, Var) else
                    src.args if isinstance(src, Call) and id(src) in self.made else None)
        if elements is None:
            return None
        index = e.attr("index")
        assert isinstance(index, int)
        item = elements[index]
        assert not isinstance(item, ListExpr)
        return item

    def track(self, var: Var, value: Expr) -> None:
        """Record ``var`` as a rule's tuple (or an alias of one); any other binding forgets it."""
        if isinstance(value, Call) and id(value) in self.made:
            self.tuples[var.name] = value.args
        elif isinstance(value, Var) and value.name in self.tuples:
            self.tuples[var.name] = self.tuples[value.name]
        else:
            self.tuples.pop(var.name, None)

    def arg(self, a: Arg, s: Stmt) -> Arg:
        if isinstance(a, ListExpr):
            items = tuple(self.expr(i, s) for i in a.items)
            return a if all(x is y for x, y in zip(items, a.items, strict=True)) else ListExpr(items)
        return self.expr(a, s)

    def lower(self, call: Call, s: Stmt) -> Expr:
        where = self.where(s)
        target = s.var.name if isinstance(s, Assign) else ""
        ctx = LoweringContext(self.program, call.op, where, self.roots, self.variant, target, self.backend)
        rule = RULES[call.op]
        with self.fb.block() as emitted:
            lowered = rule(call, self.fb, ctx)
        for st in emitted:
            self.fb.emit(st)
        if isinstance(lowered.value, Call) and lowered.value.op is Op.TUPLE_MAKE:
            self.made.add(id(lowered.value))
        counts = Counter(c.op.text for st in _walk(tuple(emitted)) for e in _exprs_of(st)
                         for c in _all_calls(e))
        self.reports.append(CallReport(self.fn.name, where, call, lowered, tuple(sorted(counts.items()))))
        return lowered.value

    def where(self, s: Stmt) -> str:
        text = format_expr(s.call) if isinstance(s, Eval) else (
            f"{s.var.name} = {format_expr(s.value)}" if isinstance(s, Assign) else type(s).__name__.lower())
        return f"func {self.fn.name} > {' > '.join(self.path)}: {text}"



__all__ = ["CallReport", "LoweringReport", "composite_calls", "lower_composite_ops", "lower_composite_ops_with_report"]
