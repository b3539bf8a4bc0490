"""The dependency rules of pypto's task graph, as pypto's compiler and simpler's runtime derive them.

One module, three steps (facts and sources: ``../shared/reference/pypto-task-graph.md`` §2-§3; the table
in ``docs/task-graph.md``):

1. **Body direction** (pypto's OutlineIncoreScopes / ConvertTensorToTileOps): a tensor the task's body
   only writes is ``Out``; any read makes it ``InOut``; a tensor only read is ``In``. Writes are
   ``tile.store``'s target, ``tensor.write``, ``put``'s destination window (a push to a peer writes my
   local window view), ``get``'s destination and, since pypto #2391, ``notify``'s signal (``Set``: a write,
   ``AtomicAdd``: a read and a write). ``wait`` / ``defer_wait`` read their signal; every other operand
   is a read.
2. **Call-site direction** (DeriveCallDirections): ``In`` -> INPUT, ``InOut`` -> INOUT; ``Out`` -> INOUT
   under a sequential loop of the Orchestration (``range`` / ``pipeline`` / ``while``, not ``parallel``) or
   behind a prior writer of the same buffer (each branch of an ``if`` starts from the writes before it),
   else OUTPUT_EXISTING; ``pl.no_dep`` -> NO_DEP.
3. **The TensorMap** (simpler ``pto_dep_compute.h``): per rank, the writers recorded so far per buffer.
   A tag says whether the argument looks up earlier overlapping writers (an edge to each) and whether
   it is recorded as a writer. Tasks in a manual scope do neither. Explicit ``deps`` are added to the
   automatic edges (an invalid id is skipped). Readers are never recorded: no WAR edge, by design.

Regions: the TensorMap compares the *argument's view*, not what the kernel touches; pldemu passes a
task whole buffers (or views of them), and two views of one buffer overlap conservatively, so the
buffer is the key. Not edges, but completion rules the scheduler applies: ``allow_early_resolve`` only
lets consumers be pre-staged on cores; a task with ``defer_wait`` completes when its conditions hold.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pldemu.ir import nodes as ir
from pldemu.ir.enums import NotifyOp
from pldemu.ir.ops import Op
from pldemu.ir.walk import walk_calls, walk_stmts


class Direction(enum.Enum):
    """What a task's body does with a tensor (pypto's parameter direction)."""

    IN = "In"
    OUT = "Out"
    INOUT = "InOut"


class Tag(enum.Enum):
    """The runtime tag of one task argument (simpler's TensorArgType)."""

    INPUT = "INPUT"
    INOUT = "INOUT"
    OUTPUT_EXISTING = "OUTPUT_EXISTING"
    NO_DEP = "NO_DEP"


@dataclass(frozen=True)
class TagRule:
    """What the TensorMap does with an argument of one tag."""

    lookup: bool
    """It takes an edge to every earlier overlapping writer."""
    insert: bool
    """It is recorded as a writer of its buffer."""


TAG_RULES: Mapping[Tag, TagRule] = MappingProxyType({
    Tag.INPUT: TagRule(lookup=True, insert=False),
    Tag.INOUT: TagRule(lookup=True, insert=True),
    Tag.OUTPUT_EXISTING: TagRule(lookup=False, insert=True),
    Tag.NO_DEP: TagRule(lookup=False, insert=False),
})
"""simpler ``pto_dep_compute.h:85-116, 153-166``: a first ``Out`` writer does not look up (no WAW edge to an
earlier writer); NO_DEP neither looks up nor inserts. (Creator edges to an allocation task: pldemu
allocates every buffer before the run, so they are always satisfied.)"""

DIRECTION_TAGS: Mapping[Direction, Tag] = MappingProxyType({
    Direction.IN: Tag.INPUT, Direction.INOUT: Tag.INOUT, Direction.OUT: Tag.OUTPUT_EXISTING,
})
"""Step 2 before the ``Out`` promotions (``promote``)."""


def _notify_access(call: ir.Call) -> tuple[bool, bool]:
    return (call.attr("op") == NotifyOp.AtomicAdd, True)


WRITES: Mapping[Op, tuple[int, ...]] = MappingProxyType({
    Op.TILE_STORE: (2,), Op.TENSOR_WRITE: (0,), Op.PUT: (0,), Op.GET: (0,),
})
"""Operand positions an op writes (every other tensor operand is read)."""

READ_WRITES: Mapping[Op, tuple[int, ...]] = MappingProxyType({Op.NOTIFY: (0,)})
"""Operand positions whose access depends on the call (``notify``: ``_notify_access``, pypto #2391)."""


def _accesses(call: ir.Call) -> Iterator[tuple[ir.Var, bool, bool]]:
    """(tensor variable, read, written) for each tensor operand of ``call``."""
    for i, arg in enumerate(call.args):
        if not (isinstance(arg, ir.Var) and isinstance(arg.type, ir.TensorType)):
            continue
        if i in READ_WRITES.get(call.op, ()):
            read, written = _notify_access(call)
            yield arg, read, written
        elif i in WRITES.get(call.op, ()):
            yield arg, False, True
        else:
            yield arg, True, False


def body_directions(task: ir.Task, roots: Mapping[str, str]) -> dict[str, Direction]:
    """Step 1: each buffer the task's body touches (by root name) and its direction."""
    read: set[str] = set()
    written: set[str] = set()
    for call in walk_calls(task.body.stmts):
        for var, r, w in _accesses(call):
            root = roots.get(var.name, var.name)
            if r:
                read.add(root)
            if w:
                written.add(root)
    out = {name: Direction.IN for name in read - written}
    out.update({name: Direction.INOUT if name in read else Direction.OUT for name in written})
    return out


def tensor_roots(fn: ir.Function) -> dict[str, str]:
    """Each tensor variable of ``fn`` -> the buffer it views (``tensor.view`` chains followed)."""
    roots: dict[str, str] = {}
    for s in walk_stmts(fn.body.stmts):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op is Op.TENSOR_VIEW:
            base = s.value.args[0]
            if isinstance(base, ir.Var):
                roots[s.var.name] = roots.get(base.name, base.name)
    return roots


@dataclass(frozen=True)
class TaskArgs:
    """One submitted task as the TensorMap sees it: its arguments' buffers and tags, whether it is in a
    manual scope, and its explicit deps (task keys)."""

    key: int
    tags: Mapping[str, Tag]
    manual: bool = False
    deps: tuple[int, ...] = ()


def call_site_tags(task: ir.Task, roots: Mapping[str, str], sequential: bool,
                   prior_writers: Iterable[str]) -> dict[str, Tag]:
    """Step 2: the runtime tag of each buffer argument of ``task``."""
    prior = frozenset(prior_writers)
    no_dep = {roots.get(v.name, v.name) for v in task.no_dep}
    tags = {}
    for name, direction in body_directions(task, roots).items():
        tag = DIRECTION_TAGS[direction]
        if tag is Tag.OUTPUT_EXISTING and (sequential or name in prior):
            tag = Tag.INOUT  # DeriveCallDirections' R-seq / R-prior promotion
        tags[name] = Tag.NO_DEP if name in no_dep else tag
    return tags


@dataclass
class TensorMap:
    """Step 3, one rank's: the writers recorded per buffer, and the edges each submitted task takes."""

    writers: dict[str, list[int]] = field(default_factory=dict)

    def submit(self, task: TaskArgs) -> frozenset[int]:
        """The producers ``task`` waits for (explicit deps first, then automatic), recording its writes."""
        producers = {d for d in task.deps if d != ir.INVALID_TASK}
        if task.manual:
            return frozenset(producers)
        for name, tag in task.tags.items():
            if TAG_RULES[tag].lookup:
                producers.update(self.writers.get(name, ()))
        for name, tag in task.tags.items():
            if TAG_RULES[tag].insert:
                self.writers.setdefault(name, []).append(task.key)
        producers.discard(task.key)
        return frozenset(producers)


SEQUENTIAL_LOOPS: frozenset[ir.LoopKind] = frozenset({ir.LoopKind.RANGE, ir.LoopKind.PIPELINE})
"""Loops whose submissions promote ``Out`` to INOUT (a ``while`` does too; ``parallel`` does not)."""


Arm = tuple[int, int]
"""One branch of an ``if``: the ``if``'s index among the function's ``if`` statements (in walk order) and 0
for its then-branch, 1 for its else-branch."""


@dataclass(frozen=True)
class Submission:
    """A task of a function in submission order (statically: each task statement once), with its tags."""

    task: ir.Task
    args: TaskArgs
    arms: tuple[Arm, ...] = ()
    """The ``if`` branches the task statement is in, outermost first."""

    def exclusive(self, other: Submission) -> bool:
        """Whether no run submits both: they are in different branches of one ``if`` (the per-device ``if``
        of a dispatch to several devices: different ranks)."""
        mine = dict(self.arms)
        return any(i in mine and mine[i] != branch for i, branch in other.arms)


@dataclass
class _Walk:
    """The state of ``submissions``' walk: what is shared by every branch (the submissions, the task ids,
    the ``if`` count)."""

    roots: Mapping[str, str]
    out: list[Submission] = field(default_factory=list)
    keys: dict[str, int] = field(default_factory=dict)
    ifs: int = 0

    def task(self, s: ir.Task, sequential: bool, manual: bool, written: set[str], arms: tuple[Arm, ...]) -> None:
        tags = call_site_tags(s, self.roots, sequential, written)
        deps = tuple(self.keys[d.name] for d in s.deps if isinstance(d, ir.Var) and d.name in self.keys)
        self.out.append(Submission(s, TaskArgs(len(self.out), tags, manual, deps), arms))
        written.update(n for n, t in tags.items() if TAG_RULES[t].insert)
        if s.tid is not None:
            self.keys[s.tid.name] = len(self.out) - 1

    def stmts(self, stmts: tuple[ir.Stmt, ...], sequential: bool, manual: bool, written: set[str],
              arms: tuple[Arm, ...]) -> None:
        """Walk ``stmts``; ``written`` holds the buffers written before them (a later task writing one is
        behind a prior writer), and gains theirs."""
        for s in stmts:
            if isinstance(s, ir.Task):
                self.task(s, sequential, manual, written, arms)
            elif isinstance(s, ir.TaskScope):
                self.stmts(s.body.stmts, sequential, manual or s.manual, written, arms)
            elif isinstance(s, ir.For):
                self.stmts(s.body.stmts, sequential or s.kind in SEQUENTIAL_LOOPS, manual, written, arms)
            elif isinstance(s, ir.While):
                self.stmts(s.body.stmts, True, manual, written, arms)
            elif isinstance(s, ir.If):
                self.branches(s, sequential, manual, written, arms)
            elif isinstance(s, ir.Seq):
                self.stmts(s.stmts, sequential, manual, written, arms)

    def branches(self, s: ir.If, sequential: bool, manual: bool, written: set[str], arms: tuple[Arm, ...]) -> None:
        """Each branch starts from the writes before the ``if`` (one run takes one branch: the per-device ``if``
        holds each rank's copy, and rank 1's must not see rank 0's writes); after it, either branch's writes may
        precede a task (pypto's PriorWriterCollector: a snapshot per branch, then their union)."""
        index = self.ifs
        self.ifs += 1
        after = set(written)
        for branch, body in enumerate((s.then, s.orelse)):
            seen = set(written)
            self.stmts(body.stmts if body is not None else (), sequential, manual, seen, (*arms, (index, branch)))
            after |= seen
        written |= after


def submissions(fn: ir.Function) -> list[Submission]:
    """Every task statement of ``fn`` once, in program order, with pypto's tags, explicit deps (by the
    statement index of the producing task) and the ``if`` branches it is in."""
    walk = _Walk(tensor_roots(fn))
    walk.stmts(fn.body.stmts, False, False, set(), ())
    return walk.out


def static_edges(fn: ir.Function) -> dict[int, frozenset[int]]:
    """Each task statement of ``fn`` (by submission index) -> the earlier ones it depends on, each statement
    submitted once; a task takes no edge to one in another branch of an ``if`` (no run submits both)."""
    tmap = TensorMap()
    subs = submissions(fn)
    return {sub.args.key: frozenset(k for k in tmap.submit(sub.args) if not sub.exclusive(subs[k]))
            for sub in subs}


__all__ = [
    "DIRECTION_TAGS", "SEQUENTIAL_LOOPS", "TAG_RULES", "Arm", "Direction", "Submission", "Tag", "TagRule",
    "TaskArgs", "TensorMap", "body_directions", "call_site_tags", "static_edges", "submissions", "tensor_roots",
]
