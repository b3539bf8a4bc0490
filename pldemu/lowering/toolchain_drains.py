"""InsertToolchainDrains: the drains the device toolchain emits by itself, as a pass step of their own
(facts and sources: shared/reference/fences.md, sections 2.4 and 3).

Since PTOAS#711 (fixed in #712/#718) PTOAS lowers every ``tnotify`` after a ``PIPE_ALL`` pipe drain:
"the signal can overtake an in-flight pto.tload / pto.tstore (local or peer)" otherwise. pypto does
not emit it (pypto#2591 removed its own barrier before TNOTIFY: the drain is PTOAS's job), so it is
not in the program InsertCommFence marks; this pass puts it there, as ``system.bar_all()``
immediately before every ``pld.system.notify`` of kernel code, so that a run under ``--visibility
fenced`` runs what today's pypto + PTOAS run. The drain completes the rank's DMA reads (a
``remote_load``, a get's source, a ``tile.load`` of a window has its bytes); its writes are issued,
not yet visible to other ranks (PTOAS#744: that takes the fence InsertCommFence places).

``--no-insert-fences`` turns this step off with InsertCommFence: the program runs as written. The
pass is idempotent (a notify already preceded by ``system.bar_all()`` is left alone). A drain
carries the notify's origin with ``placed_by`` :data:`PLACED_BY`, so ``pldemu lower --fences``
and the reports say where it came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import ClassVar

from pldemu.ir import Op, Program
from pldemu.ir.nodes import Assign, Eval, For, Function, If, Seq, SourcePos, Stmt, Task, TaskScope, While
from pldemu.ir.signatures import make_call
from pldemu.lowering.insert_comm_fence import InsertCommFence

PLACED_BY = "PTOAS (its drain before tnotify, PTOAS#718)"
"""``SourcePos.placed_by`` of the drains this pass places."""


def drain_stmt(origin: SourcePos | None = None) -> Eval:
    """``system.bar_all()`` as a statement."""
    return Eval(make_call(Op.BAR_ALL, []), origin)


def _is(s: Stmt | None, op: Op) -> bool:
    return isinstance(s, Eval) and s.call.op is op


@dataclass(frozen=True)
class InsertToolchainDrains:
    """The toolchain's drain before every notify (see the module docstring)."""

    name: ClassVar[str] = "insert-toolchain-drains"

    host: frozenset[str] = field(default_factory=frozenset)
    """Functions that are not kernel (InCore) code and stay untouched."""

    def apply(self, program: Program) -> Program:
        """Drain before every notify of every kernel function of ``program``."""
        functions = tuple(f if f.name in self.host else Function(f.name, f.params, _drained(f.body))
                          for f in program.functions)
        return Program(program.name, program.buffers, functions, program.entry, program.nranks)


def _drained(body: Seq) -> Seq:
    return Seq(tuple(_stmts(body.stmts)))


def _stmts(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    prev: Stmt | None = None
    for s in stmts:
        if _is(s, Op.NOTIFY) and not _is(prev, Op.BAR_ALL):
            origin = s.origin if isinstance(s, (Assign, Eval)) else None
            yield drain_stmt(SourcePos("", 0, placed_by=PLACED_BY) if origin is None
                             else replace(origin, placed_by=PLACED_BY))
        yield _recurse(s)
        prev = s


def _recurse(s: Stmt) -> Stmt:
    if isinstance(s, Seq):
        return _drained(s)
    if isinstance(s, (For, Task, TaskScope)):
        return replace(s, body=_drained(s.body))
    if isinstance(s, While):
        return While(s.cond, _drained(s.body))
    if isinstance(s, If):
        return If(s.cond, _drained(s.then), None if s.orelse is None else _drained(s.orelse))
    return s


def insert_fences(program: Program, host: frozenset[str] = frozenset()) -> Program:
    """What ``--visibility fenced`` runs unless ``--no-insert-fences``: InsertCommFence, then the
    toolchain's drains (both idempotent, so the result is a fixed point of this function)."""
    return InsertToolchainDrains(host).apply(InsertCommFence(host).apply(program))


__all__ = ["PLACED_BY", "InsertToolchainDrains", "drain_stmt", "insert_fences"]
