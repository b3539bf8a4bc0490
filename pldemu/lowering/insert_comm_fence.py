"""InsertCommFence: place the memory-ordering markers a weakly ordered device needs around cross-rank
publishing writes and waits (pypto's pass of the same name, its rules re-stated for pldemu's IR).

The rules are local, one statement at a time, with no control-flow state (the facts and their
sources: shared/reference/fences.md, section 1.3):

* after a **local publishing write**, i.e. a ``tile.store``, ``tensor.write`` or ``pld.tile.get``
  whose destination is a window (data or signal): a region ``system.cacheinvalid(dst, dst.shape,
  [0, ...])`` immediately followed by ``system.fence()``. The region covers the whole tensor; on the
  device it cleans only the line of the view's base (``--visibility fenced`` models that);
* after a **remote write** (``pld.tile.put``): ``system.fence()`` only (the device's codegen emits
  the peer-region invalidate itself; pldemu models it as nothing, which is harmless for DMA writes);
* after a **wait**: a whole-memory ``system.cacheinvalid()``, one per run of consecutive waits, and
  one after a *pure wait loop* (a ``for``/``while`` whose body holds only waits, through ``if`` and
  nested blocks, plus the scalar bookkeeping pldemu's loops carry: assignments of expressions with
  no call) instead of one per trip;
* a **notify** gets nothing: the fence after the write is what releases its data.

Only kernel (InCore) code is marked: every pldemu function is, unless named in ``host`` (functions
that stand for orchestration or host code). The pass is idempotent: a write already followed by its
``cacheinvalid; fence`` pair, a put by its fence, and a wait (or wait run, or pure wait loop) by a
whole-memory ``cacheinvalid()`` are left alone; a write with half of its pair gets the other half
only. So applying the pass twice gives the program applying it once gives, ``drop`` included.
An inserted marker carries the origin of the statement it follows, so every report names the
user's line, with ``placed_by`` set (``placed by InsertCommFence``: the notes summarise such
markers in one line, ``pldemu lower --fences`` names them).

``drop`` (a :class:`DropMarker`) leaves out the k-th marker of one kind, counted in program order
over the whole program: a known-broken placement for the mutant catalogue (``pldemu.mutants``),
made by the pass itself rather than patched into its output. A marker already in place counts as
its site's marker, so the same ``drop`` run again leaves out the same marker. Such a program runs
as written (``insert_fences=False``): running the pass again without ``drop`` would put it back.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import ClassVar

from pldemu.ir import Call, Const, DType, ListExpr, Op, Program, Var
from pldemu.ir.nodes import (
    Assign,
    Eval,
    For,
    Function,
    If,
    Seq,
    SourcePos,
    Stmt,
    Task,
    TaskScope,
    TensorType,
    While,
)
from pldemu.ir.signatures import make_call
from pldemu.ir.walk import stmt_calls, walk_stmts

_LOCAL_WRITE_TARGET = {Op.TILE_STORE: 2, Op.TENSOR_WRITE: 0, Op.GET: 0}
"""Position of the destination of each local write (a publishing write when it is a window)."""


class Marker(enum.Enum):
    """The four markers the pass places, by what they follow."""

    PUT_FENCE = "put-fence"
    """``system.fence()`` after a put."""
    WRITE_INVALIDATE = "write-invalidate"
    """The region ``system.cacheinvalid(dst, ...)`` after a local write into a window."""
    WRITE_FENCE = "write-fence"
    """``system.fence()`` after a local write into a window (after its region cacheinvalid)."""
    WAIT_INVALIDATE = "wait-invalidate"
    """The whole-memory ``system.cacheinvalid()`` after a wait, a run of waits or a pure wait loop."""


@dataclass(frozen=True)
class DropMarker:
    """Leave out marker number ``index`` (0-based, in program order) of kind ``kind``."""

    kind: Marker
    index: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Marker):
            raise ValueError(f"DropMarker.kind must be a Marker, got {self.kind!r}")
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise ValueError(f"DropMarker.index must be an integer >= 0, got {self.index!r}")

    def __str__(self) -> str:
        return f"{self.kind.value} #{self.index}"


def fence_stmt(origin: SourcePos | None = None) -> Eval:
    """``system.fence()`` as a statement."""
    return Eval(make_call(Op.FENCE, []), origin)


def cacheinvalid_all_stmt(origin: SourcePos | None = None) -> Eval:
    """``system.cacheinvalid()`` (the whole memory) as a statement."""
    return Eval(make_call(Op.CACHEINVALID, []), origin)


def cacheinvalid_region_stmt(target: Var, origin: SourcePos | None = None) -> Eval:
    """``system.cacheinvalid(target, target.shape, [0, ...])``: the whole tensor as the region."""
    t = target.type
    assert isinstance(t, TensorType)
    zeros = ListExpr(tuple(Const(0, DType.INDEX) for _ in t.shape))
    return Eval(make_call(Op.CACHEINVALID, [target, ListExpr(tuple(t.shape)), zeros]), origin)


def _leaf_call(s: Stmt) -> Call | None:
    if isinstance(s, Eval):
        return s.call
    if isinstance(s, Assign) and isinstance(s.value, Call):
        return s.value
    return None


def _published_window(s: Stmt) -> Var | None:
    """The window a local publishing write ``s`` writes, else None."""
    call = _leaf_call(s)
    if call is None or call.op not in _LOCAL_WRITE_TARGET:
        return None
    dst = call.args[_LOCAL_WRITE_TARGET[call.op]]
    if isinstance(dst, Var) and isinstance(dst.type, TensorType) and dst.type.window:
        return dst
    return None


def _is_op(s: Stmt | None, op: Op, nargs: int | None = None) -> bool:
    call = None if s is None else _leaf_call(s)
    return call is not None and call.op is op and (nargs is None or len(call.args) == nargs)


def _is_region_invalidate_of(s: Stmt | None, target: Var) -> bool:
    call = None if s is None else _leaf_call(s)
    return (call is not None and call.op is Op.CACHEINVALID and len(call.args) == 3
            and isinstance(call.args[0], Var) and call.args[0].name == target.name)


def _is_wait(s: Stmt) -> bool:
    return _is_op(s, Op.WAIT)


def _only_waits(body: Seq) -> bool:
    """True when ``body`` holds nothing but waits and call-free scalar bookkeeping (through ``if``
    and nested blocks whose conditions call nothing)."""
    for s in body.stmts:
        if _is_wait(s):
            continue
        if any(True for _ in stmt_calls(s)) or not isinstance(s, (Assign, If, Seq)):
            return False
        if isinstance(s, If) and not (_only_waits(s.then) and (s.orelse is None or _only_waits(s.orelse))):
            return False
        if isinstance(s, Seq) and not _only_waits(s):
            return False
    return True


def _pure_wait_loop(s: Stmt) -> bool:
    """A ``for``/``while`` that only waits (its bounds or condition calling nothing)."""
    return (isinstance(s, (For, While)) and not any(True for _ in stmt_calls(s)) and _only_waits(s.body)
            and any(_is_wait(x) for x in walk_stmts(s.body.stmts)))


def _waits(s: Stmt | None) -> bool:
    return s is not None and (_is_wait(s) or _pure_wait_loop(s))


PLACED_BY = "InsertCommFence"
"""``SourcePos.placed_by`` of the markers this pass places."""


def _origin(s: Stmt) -> SourcePos:
    """The origin of a marker placed after ``s``: ``s``'s line (if known), marked as placed by this pass."""
    origin = s.origin if isinstance(s, (Assign, Eval)) else None
    return SourcePos("", 0, placed_by=PLACED_BY) if origin is None else replace(origin, placed_by=PLACED_BY)


