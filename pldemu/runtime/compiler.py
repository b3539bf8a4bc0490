"""Preparing a function for execution: each IR function becomes one generated Python function.

Done once per function (and once more for the traced variant when listeners or monitors are
attached), so running never re-walks the IR: variables become Python locals, loops Python loops, ``if``
an ``if``, ``return`` a ``return``; every call site calls its handler directly
(``_h3(_m, _s3, (args))``), attributes are decoded and constant expressions and all-literal lists
(static shapes, offsets) evaluated ahead. Running a statement costs what the same Python statement
costs: no closure per statement or expression, no frame list.

Safety: the source is made of the generator's own text only. Variable names are ``v<slot>_<name>``
with the IR name reduced to ASCII word characters; handlers, call sites, the machine and every
constant that is not a plain int or bool are bound in the generated function's globals (whose
builtins are empty) and never spelled in the source. ``CompiledFunction.source`` is the text.

Locations: every generated line belongs to one IR statement, whose location (``FUNC:LINE TEXT``, LINE
in the printed program) a line table holds. Nothing is spent per statement; when the body raises,
``CompiledFunction.run`` reads the line of the innermost generated frame from the traceback and
re-raises through ``locate`` (what the statement's own ``try`` used to do), so locations cost nothing
until something fails.

Python refuses more than 20 nested loops and 100 indentation levels, the IR allows 100 levels of
nesting: a block nested deeper than ``_MAX_DEPTH`` is outlined into a generated function of its own,
and a function with such blocks keeps its variables in the frame list (``f[slot]``) so that the
outlined parts share them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FunctionType, TracebackType
from typing import Any

import numpy as np

from pldemu import ir
from pldemu.ir.nodes import BinOpKind, FoldError, NotStatic, evaluate, fold_binop
from pldemu.ir.printer import format_function, format_task_head
from pldemu.ir.walk import expr_calls, stmt_bodies, walk_stmts
from pldemu.runtime.errors import ProgramError, locate
from pldemu.runtime.groups import peer_mapper
from pldemu.runtime.machine import Machine
from pldemu.runtime.monitor import Monitor
from pldemu.runtime.ops import BINDINGS, HANDLERS, SIGNAL_OPS, Binding, decode_attrs
from pldemu.runtime.sites import CallSite, Location, OpEvent
from pldemu.runtime.taskplan import TaskPlan, task_plan

Frame = list[Any]
Listener = Callable[[OpEvent], None]

_MAX_DEPTH = 12
"""Blocks nested inside one generated Python function before the next one is outlined (Python's
limits: 20 nested loops, 100 indentation levels)."""


@dataclass(frozen=True)
class CompiledFunction:
    """A function ready to run: ``run(frame)`` with a frame of ``nslots`` values (slot 0 ``NR``, then
    the buffers; the rest ``None``) returns the function's return values (``()`` without a return)."""

    name: str
    body: Callable[[Frame], tuple[Any, ...] | None]
    nslots: int
    slot_names: tuple[str, ...]
    source: str
    """The generated Python source (for inspection; it is compiled once, here)."""
    lines: Mapping[int, str]
    """Generated line -> location of the IR statement it belongs to."""
    codes: frozenset[CodeType]
    numeric: bool = True
    """Whether running it may compute on numpy data (so ``run()`` silences numpy's floating-point
    warnings around it); False when every call site is a plain handler of ``ops.SIGNAL_OPS``."""
    origins: Mapping[int, str] = field(default_factory=dict)
    """Generated line -> the user's line (``FILE:LINE``) of the op statement it belongs to, where known."""

    def run(self, frame: Frame) -> tuple[Any, ...]:
        """Execute the body; an error leaves located at the statement that raised it. FP16 overflow to
        inf, NaN poison in casts etc. are program behaviour, not warnings: numpy's floating-point
        warnings are silenced around a body that may compute on numpy data (:attr:`numeric`)."""
        try:
            if self.numeric:
                with np.errstate(all="ignore"):
                    out = self.body(frame)
            else:
                out = self.body(frame)
        except Exception as err:
            where = self.where(err.__traceback__)
            if where is None:
                raise
            new = locate(err, where, self.origins.get(self.line_of(err.__traceback__) or 0))
            if new is err:
                raise
            raise new from err
        return () if out is None else out

    def where(self, tb: TracebackType | None) -> str | None:
        """The location of the statement the innermost generated frame of ``tb`` was executing."""
        line = self.line_of(tb)
        return None if line is None else self.lines.get(line)

    def line_of(self, tb: TracebackType | None) -> int | None:
        """The generated line the innermost generated frame of ``tb`` was executing."""
        line = None
        while tb is not None:
            if tb.tb_frame.f_code in self.codes:
                line = tb.tb_lineno
            tb = tb.tb_next
        return line


