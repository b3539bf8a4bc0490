"""Preparing a function for execution: IR statements become nested closures over a slot frame.

Done once per function (and once more for the traced variant when a listener is attached), so running
never re-walks type metadata: variables are resolved to frame slots, handlers to functions, attributes
are decoded, constant expressions and all-literal lists (static shapes, offsets) are evaluated ahead.
The frame is a list: slot 0 is ``NR``, then one slot per buffer, then the function's variables.

Every statement knows its location (``FUNC:LINE TEXT``, LINE in the printed program) and re-raises
errors with it. Statements execute inside a zero-cost ``try`` (Python 3.11), so locations cost nothing
until something fails. ``Return`` unwinds with a private BaseException that only ``run`` catches.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pldemu.ir import (
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
    SourcePos,
    Stmt,
    Var,
    While,
    format_expr,
)
from pldemu.ir.nodes import BinOpKind, FoldError, NotStatic, evaluate, fold_binop
from pldemu.ir.printer import format_function
from pldemu.runtime.errors import ProgramError, locate
from pldemu.runtime.handlers import HANDLERS, decode_attrs
from pldemu.runtime.machine import Machine
from pldemu.runtime.monitor import Monitor
from pldemu.runtime.sites import CallSite, Location, OpEvent

Frame = list[Any]
Getter = Callable[[Frame], Any]
Exec = Callable[[Frame], None]
Listener = Callable[[OpEvent], None]


class ReturnSignal(BaseException):
    """Unwinds a function on ``return`` (a BaseException so no statement's error handler sees it)."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        super().__init__()
        self.values = values


@dataclass(frozen=True)
class CompiledFunction:
    """A function ready to run: call ``body(frame)`` with a frame of ``nslots`` slots."""

    name: str
    body: Exec
    nslots: int
    slot_names: tuple[str, ...]


def function_lines(program: Program) -> dict[str, int]:
    """Line of each function's header in ``format_program(program)``: the head line, one per buffer,
    then per function a blank line and its own lines."""
    out: dict[str, int] = {}
    line = 1 + len(program.buffers)
    for f in program.functions:
        out[f.name] = line + 2
        line += 1 + len(format_function(f, 1).splitlines())
    return out


def _raise_located(err: Exception, where: str) -> NoReturn:
    new = locate(err, where)
    if new is err:
        raise err
    raise new from err


_STATIC = object()
"""Marker: not a compile-time constant."""


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
        self.listeners = listeners
        self.monitors = tuple(monitors)
        self.func = ""
        self.line = 0

    # -- entry -----------------------------------------------------------------------------------

    def compile(self, fn: Function, header_line: int) -> CompiledFunction:
        self.func = fn.name
        self.line = header_line
        for p in fn.params:
            self._slot(p.name)
        body = self.seq(fn.body)
        names = [""] * len(self.slots)
        for name, slot in self.slots.items():
            names[slot] = name
        return CompiledFunction(fn.name, body, len(self.slots), tuple(names))

    def _slot(self, name: str) -> int:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.slots[name] = len(self.slots)
        return slot

    def _loc(self, text: str, origin: SourcePos | None = None) -> Location:
        """The statement's location. Its call sites report it whole, the user's line included; a
        program error is prefixed with its printed part only (``Location.printed``)."""
        return Location(self.func, self.line, text, origin)

    # -- statements --------------------------------------------------------------------------------

    def seq(self, s: Seq) -> Exec:
        stmts = tuple(self.stmt(st) for st in s.stmts)
        if not stmts:
            return _noop
        if len(stmts) == 1:
            return stmts[0]

        def run_seq(f: Frame) -> None:
            for st in stmts:
                st(f)

        return run_seq

    def stmt(self, s: Stmt) -> Exec:
        if isinstance(s, Assign):
            return self._assign(s)
        if isinstance(s, Eval):
            return self._eval(s)
        if isinstance(s, Seq):
            return self.seq(s)
        if isinstance(s, For):
            return self._for(s)
        if isinstance(s, While):
            return self._while(s)
        if isinstance(s, If):
            return self._if(s)
        if isinstance(s, Return):
            return self._return(s)
        raise ProgramError(f"{self.func}: unknown statement {type(s).__name__}")

    def _assign(self, s: Assign) -> Exec:
        self.line += 1
        loc = self._loc(f"{s.var.name} = {format_expr(s.value)}", s.origin)
        value = self.expr(s.value, loc)
        slot = self._slot(s.var.name)
        where = loc.printed

        def run_assign(f: Frame) -> None:
            try:
                f[slot] = value(f)
            except Exception as err:
                _raise_located(err, where)

        return run_assign

    def _eval(self, s: Eval) -> Exec:
        self.line += 1
        loc = self._loc(format_expr(s.call), s.origin)
        call = self.expr(s.call, loc)
        where = loc.printed

        def run_eval(f: Frame) -> None:
            try:
                call(f)
            except Exception as err:
                _raise_located(err, where)

        return run_eval

    def _for(self, s: For) -> Exec:
        self.line += 1
        loc = self._loc(f"for {s.var.name} in range({format_expr(s.start)}, {format_expr(s.stop)}, "
                        f"{format_expr(s.step)})")
        start, stop, step = (self.expr(e, loc) for e in (s.start, s.stop, s.step))
        slot = self._slot(s.var.name)
        body = self.seq(s.body)
        self.line += 1  # closing brace
        where = loc.printed

        def run_for(f: Frame) -> None:
            try:
                trips = range(start(f), stop(f), step(f))
            except Exception as err:
                _raise_located(err, where)
            for i in trips:
                f[slot] = i
                body(f)

        return run_for

    def _while(self, s: While) -> Exec:
        self.line += 1
        loc = self._loc(f"while {format_expr(s.cond)}")
        cond = self.expr(s.cond, loc)
        body = self.seq(s.body)
        self.line += 1
        where = loc.printed

        def run_while(f: Frame) -> None:
            while True:
                try:
                    go = cond(f)
                except Exception as err:
                    _raise_located(err, where)
                if not go:
                    return
                body(f)

        return run_while

    def _if(self, s: If) -> Exec:
        self.line += 1
        loc = self._loc(f"if {format_expr(s.cond)}")
        cond = self.expr(s.cond, loc)
        then = self.seq(s.then)
        orelse: Exec = _noop
        if s.orelse is not None:
            self.line += 1  # "} else {"
            orelse = self.seq(s.orelse)
        self.line += 1
        where = loc.printed

        def run_if(f: Frame) -> None:
            try:
                go = cond(f)
            except Exception as err:
                _raise_located(err, where)
            if go:
                then(f)
            else:
                orelse(f)

        return run_if

    def _return(self, s: Return) -> Exec:
        self.line += 1
        loc = self._loc(("return " + ", ".join(format_expr(v) for v in s.values)).rstrip())
        values = self._tuple([self.expr(v, loc) for v in s.values])
        where = loc.printed

        def run_return(f: Frame) -> None:
            try:
                out = values(f)
            except Exception as err:
                _raise_located(err, where)
            raise ReturnSignal(out)

        return run_return

    # -- expressions -------------------------------------------------------------------------------

    def static(self, e: Expr | ListExpr) -> Any:
        """The value of ``e`` if it is known before running (literals, all-literal lists and
        arithmetic on them), else the ``_STATIC`` marker."""
        try:
            return evaluate(e)
        except (NotStatic, FoldError):
            return _STATIC  # a fault is left to run time, where it gets a location

    def expr(self, e: Expr | ListExpr, loc: Location) -> Getter:
        value = self.static(e)
        if value is not _STATIC:
            return _const(value)
        if isinstance(e, Var):
            slot = self.slots.get(e.name)
            if slot is None:
                raise ProgramError(f"{e.name} is used before it is defined", loc.printed)
            return operator.itemgetter(slot)
        if isinstance(e, ListExpr):
            return self._tuple([self.expr(i, loc) for i in e.items])
        if isinstance(e, BinOp):
            lhs, rhs = self.expr(e.lhs, loc), self.expr(e.rhs, loc)
            return _binop(e.op, lhs, rhs, self.static(e.lhs), self.static(e.rhs))
        if isinstance(e, Call):
            return self._call(e, loc)
        raise ProgramError(f"unknown expression {type(e).__name__}", loc.printed)

    def _site(self, call: Call, loc: Location) -> CallSite:
        if self._reuse is not None:
            site = self._reuse[self._cursor]
            self._cursor += 1
            assert site.op is call.op and site.location == loc, "call sites must be walked in the same order"
            return site
        site = CallSite(len(self.sites), call.op, call, loc, decode_attrs(call))
        self.sites.append(site)
        self.new_sites.append(site)
        return site

    def _call(self, call: Call, loc: Location) -> Getter:
        op = call.op
        if op.is_composite:
            what = "collective" if op.is_collective else "tile op"
            raise ProgramError(f"{op.text} is a composite {what}: lower the program first "
                               f"(pldemu.lowering.lower_composite_ops) before running it", loc.printed)
        handler = self.m.overrides.get(op) or HANDLERS[op]
        site = self._site(call, loc)
        args = self._tuple([self.expr(a, loc) for a in call.args])
        m = self.m
        listeners = self.listeners
        # Only the monitors that asked for this op are compiled in; without any, nothing changes.
        monitors = tuple(mon for mon in self.monitors if mon.wants(op))
        if monitors:
            return _monitored(m, site, args, handler, listeners or (), monitors)
        if listeners is None:
            return lambda f: handler(m, site, args(f))
        rank = m.rank

        def run_traced(f: Frame) -> Any:
            values = args(f)
            event = OpEvent(rank, op, values, site)
            for fn in listeners:
                fn(event)
            return handler(m, site, values)

        return run_traced

    @staticmethod
    def _tuple(getters: list[Getter]) -> Getter:
        """A getter building the tuple of ``getters``' values, specialised by length (no generator)."""
        n = len(getters)
        if n == 0:
            return _const(())
        if n == 1:
            (a,) = getters
            return lambda f: (a(f),)
        if n == 2:
            a, b = getters
            return lambda f: (a(f), b(f))
        if n == 3:
            a, b, c = getters
            return lambda f: (a(f), b(f), c(f))
        if n == 4:
            a, b, c, d = getters
            return lambda f: (a(f), b(f), c(f), d(f))
        items = tuple(getters)
        return lambda f: tuple([g(f) for g in items])


def _monitored(m: Machine, site: CallSite, args: Getter, handler: Any, listeners: Sequence[Listener],
               monitors: tuple[Monitor, ...]) -> Getter:
    """A call site bracketed by monitors (see ``pldemu.runtime.monitor``); listeners still come first."""
    rank, op = m.rank, site.op
    befores = tuple(mon.before for mon in monitors)
    afters = tuple(mon.after for mon in reversed(monitors))
    fails = tuple(mon.failed for mon in reversed(monitors))

    def run_monitored(f: Frame) -> Any:
        values = args(f)
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


_OPERATORS: dict[BinOpKind, Callable[[Any, Any], Any]] = {
    BinOpKind.ADD: operator.add,
    BinOpKind.SUB: operator.sub,
    BinOpKind.MUL: operator.mul,
    BinOpKind.FLOORDIV: operator.floordiv,
    BinOpKind.MOD: operator.mod,
    BinOpKind.MIN: min,
    BinOpKind.MAX: max,
    BinOpKind.EQ: operator.eq,
    BinOpKind.NE: operator.ne,
    BinOpKind.LT: operator.lt,
    BinOpKind.LE: operator.le,
    BinOpKind.GT: operator.gt,
    BinOpKind.GE: operator.ge,
}
"""C-level functions with exactly ``fold_binop``'s semantics; AND/OR keep going through it."""


def _binop(kind: BinOpKind, lhs: Getter, rhs: Getter, lconst: Any, rconst: Any) -> Getter:
    """A getter for ``lhs kind rhs``: the operator is resolved here, not per evaluation (``fold_binop``
    looked it up in an Enum-keyed dict every time), and a constant side is not a call."""
    fn = _OPERATORS.get(kind)
    if fn is None:
        return lambda f: fold_binop(kind, lhs(f), rhs(f))
    if rconst is not _STATIC:
        return lambda f: fn(lhs(f), rconst)
    if lconst is not _STATIC:
        return lambda f: fn(lconst, rhs(f))
    return lambda f: fn(lhs(f), rhs(f))


def _noop(f: Frame) -> None:
    return None


def _const(value: Any) -> Getter:
    return lambda f: value


__all__ = ["CompiledFunction", "FunctionCompiler", "Listener", "ReturnSignal", "function_lines"]
