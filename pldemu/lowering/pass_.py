"""LowerCompositeOps: rewrite every ``pld.tensor.*`` collective and tile composite call into its recipe.

The pass is an object, ``LowerCompositeOps``, whose options are its fields (the recipe ``variant``)
and whose ``apply(program) -> Program`` runs it (xDSL's ``ModulePass`` shape);
``lower_composite_ops(program, variant=...)`` is the same as a function.

Function-level: each statement whose expression holds a call listed in ``rules.RULES`` is replaced
by the rule's statements followed by ``Assign(original LHS, result)``, so later uses keep the same
name. Nested for/while/if bodies are rewritten in place. A program without collectives comes back
as the very same object, and since no rule emits a listed op the pass is idempotent. Every "find
the calls" question goes through the IR walker (``pldemu.ir.walk``).

``backend`` (default standalone) is the target whose scratch plans the tile.select rule follows
(``lowering.backend``); a rule's temporaries are named from the call's target through the function
builder's one temporary counter.

``variant`` (default: the recipes as specified) selects a deliberately broken recipe for the mutant
catalogue (``pldemu.mutants``); the pass puts it in every rule's ``LoweringContext``, from which
``emit_comm`` hands it to the shared protocol helpers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from pldemu.ir import nodes as ir
from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.enums import AllreduceMode
from pldemu.ir.nodes import format_attr, format_expr
from pldemu.ir.ops import Op
from pldemu.ir.signatures import make_call
from pldemu.ir.walk import expr_calls, function_calls, program_calls, stmt_exprs, walk_calls, walk_stmts
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
    call: ir.Call
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
    program: ir.Program
    calls: tuple[CallReport, ...]


# ----------------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LowerCompositeOps:
    """LowerCompositeOps as a pass object: its options are its fields, ``apply`` runs it.

    In the style of xDSL's ``ModulePass``: ``LowerCompositeOps(variant=...).apply(program)``. The
    default instance lowers with the recipes as specified.
    """

    name: ClassVar[str] = "lower-composite-ops"

    variant: RecipeVariant = CORRECT
    """The recipe variant every rule emits (``RecipeVariant()``: the specified recipes)."""
    backend: Backend = STANDALONE
    """The target whose scratch plans and dtype gates the tile.select rule follows."""

    def __post_init__(self) -> None:
        if not isinstance(self.variant, RecipeVariant):
            raise TypeError(f"variant must be a RecipeVariant, got {self.variant!r}")
        if not isinstance(self.backend, Backend):
            raise TypeError(f"backend must be a Backend, got {self.backend!r}")

    def apply(self, program: ir.Program) -> ir.Program:
        """Lower every collective of every function (see the module docstring)."""
        return self.apply_with_report(program).program

    def apply_with_report(self, program: ir.Program) -> LoweringReport:
        """``apply`` plus one ``CallReport`` per lowered call, in program order."""
        pending = {f.name: any(_collective_calls(f)) for f in program.functions}
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
            lowering = _FunctionLowering(program, f, roots[f.name], self)
            functions.append(lowering.run())
            reports.extend(lowering.reports)
        lowered = ir.Program(program.name, program.buffers, tuple(functions), program.entry, program.nranks)
        return LoweringReport(lowered, tuple(reports))


def lower_composite_ops(program: ir.Program, *, variant: RecipeVariant = CORRECT,
                        backend: Backend = STANDALONE) -> ir.Program:
    """``LowerCompositeOps(variant, backend).apply(program)``: the entry point most callers use."""
    return LowerCompositeOps(variant, backend).apply(program)


def lower_composite_ops_with_report(program: ir.Program, *, variant: RecipeVariant = CORRECT,
                                    backend: Backend = STANDALONE) -> LoweringReport:
    """``LowerCompositeOps(variant, backend).apply_with_report(program)``."""
    return LowerCompositeOps(variant, backend).apply_with_report(program)


# ----------------------------------------------------------------------------------------------
# Analyses before rewriting (through the IR walker)
# ----------------------------------------------------------------------------------------------


def _collectives(calls: Iterable[ir.Call]) -> Iterator[ir.Call]:
    """The calls of ``calls`` that this pass rewrites (their op has a rule)."""
    return (c for c in calls if c.op in RULES)


def _collective_calls(f: ir.Function) -> Iterator[ir.Call]:
    """Collective calls of ``f``, in evaluation order."""
    return _collectives(function_calls(f))


def composite_calls(program: ir.Program) -> tuple[ir.Call, ...]:
    """Every call of a composite collective (``pld.tensor.*``, which only this pass can run) in
    ``program``, function by function in evaluation order; empty for a lowered program."""
    return tuple(_collectives(program_calls(program)))


def _alias_roots(program: ir.Program, f: ir.Function) -> Mapping[str, frozenset[str]]:
    """Variable -> the declared buffers it may stand for, through rebinds, tensor.view and collectives.

    Flow-insensitive (names may be re-assigned): the union over every binding, to a fixed point.
    """
    roots: dict[str, frozenset[str]] = {b.var.name: frozenset({b.var.name}) for b in program.buffers}
    for p in f.params:
        roots[p.name] = frozenset({p.name})
    assigns = [s for s in walk_stmts(f.body.stmts) if isinstance(s, ir.Assign)]
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


def _alias_source(e: ir.Expr) -> ir.Var | None:
    """The variable whose memory ``e`` denotes, if it denotes one."""
    if isinstance(e, ir.Var):
        return e
    if isinstance(e, ir.Call):
        index = 0 if e.op is Op.TENSOR_VIEW else ARGS[e.op].result if e.op in ARGS else None
        if index is not None and isinstance(e.args[index], ir.Var):
            arg = e.args[index]
            assert isinstance(arg, ir.Var)
            return arg
    return None


def _call_group(program: ir.Program, roots: Mapping[str, frozenset[str]], call: ir.Call,
                where: str) -> tuple[int, ...] | None:
    """The comm sub-domain a collective runs in: the group of its windows, which must all share it (one
    communicator per call, as pypto's per-domain builtins); None for the world."""
    decls = {b.var.name: b for b in program.buffers}
    groups = {decls[r].group for a in call.args if isinstance(a, ir.Var)
              for r in roots.get(a.name, frozenset({a.name})) if r in decls and decls[r].kind is not ir.BufferKind.LOCAL}
    if len(groups) > 1:
        raise LoweringError(call.op, "windows", "of one comm group (one communicator per collective)",
                            ", ".join("the world" if g is None else "{" + ", ".join(map(str, g)) + "}"
                                      for g in sorted(groups, key=lambda g: (g is not None, g or ()))), where)
    return next(iter(groups), None)


def _check_signal_conventions(program: ir.Program, roots: Mapping[str, Mapping[str, frozenset[str]]]) -> None:
    """Reject a buffer used as a mesh signal ([NR, 1]) and as a ring signal ([2*(NR-1), NR]).

    The two conventions address cells differently, so one buffer serving both would let a mesh
    barrier count credits in cells a ring barrier also counts (ValidateMeshSignalShape's rule, applied
    across the whole program and through aliases).
    """
    first: dict[tuple[str, bool], str] = {}
    for f in program.functions:
        for call in _collective_calls(f):
            if not call.op.is_collective:
                continue
            sig = call.args[ARGS[call.op].signal]
            if not isinstance(sig, ir.Var):
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

    def __init__(self, program: ir.Program, fn: ir.Function, roots: Mapping[str, frozenset[str]],
                 options: LowerCompositeOps) -> None:
        self.program, self.fn, self.roots, self.options = program, fn, roots, options
        names = {b.var.name for b in program.buffers} | {ir.NR.name}
        for s in walk_stmts(fn.body.stmts):
            if isinstance(s, (ir.Assign, ir.For)):
                names.add(s.var.name)
        self.fb = FunctionBuilder(fn.name, fn.params, used_names=names)
        self.path: list[str] = []
        self.reports: list[CallReport] = []
        # The spec's composite_tuples_: the MakeTuples rules returned (by id) and the variables bound to
        # them or to SSA aliases of them, so TupleGetItem projections fold to the rule's destinations.
        # A user's own ``v = tuple.make(a, b)`` is never folded.
        self.made: set[int] = set()
        self.tuples: dict[str, tuple[ir.Arg, ...]] = {}

    def run(self) -> ir.Function:
        self.seq(self.fn.body.stmts)
        return self.fb.build()

    def seq(self, stmts: tuple[ir.Stmt, ...]) -> None:
        for index, s in enumerate(stmts, 1):
            self.path.append(f"stmt {index}")
            self.stmt(s)
            self.path.pop()

    def block(self, body: ir.Seq, label: str) -> ir.Seq:
        self.path.append(label)
        with self.fb.block() as out:
            self.seq(body.stmts)
        self.path.pop()
        return ir.Seq(tuple(out))

    def pending(self, e: ir.Expr) -> bool:
        """True when ``e`` holds a composite call, a projection of a rule's tuple, or aliases one."""
        if isinstance(e, ir.Var):
            return e.name in self.tuples
        return any(c.op in RULES or (c.op is Op.TUPLE_GET_ITEM and isinstance(c.args[0], ir.Var)
                                     and c.args[0].name in self.tuples) for c in expr_calls(e))

    def stmt(self, s: ir.Stmt) -> None:
        fb = self.fb
        if not any(self.pending(e) for x in walk_stmts((s,)) for e in stmt_exprs(x)):
            if isinstance(s, ir.Assign):
                self.tuples.pop(s.var.name, None)
            fb.emit(s)  # nothing to lower: keep the statement object itself
            return
        if isinstance(s, ir.Assign):
            value = self.expr(s.value, s)
            self.track(s.var, value)
            fb.emit(ir.Assign(s.var, value, s.origin))
        elif isinstance(s, ir.Eval):
            value = self.expr(s.call, s)
            # A collective evaluated for effect leaves only its recipe behind.
            if s.call.op not in RULES:
                assert isinstance(value, ir.Call)
                fb.emit(ir.Eval(value, s.origin))
        elif isinstance(s, ir.Seq):
            fb.emit(self.block(s, "seq"))
        elif isinstance(s, ir.For):
            start, stop, step = (self.expr(e, s) for e in (s.start, s.stop, s.step))
            fb.emit(ir.For(s.var, start, stop, step, self.block(s.body, f"for {s.var.name}"), s.kind))
        elif isinstance(s, (ir.Task, ir.TaskScope)):
            fb.emit(dataclasses.replace(s, body=self.block(s.body, "task")))
        elif isinstance(s, ir.While):
            call = next(_collectives(expr_calls(s.cond)), None)
            if call is not None:
                raise LoweringError(call.op, "call site", "a statement, not part of a while condition "
                                    "(it would have to run once per trip)", where=self.where(s))
            fb.emit(ir.While(s.cond, self.block(s.body, "while")))
        elif isinstance(s, ir.If):
            cond = self.expr(s.cond, s)
            then = self.block(s.then, "if")
            orelse = None if s.orelse is None else self.block(s.orelse, "else")
            fb.emit(ir.If(cond, then, orelse))
        elif isinstance(s, ir.Return):
            fb.emit(ir.Return(tuple(self.expr(v, s) for v in s.values)))
        else:  # pragma: no cover - Stmt is a closed union
            raise TypeError(f"not a statement: {s!r}")

    def expr(self, e: ir.Expr, s: ir.Stmt) -> ir.Expr:
        """``e`` with every collective call lowered (its recipe emitted first) and replaced by its result."""
        if isinstance(e, ir.BinOp):
            lhs, rhs = self.expr(e.lhs, s), self.expr(e.rhs, s)
            return e if (lhs is e.lhs and rhs is e.rhs) else ir.BinOp(e.op, lhs, rhs)
        if not isinstance(e, ir.Call):
            return e
        args = tuple(self.arg(a, s) for a in e.args)
        folded = self.fold(e, args)
        if folded is not None:
            return folded
        call = e if all(a is b for a, b in zip(args, e.args, strict=True)) else make_call(e.op, args, dict(e.attrs))
        if call.op not in RULES:
            return call
        return self.lower(call, s)

    def fold(self, e: ir.Call, args: tuple[ir.Arg, ...]) -> ir.Expr | None:
        """A projection of a rule's MakeTuple (directly or through a tracked variable): the element."""
        if e.op is not Op.TUPLE_GET_ITEM:
            return None
        src = args[0]
        elements = (self.tuples.get(src.name) if isinstance(src, ir.Var) else
                    src.args if isinstance(src, ir.Call) and id(src) in self.made else None)
        if elements is None:
            return None
        index = e.attr("index")
        assert isinstance(index, int)
        item = elements[index]
        assert not isinstance(item, ir.ListExpr)
        return item

    def track(self, var: ir.Var, value: ir.Expr) -> None:
        """Record ``var`` as a rule's tuple (or an alias of one); any other binding forgets it."""
        if isinstance(value, ir.Call) and id(value) in self.made:
            self.tuples[var.name] = value.args
        elif isinstance(value, ir.Var) and value.name in self.tuples:
            self.tuples[var.name] = self.tuples[value.name]
        else:
            self.tuples.pop(var.name, None)

    def arg(self, a: ir.Arg, s: ir.Stmt) -> ir.Arg:
        if isinstance(a, ir.ListExpr):
            items = tuple(self.expr(i, s) for i in a.items)
            return a if all(x is y for x, y in zip(items, a.items, strict=True)) else ir.ListExpr(items)
        return self.expr(a, s)

    def lower(self, call: ir.Call, s: ir.Stmt) -> ir.Expr:
        where = self.where(s)
        target = s.var.name if isinstance(s, ir.Assign) else ""
        ctx = LoweringContext(self.program, call.op, where, self.roots, self.options.variant, target,
                              self.options.backend, _call_group(self.program, self.roots, call, where))
        rule = RULES[call.op]
        origin = getattr(s, "origin", None)
        # Every statement of the recipe points at the user's line of the composite it came from.
        self.fb.origin = None if origin is None else ir.SourcePos(origin.file, origin.line, call.op.text)
        try:
            with self.fb.block() as emitted:
                lowered = rule(call, self.fb, ctx)
        finally:
            self.fb.origin = None
        for st in emitted:
            self.fb.emit(st)
        if isinstance(lowered.value, ir.Call) and lowered.value.op is Op.TUPLE_MAKE:
            self.made.add(id(lowered.value))
        counts = Counter(c.op.text for c in walk_calls(emitted))
        self.reports.append(CallReport(self.fn.name, where, call, lowered, tuple(sorted(counts.items()))))
        return lowered.value

    def where(self, s: ir.Stmt) -> str:
        text = format_expr(s.call) if isinstance(s, ir.Eval) else (
            f"{s.var.name} = {format_expr(s.value)}" if isinstance(s, ir.Assign) else type(s).__name__.lower())
        return f"func {self.fn.name} > {' > '.join(self.path)}: {text}"



__all__ = [
    "CallReport", "LowerCompositeOps", "LoweringReport", "composite_calls", "lower_composite_ops",
    "lower_composite_ops_with_report",
]