def function_lines(program: ir.Program) -> dict[str, int]:
    """Line of each function's header in ``format_program(program)``: the head line, one per buffer,
    then per function a blank line and its own lines."""
    out: dict[str, int] = {}
    line = 1 + len(program.buffers)
    for f in program.functions:
        out[f.name] = line + 2
        line += 1 + len(format_function(f, 1).splitlines())
    return out


_STATIC = object()
"""Marker: not a compile-time constant."""

_NORET = object()
"""What an outlined block returns when it ran to its end (a ``return`` returns a tuple)."""

_WORD = re.compile(r"[^A-Za-z0-9_]")

_INFIX: Mapping[BinOpKind, str] = {
    BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.FLOORDIV: "//",
    BinOpKind.MOD: "%", BinOpKind.EQ: "==", BinOpKind.NE: "!=", BinOpKind.LT: "<", BinOpKind.LE: "<=",
    BinOpKind.GT: ">", BinOpKind.GE: ">=",
}
"""Python operators with exactly ``fold_binop``'s semantics; MIN/MAX call the builtins, AND/OR (both
operands evaluated, then ``bool``) go through ``fold_binop``."""

_BUILTINS: Mapping[str, Any] = {"_range": range, "_min": min, "_max": max, "_fold": fold_binop,
                                "_NORET": _NORET}


def _ident(name: str) -> str:
    """A Python identifier's tail from an IR name: ASCII word characters only, at most 24."""
    return _WORD.sub("_", name)[:24]


def _literal(value: Any) -> str | None:
    """``value`` as Python source if it is a plain int (64-bit) or bool, or a tuple of them, else None."""
    if type(value) is bool or (type(value) is int and -(2**63) <= value < 2**63):  # huge ints: bound
        return repr(value) if value >= 0 else f"({value!r})"
    if type(value) is tuple:
        items = [_literal(v) for v in value]
        return _tuple(items) if all(i is not None for i in items) else None  # type: ignore[arg-type]
    return None


def _block_depth(s: ir.Stmt) -> int:
    """Blocks nested in ``s`` (``s`` itself counts if it has a body; a bare ``Seq`` does not)."""
    inner = max((_block_depth(t) for body in stmt_bodies(s) for t in body.stmts), default=0)
    return inner + (0 if isinstance(s, ir.Seq) else bool(stmt_bodies(s)))