@dataclass(frozen=True)
class InsertCommFence:
    """InsertCommFence as a pass object: ``InsertCommFence().apply(program)`` (see the module docstring)."""

    name: ClassVar[str] = "insert-comm-fence"

    host: frozenset[str] = field(default_factory=frozenset)
    """Functions that are not kernel (InCore) code and stay untouched."""

    drop: DropMarker | None = None
    """One marker to leave out (the mutant catalogue's broken placements); None: place every marker."""

    def apply(self, program: Program) -> Program:
        """Mark every kernel function of ``program``."""
        placer = _Placer(self.drop)
        functions = tuple(f if f.name in self.host else Function(f.name, f.params, placer.mark(f.body))
                          for f in program.functions)
        return Program(program.name, program.buffers, functions, program.entry, program.nranks)


class _Placer:
    """One application of the pass: the markers placed so far, by kind (for ``drop``)."""

    def __init__(self, drop: DropMarker | None) -> None:
        self._drop = drop
        self._placed: Counter[Marker] = Counter()

    def _place(self, kind: Marker, stmt: Eval, present: bool = False) -> Iterator[Stmt]:
        """Marker site number k of ``kind``: ``stmt`` unless the site already holds its marker
        (``present``) or it is the dropped one. Present markers count too, so that a dropped marker
        has the same number when the pass runs again on its own output (and stays dropped)."""
        k = self._placed[kind]
        self._placed[kind] += 1
        if not present and (self._drop is None or (self._drop.kind, self._drop.index) != (kind, k)):
            yield stmt

    def mark(self, body: Seq) -> Seq:
        return Seq(tuple(self._marked(body.stmts)))

    def _marked(self, stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
        n = len(stmts)
        owed: list[Stmt] = []  # a write's fence, to go after its cacheinvalid already in place
        for i, s in enumerate(stmts):
            nxt = stmts[i + 1] if i + 1 < n else None
            after = stmts[i + 2] if i + 2 < n else None
            pure_loop = _pure_wait_loop(s)
            yield s if pure_loop else self._recurse(s)  # a pure wait loop gets one invalidate after it
            yield from owed
            owed = []
            target = _published_window(s)
            if target is not None:
                # only the half of the pair that is missing (the pass's own output, one marker dropped)
                inv = _is_region_invalidate_of(nxt, target)
                yield from self._place(Marker.WRITE_INVALIDATE, cacheinvalid_region_stmt(target, _origin(s)), inv)
                fence = self._place(Marker.WRITE_FENCE, fence_stmt(_origin(s)), _is_op(after if inv else nxt, Op.FENCE))
                if inv:
                    owed = list(fence)
                else:
                    yield from fence
            elif _is_op(s, Op.PUT):
                yield from self._place(Marker.PUT_FENCE, fence_stmt(_origin(s)), _is_op(nxt, Op.FENCE))
            if _waits(s) and not _waits(nxt):  # one per run of consecutive waits
                yield from self._place(Marker.WAIT_INVALIDATE, cacheinvalid_all_stmt(_origin(s)),
                                       _is_op(nxt, Op.CACHEINVALID, 0))

    def _recurse(self, s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return self.mark(s)
        if isinstance(s, (For, Task, TaskScope)):
            return replace(s, body=self.mark(s.body))
        if isinstance(s, While):
            return While(s.cond, self.mark(s.body))
        if isinstance(s, If):
            return If(s.cond, self.mark(s.then), None if s.orelse is None else self.mark(s.orelse))
        return s


__all__ = ["PLACED_BY", "DropMarker", "InsertCommFence", "Marker", "cacheinvalid_all_stmt", "cacheinvalid_region_stmt",
           "fence_stmt"]