class _Source:
    """Generated lines with the location each belongs to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.where: list[str | None] = []
        self.origins: dict[int, str] = {}
        """Index in ``lines`` -> the user's line of an op statement's line."""

    def emit(self, indent: int, text: str, where: str | None, origin: ir.SourcePos | None = None) -> None:
        if origin is not None:
            self.origins[len(self.lines)] = str(origin)
        self.lines.append("    " * indent + text)
        self.where.append(where)


class FunctionCompiler:
    """Compiles one function against a machine. ``sites`` is the shared call-site table: the first
    compile of a function appends its sites; a later (traced) compile of the same function reuses
    them in walk order, so site ids are identical on every rank whatever listeners each attaches."""

    def __init__(
        self,
        machine: Machine,
        global_slots: dict[str, int],
        sites: list[CallSite],
        reuse: Sequence[CallSite] | None,
        listeners: list[Listener] | None,
        monitors: Sequence[Monitor] = (),
    ) -> None:
        self.m = machine
        self.slots = dict(global_slots)
        self.sites = sites
        self._reuse = list(reuse) if reuse is not None else None
        self._cursor = 0
        self.new_sites: list[CallSite] = []
        self._met: dict[tuple[ir.Op, Location], int] = {}
        """How many calls of each op and location this compile has met (the pool's index of the next)."""
        self.listeners = listeners
        self.monitors = tuple(monitors)
        self.func = ""
        self.line = 0
        self._src = _Source()
        self._outlined: list[_Source] = []
        self._bound: dict[str, Any] = {"_m": machine, **_BUILTINS}
        self._temps = 0
        self._in_frame = False
        self._numeric = False
        self._buffers = {b.name: b for b in machine.buffers}
        self._grouped = any(b.group is not None for b in machine.buffers)
        self._rebound: frozenset[str] = frozenset()
        self._plan: TaskPlan | None = None
        """How the function's tasks are submitted (``runtime.taskplan``); None: no task, or program order with
        no task-aware check (``taskplan.graph_needed``)."""
        self._in_task = False

    # -- entry -----------------------------------------------------------------------------------

    def compile(self, fn: ir.Function, header_line: int) -> CompiledFunction:
        self.func = fn.name
        self.line = header_line
        self._in_frame = _block_depth(fn.body) > _MAX_DEPTH
        self._rebound = _bound_names(fn)
        self._plan = task_plan(fn, self.m) if not self._in_frame else None
        for p in fn.params:
            self._slot(p.name)
        self._block(fn.body, 1, 0)
        if self._plan is not None:
            self._drain(1)  # the dispatch completes when every task has
        names = [""] * len(self.slots)
        for name, slot in self.slots.items():
            names[slot] = name
        entry = "f_" + _ident(fn.name)
        head = _Source()
        head.emit(0, f"def {entry}(f):", None)
        if not self._in_frame:
            head.emit(1, _tuple([self._var(n) for n in names]) + " = f", None)
        source, lines, origins = _assemble([head, self._src, *self._outlined])
        try:
            code = compile(source, f"<pldemu {_ident(fn.name)}>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as err:
            raise ProgramError(f"function {fn.name} is too large or deep to run ({type(err).__name__})") from None
        namespace: dict[str, Any] = {"__builtins__": {}, **self._bound}
        exec(code, namespace)  # our own source: identifiers and literals only (module docstring)
        codes = frozenset(_nested_codes(v.__code__ for v in namespace.values() if isinstance(v, FunctionType)
                                        and v.__code__.co_filename == code.co_filename))
        return CompiledFunction(fn.name, namespace[entry], len(self.slots), tuple(names), source, lines, codes,
                                self._numeric, origins)

    def _slot(self, name: str) -> int:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = len(self.slots)
        return slot

    def _var(self, name: str) -> str:
        slot = self.slots[name]
        return f"f[{slot}]" if self._in_frame else f"v{slot}_{_ident(name)}"

    def _loc(self, text: str, origin: ir.SourcePos | None = None) -> Location:
        """The statement's location. Its call sites report it whole, the user's line included; a
        program error is prefixed with its printed part only (``Location.printed``)."""
        return Location(self.func, self.line, text, origin)

    def _bind(self, prefix: str, value: Any) -> str:
        name = f"{prefix}{len(self._bound)}"
        self._bound[name] = value
        return name

    # -- statements --------------------------------------------------------------------------------

    def _block(self, s: ir.Seq, indent: int, depth: int) -> None:
        """Emit ``s`` at ``indent``; ``depth`` blocks deep in the current Python function."""
        if depth >= _MAX_DEPTH and any(stmt_bodies(t) for t in s.stmts):
            self._outline(s, indent)
            return
        mark = len(self._src.lines)
        for st in s.stmts:
            self._STMTS[type(st)](self, st, indent, depth)
        if len(self._src.lines) == mark:
            self._src.emit(indent, "pass", None)

    def _outline(self, s: ir.Seq, indent: int) -> None:
        """Emit ``s`` as a generated function of its own, called here (see the module docstring)."""
        outer, self._src = self._src, _Source()
        name = f"_b{len(self._outlined)}"
        self._outlined.append(self._src)
        self._src.emit(0, f"def {name}(f):", None)
        self._block(s, 1, 0)
        self._src.emit(1, "return _NORET", None)
        self._src = outer
        self._src.emit(indent, f"_r = {name}(f)", None)
        self._src.emit(indent, "if _r is not _NORET:", None)
        self._src.emit(indent + 1, "return _r", None)

    def _seq(self, s: ir.Seq, indent: int, depth: int) -> None:
        for st in s.stmts:
            self._STMTS[type(st)](self, st, indent, depth)

    def _drain(self, indent: int, stmt: ir.Stmt | ir.Expr | None = None) -> None:
        """In a function that submits tasks, the Orchestration waits for them before ``stmt`` touches a tensor
        (before a ``return`` and at the end: always)."""
        if self._plan is None or self._in_task:
            return
        names = self._plan.awaited(stmt) if stmt is not None else None
        if names and all(n in self.slots for n in names):  # pl.read / pl.write: only their tensors' writers (pypto's get_tensor_data / set_tensor_data)
            args = "".join(f"{self._var(n)}, " for n in names)
            self._src.emit(indent, f"{self._bind('_aw', self._plan.scheduler.await_writers)}(({args}))", None)
        elif stmt is None or self._plan.touches(stmt):
            self._src.emit(indent, f"{self._bind('_dr', self._plan.scheduler.drain)}()", None)

    def _assign(self, s: ir.Assign, indent: int, depth: int) -> None:
        self.line += 1
        self._drain(indent, s.value)
        loc = self._loc(f"{s.var.name} = {ir.format_expr(s.value)}", s.origin)
        value = self._top(s.value, loc, indent)
        self._slot(s.var.name)
        self._src.emit(indent, f"{self._var(s.var.name)} = {value}", loc.printed, loc.origin)

    def _eval(self, s: ir.Eval, indent: int, depth: int) -> None:
        self.line += 1
        self._drain(indent, s.call)
        loc = self._loc(ir.format_expr(s.call), s.origin)
        self._src.emit(indent, self._top(s.call, loc, indent), loc.printed, loc.origin)

    def _for(self, s: ir.For, indent: int, depth: int) -> None:
        self.line += 1
        loc = self._loc(f"for {s.var.name} in {s.kind.value}({ir.format_expr(s.start)}, {ir.format_expr(s.stop)}, "
                        f"{ir.format_expr(s.step)})")
        start, stop, step = self._operands((s.start, s.stop, s.step), loc, indent)
        self._slot(s.var.name)
        self._src.emit(indent, f"for {self._var(s.var.name)} in _range({start}, {stop}, {step}):", loc.printed)
        self._block(s.body, indent + 1, depth + 1)
        self.line += 1  # closing brace

    def _while(self, s: ir.While, indent: int, depth: int) -> None:
        self.line += 1
        loc = self._loc(f"while {ir.format_expr(s.cond)}")
        self._src.emit(indent, "while True:", loc.printed)
        self._drain(indent + 1, s.cond)
        cond = self._top(s.cond, loc, indent + 1)
        self._src.emit(indent + 1, f"if not {cond}:", loc.printed)
        self._src.emit(indent + 2, "break", loc.printed)
        self._block(s.body, indent + 1, depth + 1)
        self.line += 1

    def _if(self, s: ir.If, indent: int, depth: int) -> None:
        self.line += 1
        loc = self._loc(f"if {ir.format_expr(s.cond)}")
        self._drain(indent, s.cond)
        cond = self._top(s.cond, loc, indent)
        self._src.emit(indent, f"if {cond}:", loc.printed)
        self._block(s.then, indent + 1, depth + 1)
        if s.orelse is not None:
            self.line += 1  # "} else {"
            self._src.emit(indent, "else:", loc.printed)
            self._block(s.orelse, indent + 1, depth + 1)
        self.line += 1

    def _return(self, s: ir.Return, indent: int, depth: int) -> None:
        self.line += 1
        loc = self._loc(("return " + ", ".join(ir.format_expr(v) for v in s.values)).rstrip())
        self._drain(indent)
        values = self._operands(s.values, loc, indent)
        self._src.emit(indent, "return " + _tuple(values), loc.printed)

    def _task(self, s: ir.Task, indent: int, depth: int) -> None:
        """A task: submitted to the rank's scheduler (``runtime.tasksched``), or run at its submission in
        program order (one legal schedule: every earlier task has completed): its id, then its blocks one
        after another."""
        plan = self._plan
        if plan is not None and plan.concurrent(s):
            self._submit(plan, s, indent, depth)
            return
        self.line += 1
        loc = self._loc(format_task_head(s), s.origin)
        if s.tid is not None:
            ids = self.m.task_ids if plan is None else plan.scheduler.inline
            self._slot(s.tid.name)
            self._src.emit(indent, f"{self._var(s.tid.name)} = {self._bind('_tid', ids)}()", loc.printed)
        elif plan is not None:
            self._src.emit(indent, f"{self._bind('_tid', plan.scheduler.inline)}()", loc.printed)
        if s.kind is ir.TaskKind.DUMMY:
            return
        blocks = self._top(s.blocks, loc, indent)
        if blocks == "1" and s.block_var is None:
            self._block(s.body, indent, depth)
        else:
            name = s.block_var.name if s.block_var is not None else f"_block{self.line}"
            self._slot(name)
            self._src.emit(indent, f"for {self._var(name)} in _range(0, {blocks}, 1):", loc.printed)
            self._block(s.body, indent + 1, depth + 1)
        self.line += 1  # closing brace

    def _submit(self, plan: TaskPlan, s: ir.Task, indent: int, depth: int) -> None:
        """The task's body as a nested function of its block index, its captured variables bound now (what
        pypto passes a task is their values at submission), submitted with its arguments and deps."""
        self.line += 1
        loc = self._loc(format_task_head(s), s.origin)
        captured = [n for n in plan.captures(s) if n in self.slots]
        deps = self._operands(s.deps, loc, indent)
        blocks = self._top(s.blocks, loc, indent)
        fn = f"_tk{self.line}"
        block = s.block_var.name if s.block_var is not None else f"_block{self.line}"
        self._slot(block)
        params = [self._var(block), *(f"{self._var(n)}={self._var(n)}" for n in captured)]
        self._src.emit(indent, f"def {fn}({', '.join(params)}):", loc.printed)
        outer, self._in_task = self._in_task, True
        self._block(s.body, indent + 1, depth + 1)
        self._in_task = outer
        info = plan.info(s, str(loc), lambda n: n in self.slots)
        values = _tuple([self._var(n) for n in info.names]) if info.names else "()"
        submit = f"{self._bind('_sub', plan.scheduler.submit)}({self._bind('_ti', info)}, {values}, " \
                 f"{_tuple(deps) if deps else '()'}, {blocks}, {fn})"
        if s.tid is not None:
            self._slot(s.tid.name)
            submit = f"{self._var(s.tid.name)} = {submit}"
        self._src.emit(indent, submit, loc.printed)
        if s.kind is not ir.TaskKind.DUMMY:
            self.line += 1  # closing brace (a dummy task is one line)

    def _task_scope(self, s: ir.TaskScope, indent: int, depth: int) -> None:
        self.line += 1
        self._block(s.body, indent, depth)
        self.line += 1

    _STMTS: Mapping[type, Callable[..., None]] = {
        ir.Assign: _assign, ir.Eval: _eval, ir.Seq: _seq, ir.For: _for, ir.While: _while, ir.If: _if, ir.Return: _return,
        ir.Task: _task, ir.TaskScope: _task_scope,
    }
    """The statement dispatch: one emitter per statement kind."""

    # -- expressions -------------------------------------------------------------------------------

    def static(self, e: ir.Expr | ir.ListExpr) -> Any:
        """The value of ``e`` if it is known before running (literals, all-literal lists and
        arithmetic on them), else the ``_STATIC`` marker."""
        try:
            return evaluate(e)
        except (NotStatic, FoldError):
            return _STATIC  # a fault is left to run time, where it gets a location

    def _top(self, e: ir.Expr | ir.ListExpr, loc: Location, indent: int) -> str:
        """Source of a statement's own expression: a call stays in the statement's line, calls
        nested in it are evaluated into temporaries on the lines before."""
        text, _ = self._expr(e, loc, indent, top=True)
        return text

    def _expr(self, e: ir.Expr | ir.ListExpr, loc: Location, indent: int, top: bool = False) -> tuple[str, bool]:
        """Source of ``e`` and whether evaluating it is free of effects and faults (names,
        literals), in which case it may be evaluated later than where it stands."""
        value = self.static(e)
        if value is not _STATIC:
            literal = _literal(value)
            return (literal, True) if literal is not None else (self._bind("_k", value), True)
        if isinstance(e, ir.Var):
            if e.name not in self.slots:
                raise ProgramError(f"{e.name} is used before it is defined", loc.printed)
            return self._var(e.name), True
        if isinstance(e, ir.ListExpr):
            return _tuple(self._operands(e.items, loc, indent)), False
        if isinstance(e, ir.BinOp):
            if e.op.is_truncating:
                return self._truncating(e, loc, indent), False
            lhs, rhs = self._operands((e.lhs, e.rhs), loc, indent)
            infix = _INFIX.get(e.op)
            if infix is not None:
                return f"({lhs} {infix} {rhs})", False
            if e.op.is_function:
                return f"_{e.op.value}({lhs}, {rhs})", False
            return f"_fold({self._bind('_op', e.op)}, {lhs}, {rhs})", False
        if isinstance(e, ir.Call):
            text = self._call(e, loc, indent)
            return (text, False) if top else (self._temp(text, loc, indent), True)
        raise ProgramError(f"unknown expression {type(e).__name__}", loc.printed)

    def _truncating(self, e: ir.BinOp, loc: Location, indent: int) -> str:
        """``tdiv`` / ``trem``: the floor operator inline where it agrees (dividend >= 0 < divisor), else the
        site's function from ``Machine.truncations``, which records a value that differs from floor
        semantics. An operand that is an expression is evaluated once, into a ``:=`` name."""
        texts = self._operands((e.lhs, e.rhs), loc, indent)
        first, then = [], []
        for operand, text in zip((e.lhs, e.rhs), texts, strict=True):
            if isinstance(operand, ir.BinOp) and self.static(operand) is _STATIC:
                self._temps += 1
                name = f"_w{self._temps}"
                first.append(f"({name} := {text})")
                then.append(name)
            else:
                first.append(text)
                then.append(text)
        # A chained comparison would skip the divisor when the dividend is negative: evaluate both.
        cond = f"{first[0]} >= 0 < {first[1]}" if first[1] == then[1] else f"({first[0]} >= 0) & ({first[1]} > 0)"
        origin = str(loc.origin) if loc.origin is not None else ""
        check = self._bind("_tq", self.m.truncations.site(e.op, ir.format_expr(e), str(loc), origin))
        floor = _INFIX[BinOpKind.FLOORDIV if e.op is BinOpKind.TDIV else BinOpKind.MOD]
        return f"({then[0]} {floor} {then[1]} if {cond} else {check}({then[0]}, {then[1]}))"

    def _operands(self, exprs: Sequence[ir.Expr | ir.ListExpr], loc: Location, indent: int) -> list[str]:
        """Sources of ``exprs``, evaluated left to right: an operand standing before one that contains a
        call is evaluated into a temporary first, unless it is effect- and fault-free."""
        last_call = max((i for i, e in enumerate(exprs) if next(expr_calls(e), None) is not None), default=-1)
        out = []
        for i, e in enumerate(exprs):
            text, pure = self._expr(e, loc, indent)
            out.append(text if pure or i >= last_call else self._temp(text, loc, indent))
        return out

    def _temp(self, text: str, loc: Location, indent: int) -> str:
        self._temps += 1
        name = f"_t{self._temps}"
        self._src.emit(indent, f"{name} = {text}", loc.printed)
        return name

    def _site(self, call: ir.Call, loc: Location) -> CallSite:
        if self._reuse is not None:
            site = self._reuse[self._cursor]
            self._cursor += 1
            assert site.op is call.op and site.location == loc, "call sites must be walked in the same order"
            return site
        key = (call.op, loc)
        nth = self._met[key] = self._met.get(key, -1) + 1
        pooled = self.m.site_pool.setdefault((*key, nth), [])
        found = next((p for p in pooled if p.call == call), None)  # a reloaded program's call: its site as it was
        site = found if found is not None else CallSite(len(self.sites), call.op, call, loc, decode_attrs(call))
        if found is None:
            self.sites.append(site)
            pooled.append(site)
        self.new_sites.append(site)
        return site

    def _call(self, call: ir.Call, loc: Location, indent: int) -> str:
        deferred = False
        if call.op is ir.Op.DEFER_WAIT:
            # Run inline (program order, no scheduler) a deferred wait is the wait itself: what follows it is scalar
            # bookkeeping only (ir.tasks), so only when the core is freed differs. Submitted, the scheduler
            # runs the wait once its condition holds, after the block has ended.
            call = ir.Call(ir.Op.WAIT, call.args, call.attrs, call.type)
            deferred = self._plan is not None and self._in_task
        op = call.op
        if op.is_composite:
            what = "collective" if op.is_collective else "tile op"
            raise ProgramError(f"{op.text} is a composite {what}: lower the program first "
                               f"(pldemu.lowering.lower_composite_ops) before running it", loc.printed)
        handler = self.m.overrides.get(op) or HANDLERS[op]
        site = self._site(call, loc)  # before the arguments: site ids in the order they always had
        # Only the monitors that asked for this op are compiled in; without any, nothing changes.
        monitors = tuple(mon for mon in self.monitors if mon.wants(op))
        observed = bool(monitors) or self.listeners is not None
        # Listeners, monitors and overriding handlers may compute on numpy data whatever the op.
        self._numeric |= observed or op not in SIGNAL_OPS or handler is not HANDLERS[op]
        # A program with comm sub-domains: a peer operand may be group-local (pldemu.runtime.groups).
        mapper = peer_mapper(op) if self._grouped else None
        if deferred:
            return self._deferred(call, site, handler, monitors, loc, indent)
        binding = BINDINGS.get(op) if not observed and handler is HANDLERS[op] and mapper is None else None
        if binding is not None:
            bound = self._bound_call(binding, call, site, loc, indent)
            if bound is not None:
                return bound
        args = _tuple(self._operands(call.args, loc, indent))
        if mapper is not None:
            args = f"{self._bind('_g', mapper)}({args})"
        if observed:
            run = _observed(self.m, site, handler, self.listeners or (), monitors)
            return f"{self._bind('_c', run)}({args})"
        return f"{self._bind('_h', handler)}(_m, {self._bind('_s', site)}, {args})"

    def _deferred(self, call: ir.Call, site: CallSite, handler: Any, monitors: tuple[Monitor, ...], loc: Location,
                  indent: int) -> str:
        """A ``defer_wait`` in a submitted task: its condition registered on the task; the wait (its handler
        behind the listeners and monitors, as any wait) runs when the scheduler completes the task."""
        assert self._plan is not None
        args = _tuple(self._operands(call.args, loc, indent))
        if monitors or self.listeners is not None:
            run = _observed(self.m, site, handler, self.listeners or (), monitors)
        else:
            m = self.m

            def run(values: tuple[Any, ...]) -> Any:
                return handler(m, site, values)
        defer = self._bind("_dw", self._plan.scheduler.defer)
        return f"{defer}({self._bind('_s', site)}, {args}, {self._bind('_r', run)})"

    def _bound_call(self, binding: Binding, call: ir.Call, site: CallSite, loc: Location, indent: int) -> str | None:
        """The call through its site's specialised entry (``ops.BINDINGS``), or None when the site is
        not eligible: its first operand must name a program buffer the function never rebinds (so it
        is that buffer on every execution), and its index list be spelled out with one item per dim."""
        sig, index = call.args[0], call.args[binding.index_arg]
        buf = self._buffers.get(sig.name) if isinstance(sig, ir.Var) and sig.name not in self._rebound else None
        if buf is None or not isinstance(index, ir.ListExpr) or len(index.items) != len(buf.shape):
            return None
        entry = binding.bind(self.m, site, buf)
        if entry is None:
            return None
        pos = binding.index_arg
        operands = self._operands([*call.args[1:pos], *index.items, *call.args[pos + 1:]], loc, indent)
        return f"{self._bind('_b', entry)}({', '.join(operands)})"


def _bound_names(fn: ir.Function) -> frozenset[str]:
    """Every name ``fn`` binds: its parameters, assignment targets and loop variables."""
    names = {p.name for p in fn.params}
    for st in walk_stmts(fn.body.stmts):
        if isinstance(st, (ir.Assign, ir.For)):
            names.add(st.var.name)
    return frozenset(names)


def _nested_codes(codes: Iterable[CodeType]) -> Iterator[CodeType]:
    """``codes`` and every code object defined inside them (a submitted task's body is a nested function)."""
    for code in codes:
        yield code
        yield from _nested_codes(c for c in code.co_consts if isinstance(c, CodeType))


def _tuple(items: Sequence[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"


def _assemble(parts: Sequence[_Source]) -> tuple[str, dict[int, str], dict[int, str]]:
    """One source text from ``parts``, its line table (1-based line -> location) and the user's lines of
    its op statements (1-based line -> ``FILE:LINE``)."""
    lines: list[str] = []
    table: dict[int, str] = {}
    origins: dict[int, str] = {}
    for part in parts:
        for i, (text, where) in enumerate(zip(part.lines, part.where, strict=True)):
            lines.append(text)
            if where is not None:
                table[len(lines)] = where
            if i in part.origins:
                origins[len(lines)] = part.origins[i]
    return "\n".join(lines) + "\n", table, origins


def _observed(m: Machine, site: CallSite, handler: Any, listeners: Sequence[Listener],
              monitors: tuple[Monitor, ...]) -> Callable[[tuple[Any, ...]], Any]:
    """A call site's handler behind its listeners and bracketed by its monitors (see
    ``pldemu.runtime.monitor``); listeners come first."""
    rank, op = m.rank, site.op
    if not monitors:

        def run_traced(values: tuple[Any, ...]) -> Any:
            event = OpEvent(rank, op, values, site)
            for fn in listeners:
                fn(event)
            return handler(m, site, values)

        return run_traced
    befores = tuple(mon.before for mon in monitors)
    afters = tuple(mon.after for mon in reversed(monitors))
    fails = tuple(mon.failed for mon in reversed(monitors))

    def run_monitored(values: tuple[Any, ...]) -> Any:
        event = OpEvent(rank, op, values, site)
        for fn in listeners:
            fn(event)
        for before in befores:
            before(event)
        try:
            result = handler(m, site, values)
        except BaseException as err:
            for fail in fails:
                fail(event, err)
            raise
        for after in afters:
            after(event, result)
        return result

    return run_monitored


__all__ = ["CompiledFunction", "FunctionCompiler", "Listener", "function_lines"]
