"""pypto's task-forming constructs in a device body, translated into ``ir.Task`` / ``ir.TaskScope`` nodes.

An Orchestration submits tasks: an InCore call, a ``with pl.at(level=pl.Level.CORE_GROUP)`` region, a
``pl.spmd(n)`` grid (``with`` or ``for`` form, or ``pl.spmd_submit``), a ``pl.system.task_dummy``. Their
options (``deps=``, ``name_hint=``, ``allow_early_resolve=``, ``pl.no_dep`` / ``no_dep_args=``) become the
task's fields; ``pl.scope()`` / ``pl.manual_scope()`` become scopes. pypto's rules for what each may
contain are ``pldemu.ir.tasks``'s, checked here on the node just built so the error names the user's
line. Facts: ``../shared/reference/pypto-task-graph.md`` §1, §3, §5.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from pldemu.ir.nodes import (
    INVALID_TASK,
    TASK_ID,
    Assign,
    Const,
    If,
    LoopKind,
    MemorySpace,
    ScalarType,
    Seq,
    Stmt,
    Task,
    TaskKind,
    TaskScope,
    TensorType,
    TileType,
    Var,
    as_expr,
)
from pldemu.ir.ops import Op
from pldemu.ir.tasks import scope_problems, task_problems
from pldemu.pypto.translate import arrays
from pldemu.pypto.translate.cube_split import restore_names, syncall_segments
from pldemu.pypto.translate.evaluator import dsl_callee
from pldemu.pypto.translate.level import TaskState, Unreadable
from pldemu.pypto.translate.ops import is_ir
from pldemu.pypto.translate.regions import TensorView, is_tensor

LOOP_KINDS: Mapping[str, LoopKind] = MappingProxyType({
    "pl.range": LoopKind.RANGE, "pl.parallel": LoopKind.PARALLEL, "pl.pipeline": LoopKind.PIPELINE,
})
"""The device loops over ``pl.range``'s arguments and what each is to the task graph."""

LOOP_OPTIONS: Mapping[str, frozenset[str]] = MappingProxyType({
    "pl.range": frozenset({"init_values"}), "pl.parallel": frozenset({"init_values"}),
    "pl.pipeline": frozenset({"init_values", "stage"}),
})
"""The keywords each loop takes (``stage=``: pypto replicates the body at tile level; same values)."""


def _kwargs(tr: Any, call: ast.Call, allowed: frozenset[str], what: str) -> dict[str, Any]:
    unknown = [kw.arg for kw in call.keywords if kw.arg not in allowed]
    if unknown:
        raise tr.error(f"{what}: unsupported argument {unknown[0]}= (pldemu takes {', '.join(sorted(allowed))})", call)
    return {kw.arg: kw for kw in call.keywords if kw.arg is not None}


def _deps(tr: Any, node: ast.keyword | None) -> tuple[Any, ...]:
    """``deps=[...]``: task ids; a ``None`` entry is pypto's invalid-id sentinel (skipped); a whole
    ``pl.array`` of TASK_IDs stands for each of its slots (pypto: one edge per valid slot)."""
    if node is None:
        return ()
    values = tr.eval(node.value)
    if not isinstance(values, (list, tuple)):
        raise tr.error("deps= takes a list of task ids (pl.Scalar[pl.TASK_ID]) or None", node.value)
    out = []
    for v in (slot for value in values for slot in _dep_slots(tr, value, node.value)):
        if v is None or (isinstance(v, Const) and v.value == INVALID_TASK):
            continue  # pypto's invalid id (a None seed never re-bound) is no edge
        if not (is_ir(v) and as_expr(v).type == TASK_ID):
            raise tr.error(f"deps= entry {v!r} is not a task id: name a task with `with pl.at(...) as tid` "
                           "or pl.system.task_dummy", node.value)
        out.append(as_expr(v))
    return tuple(out)


def _dep_slots(tr: Any, value: Any, node: ast.AST) -> tuple[Any, ...]:
    """One ``deps=`` entry as task ids: a TASK_ID ``pl.array`` read slot by slot now, before the task is
    submitted (an unwritten slot holds the invalid id, which the runtime skips), anything else as is."""
    if not arrays.is_task_array(tr, value):
        return (value,)
    return tuple(arrays.read(tr, value, i, node) for i in range(arrays.extent_of(value)))


def _flag(tr: Any, node: ast.keyword | None) -> bool:
    return bool(tr.eval(node.value)) if node is not None else False


def _name(tr: Any, node: ast.keyword | None) -> str:
    return str(tr.eval(node.value)) if node is not None else ""


def _tensors(tr: Any, node: ast.keyword | None, what: str) -> tuple[Var, ...]:
    if node is None:
        return ()
    values = tr.eval(node.value)
    if not isinstance(values, (list, tuple)) or not all(
            isinstance(v, Var) and isinstance(v.type, TensorType) for v in values):
        raise tr.error(f"{what} takes a list of tensors", node.value)
    return tuple(values)


def _checked(tr: Any, node: ast.AST, built: Task) -> None:
    """pypto's rules (``pldemu.ir.tasks``) on the task just built, as an error at the user's line."""
    for problem in task_problems(built, tr.emit.tasks.depth, tr.emit.tasks.manual):
        raise tr.error(problem, node)


def _in_orchestration(tr: Any, what: str, node: ast.AST) -> None:
    if tr.emit.tasks.depth:
        raise tr.error(f"{what} inside a task: a kernel body submits no task (tasks belong in the Orchestration)",
                       node)


@contextmanager
def submit(tr: Any, node: ast.AST, kind: TaskKind, tid_name: str | None, **fields: Any) -> Iterator[Task]:
    """Translate the ``with`` body into a task of ``kind``; yields its head (``head.tid``: its id)."""
    _in_orchestration(tr, kind.value + " task", node)
    state: TaskState = tr.emit.tasks
    fields.setdefault("no_dep", ())
    fb = tr.fb
    state.depth += 1
    try:
        with fb.task(kind, tid_name, **fields) as head:
            yield head
    finally:
        state.depth -= 1
    built = fb._blocks[-1][-1]  # the task the builder just emitted (after the outputs it allocates)
    assert isinstance(built, Task)
    _checked(tr, node, built)


def with_at(tr: Any, call: ast.Call, target: ast.expr | None, s: ast.With) -> None:
    """``with pl.at(level=pl.Level.CORE_GROUP, deps=[...], name_hint=..., allow_early_resolve=...,
    no_dep_args=[...]) [as tid]:``: one task whose kernel is the body."""
    kw = _kwargs(tr, call, frozenset({"level", "deps", "name_hint", "allow_early_resolve", "no_dep_args",
                                      "optimizations", "dumps", "role"}), "pl.at")
    level = tr.eval(kw["level"].value) if "level" in kw else (tr.eval(call.args[0]) if call.args else None)
    if getattr(level, "name", None) != "CORE_GROUP":
        raise tr.error(f"pl.at(level={level!r}) in a device body: pldemu runs pl.at(level=pl.Level.CORE_GROUP) "
                       "tasks only (other levels are pypto's hierarchy scopes)", call)
    tid = _target(tr, target)
    before = dict(tr.env)
    with submit(tr, s, TaskKind.CORE_GROUP, tid, name=_name(tr, kw.get("name_hint")), deps=_deps(tr, kw.get("deps")),
                no_dep=_tensors(tr, kw.get("no_dep_args"), "no_dep_args="),
                early_resolve=_flag(tr, kw.get("allow_early_resolve"))) as head:
        tr.block(s.body)
        # the body's values its function reads after it (one walk of the function per task)
        read, defined = sorted(_read_outside(tr, s)), _defined(tr.fb._blocks[-1])
        outputs = _escaping_tiles(tr, read, defined, before)
        scalars = _escaping_scalars(tr, read, defined, before)
    for name, tensor in outputs.items():
        tr.bind(name, tensor)
    for name in scalars:
        tr.owned.pop(name, None)
        tr.env[name] = Unreadable(_SCALAR_OUTPUT.format(name=name, line=s.lineno))
    _bind_tid(tr, tid, head.tid)


_STORABLE = frozenset({MemorySpace.Vec, MemorySpace.Acc})


def _defined(stmts: Iterable[Stmt]) -> set[str]:
    """The variables a block defines at its own level (both branches of an ``if``; not a loop's body)."""
    out: set[str] = set()
    for st in stmts:
        if isinstance(st, Assign):
            out.add(st.var.name)
        elif isinstance(st, Seq):
            out |= _defined(st.stmts)
        elif isinstance(st, If) and st.orelse is not None:
            out |= _defined(st.then.stmts) & _defined(st.orelse.stmts)
    return out


def _read_outside(tr: Any, s: ast.With) -> set[str]:
    """The names the task's function reads outside the ``with`` statement ``s``."""
    inside = {id(n) for n in ast.walk(s)}
    return {n.id for n in ast.walk(tr.fn.node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and id(n) not in inside}


def _escaping_tiles(tr: Any, read: list[str], defined: set[str], before: Mapping[str, Any]) -> dict[str, Var]:
    """The tiles the task body binds (``defined``) that its function reads outside the body (``read``), each stored into a tensor the
    orchestration creates before the task: pypto's OutlineIncoreScopes makes a value used after the scope an
    output of the outlined kernel, a tensor of the orchestration's (``t`` made in one ``pl.at`` and read in
    the next). A name an earlier task's output held is stored into that tensor again (of the same type): a
    ``pl.at`` in a loop re-binding a value made before the loop, which pypto's SSA carries through the loop.
    Called inside the task, after its body."""
    outputs = tr.emit.tasks.outputs
    out: dict[str, Var] = {}
    for name in read:
        tile = tr.env.get(name)
        if (not (isinstance(tile, Var) and isinstance(tile.type, TileType)) or before.get(name) is tile
                or tile.name not in defined or tile.type.memory not in _STORABLE):
            continue  # a loop's local (pypto's SSA ends it with the loop), or a cube operand never read after
        earlier = before.get(name)
        if isinstance(earlier, Var) and earlier in outputs and _same_cells(earlier.type, tile.type):
            out[name] = earlier
        else:
            with tr.fb.enclosing():
                out[name] = tr.fb.pld.tensor.create(list(tile.type.shape), tile.type.dtype, hint=name)
            outputs[out[name]] = tr.emit.loops
        tr.fb.pld.tile.store(tile, [0] * len(tile.type.shape), out[name])
    return out


def _same_cells(tensor: Any, tile: TileType) -> bool:
    def dims(shape: Iterable[Any]) -> tuple[Any, ...]:
        return tuple(as_expr(d) for d in shape)

    return isinstance(tensor, TensorType) and dims(tensor.shape) == dims(tile.shape) and tensor.dtype == tile.dtype


_SCALAR_OUTPUT = ("{name} is a scalar the pl.at body at line {line} computes, read after that body: pypto makes a "
                  "value used after a pl.at scope an output of its kernel, and a kernel's outputs are tensors (its "
                  "generated orchestration reads such a scalar as 0); compute {name} outside the pl.at, or store it "
                  "into a tensor and pl.read it there")


def _escaping_scalars(tr: Any, read: list[str], defined: set[str], before: Mapping[str, Any]) -> list[str]:
    """The scalar names the task body binds at its own level that its function reads outside the body."""
    out = []
    for name in read:
        value = tr.env.get(name)
        if (isinstance(value, Var) and isinstance(value.type, ScalarType) and before.get(name) is not value
                and value.name in defined):
            out.append(name)
    return out


def loop_local_outputs(tr: Any, bound_before: Mapping[str, Any]) -> None:
    """After a loop: a name holding a task output made inside the loop that the loop did not find bound is an
    error where it is read (pypto's SSA carries out of a loop only a name bound before it, from an init value
    of the same type it picks, or a placeholder its verifier refuses)."""
    outputs = tr.emit.tasks.outputs
    for name, value in list(tr.env.items()):
        if (isinstance(value, Var) and outputs.get(value, -1) > tr.emit.loops and name not in bound_before):
            tr.env[name] = Unreadable(
                f"{name} is the output of a pl.at task inside the loop above, read after the loop: pypto's SSA "
                f"carries a value out of a loop only when the name is bound before it; bind {name} before the "
                "loop (in an earlier pl.at) or pl.assemble it into a tensor created before the loop")


def _bind_tid(tr: Any, name: str | None, tid: Var | None) -> None:
    """``as NAME``: the name is the task's id; one a loop or branch carries (a TASK_ID seed) is assigned it."""
    if name is None or tid is None:
        return
    if name in tr.owned:
        tr.bind(name, tid)
    else:
        tr.env[name] = tid


def _target(tr: Any, target: ast.expr | None) -> str | None:
    if target is None:
        return None
    if not isinstance(target, ast.Name):
        raise tr.error("`with ... as NAME`: the task id is one name", target)
    return target.id


_SPMD_OPTIONS = frozenset({"sync_start", "name_hint", "deps", "allow_early_resolve", "optimizations"})


def with_spmd(tr: Any, call: ast.Call, target: ast.expr | None, s: ast.With) -> None:
    """``with pl.spmd(n[, deps=...]) [as tid]:``: one task of ``n`` blocks; the body dispatches a kernel or is
    the kernel (reading ``pl.tile.get_block_idx()``); a sole ``pl.at(CORE_GROUP)`` in it is the kernel."""
    kw = _kwargs(tr, call, _SPMD_OPTIONS, "pl.spmd")
    if "deps" in kw and target is None:
        raise tr.error("pl.spmd(..., deps=[...]) needs the `with pl.spmd(...) as tid:` form (pypto)", call)
    body = s.body
    if len(body) == 1 and isinstance(body[0], ast.With) and dsl_callee(tr, body[0].items[0].context_expr) == "pl.at":
        body = body[0].body  # the explicit InCore carrier is not wrapped again
    _spmd(tr, call, s, _target(tr, target), kw, body, lambda var: None)


def _spmd(tr: Any, call: ast.Call, node: ast.AST, tid: str | None, kw: Mapping[str, ast.keyword],
          body: list[ast.stmt], bind: Callable[[Var], None]) -> Var | None:
    """One SPMD task of ``body`` (``bind``: the block index's name, a loop's), or one per phase of a body
    its top-level ``pl.system.syncall`` statements cut (:func:`spmd_phases`)."""
    if not call.args:
        raise tr.error("pl.spmd(n): the block count is the first argument", call)
    blocks = tr.eval(call.args[0])
    phases = syncall_segments(tr, body)
    if len(phases) > 1:
        return spmd_phases(tr, node, tid, kw, blocks, phases, bind)
    head = _spmd_task(tr, node, tid, kw, blocks, _deps(tr, kw.get("deps")), _body(tr, bind, body))
    _bind_tid(tr, tid, head)
    return head


def _body(tr: Any, bind: Callable[[Var], None], stmts: list[ast.stmt]) -> Callable[[Var], None]:
    def run(block: Var) -> None:
        bind(block)
        tr.block(stmts)

    return run


def _spmd_task(tr: Any, node: ast.AST, tid: str | None, kw: Mapping[str, ast.keyword], blocks: Any,
               deps: tuple[Any, ...], body: Callable[[Var], None]) -> Var | None:
    block = Var(tr.fb.fresh("block"), as_expr(0).type)
    before = dict(tr.env)
    with submit(tr, node, TaskKind.SPMD, tid, name=_name(tr, kw.get("name_hint")), deps=deps,
                blocks=as_expr(blocks), block_var=block, early_resolve=_flag(tr, kw.get("allow_early_resolve")),
                no_dep=tuple(tr.emit.tasks.no_dep)) as head:
        tr.emit.tasks.no_dep.clear()
        tr.emit.tasks.blocks.append(block)
        tr.emit.tasks.block_counts.append(blocks)
        try:
            body(block)
        finally:
            tr.emit.tasks.blocks.pop()
            tr.emit.tasks.block_counts.pop()
    _blocks_own(tr, before, node)
    tid_var: Var | None = head.tid
    return tid_var


def _blocks_own(tr: Any, before: Mapping[str, Any], node: ast.AST) -> None:
    """After an SPMD task: its body's tiles are each block's own, an error where read after it (its scalars stay
    readable: a name the body binds from the block index is bound again by the next body that uses it, and the
    range-arithmetic folding of its slices reads them)."""
    for name, value in list(tr.env.items()):
        if isinstance(value, Var) and isinstance(value.type, TileType) and before.get(name) is not value:
            tr.owned.pop(name, None)
            tr.env[name] = Unreadable(
                f"{name} is bound in the pl.spmd body at line {getattr(node, 'lineno', '?')}, read after it: every "
                "block of the task binds its own (pypto would store each block's into one output, the last "
                f"writer's winning); pl.assemble {name} into a tensor at the block's own offsets and read that")


_CROSSING = ("{} is bound before a pl.system.syncall of this pl.spmd body and read after it: pldemu runs the "
             "body's phases as one task each, where only names bound from the block index and scalars by a plain "
             "assignment are carried; bind it again after the barrier (or pass it through a tensor)")

PHASE_CARRIED = frozenset({f"{prefix}{query}" for prefix in ("pl.", "pl.tile.", "pl.tensor.")
                           for query in ("get_block_idx", "get_block_num", "get_subblock_idx")} | {"pl.min", "pl.max"})
"""The only calls a phase's plain assignment may make for the next phases to bind the name again."""


def spmd_phases(tr: Any, node: ast.AST, tid: str | None, kw: Mapping[str, ast.keyword], blocks: Any,
                phases: list[list[ast.stmt]], bind: Callable[[Var], None]) -> Var | None:
    """A ``pl.spmd`` body with top-level ``pl.system.syncall`` barriers (pypto-lib's fused hc_pre, ``sync_start=
    True``): no block starts its next phase before every block has ended this one, so each phase is an SPMD task
    of the same blocks depending on the previous phase's (``deps=`` the given deps on the first; ``as tid`` the
    last's). A phase sees what the earlier ones bound by a plain assignment from the block index and scalars
    (``core = pl.tile.get_block_idx()``: bound again at its start) and the Orchestration's tensors (a
    ``pl.assemble`` into one rebinds its name to itself); any other of their names is an error where it is read
    (a tile lives in one core's buffers: pass it through a tensor)."""
    outer = (dict(tr.env), dict(tr.owned))
    # a tensor of the Orchestration stays itself when a phase rebinds its name (pl.assemble into it)
    tensors = {n for n, v in outer[0].items() if isinstance(v, TensorView) or is_tensor(v)}
    deps = _deps(tr, kw.get("deps"))
    carried: list[ast.stmt] = []
    crossing: set[str] = set()
    head: Var | None = None
    for k, phase in enumerate(phases):
        restore_names(tr, *outer)
        tr.env.update({n: Unreadable(_CROSSING.format(n)) for n in crossing})
        last = k == len(phases) - 1
        head = _spmd_task(tr, node, tid if last else "phase_tid", kw, blocks, deps, _body(tr, bind, carried + phase))
        deps = (head,) if head is not None else ()
        carried += [st for st in phase if _carried(tr, st)]
        crossing |= _bound_names(phase) - _bound_names(carried) - tensors
    restore_names(tr, *outer)
    _bind_tid(tr, tid, head)
    return head


def _carried(tr: Any, st: ast.stmt) -> bool:
    """A plain ``NAME = expr`` whose only calls are :data:`PHASE_CARRIED`: a later phase binds it again."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
        return False
    return all(dsl_callee(tr, c) in PHASE_CARRIED for c in ast.walk(st.value) if isinstance(c, ast.Call))


def _bound_names(stmts: list[ast.stmt]) -> set[str]:
    return {n.id for st in stmts for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def spmd_loop(tr: Any, s: ast.For) -> None:
    """``for i in pl.spmd(n):``: an SPMD task whose blocks see ``i`` = their block index."""
    assert isinstance(s.iter, ast.Call)
    kw = _kwargs(tr, s.iter, _SPMD_OPTIONS - {"deps"}, "for ... in pl.spmd")
    if s.orelse or not isinstance(s.target, ast.Name):
        raise tr.error("for NAME in pl.spmd(n): one loop variable, no else", s)
    name = s.target.id

    def bind(block: Var) -> None:
        tr.env[name] = block

    _spmd(tr, s.iter, s, None, kw, s.body, bind)


def with_scope(tr: Any, call: ast.Call, target: ast.expr | None, s: ast.With) -> None:
    """``with pl.scope():`` (AUTO, or ``mode=`` MANUAL) and ``with pl.manual_scope():``."""
    name = dsl_callee(tr, call)
    mode = next((tr.eval(kw.value) for kw in call.keywords if kw.arg == "mode"), None)
    manual = name == "pl.manual_scope" or getattr(mode, "name", "").upper() == "MANUAL"
    state: TaskState = tr.emit.tasks
    for problem in scope_problems(TaskScope(manual, Seq()), state.depth, state.manual):
        raise tr.error(problem, s)
    state.manual += manual
    try:
        with tr.fb.task_scope(manual):
            tr.block(s.body)
    finally:
        state.manual -= manual



def with_cluster(tr: Any, call: ast.Call, target: ast.expr | None, s: ast.With) -> None:
    """``with pl.cluster(name_hint=...):``: pypto's co-scheduling of a cluster's cube and vector kernels (its
    OutlineClusterScopes makes the region one Group function); the tasks inside run as written, no value changes."""
    _kwargs(tr, call, frozenset({"name_hint"}), "pl.cluster")
    if call.args or target is not None:
        raise tr.error("with pl.cluster(name_hint=...): takes no positional argument and binds no name", call)
    _in_orchestration(tr, "pl.cluster", s)
    tr.block(s.body)


WITH_RULES: Mapping[str, Callable[[Any, ast.Call, ast.expr | None, ast.With], None]] = MappingProxyType({
    "pl.at": with_at, "pl.spmd": with_spmd, "pl.scope": with_scope, "pl.manual_scope": with_scope,
    "pl.cluster": with_cluster,
})
"""What a ``with`` in a device body means, by its context's DSL name."""


def with_stmt(tr: Any, s: ast.With) -> None:
    """A ``with`` statement of a device body (one item: ``pl.at``, ``pl.spmd``, a scope)."""
    if len(s.items) != 1:
        raise tr.error("a device `with` takes one context (pl.at, pl.spmd, pl.scope, pl.manual_scope)", s)
    item = s.items[0]
    name = dsl_callee(tr, item.context_expr)
    rule = WITH_RULES.get(name or "")
    if rule is None:
        raise tr.error(f"`with {ast.unparse(item.context_expr)}` is not supported in a device function "
                       "(pldemu runs pl.at, pl.spmd, pl.scope, pl.manual_scope and pl.cluster)", s)
    assert isinstance(item.context_expr, ast.Call)
    rule(tr, item.context_expr, item.optional_vars, s)


# -- ops ------------------------------------------------------------------------------------------------


def get_block_idx(tr: Any, node: ast.Call) -> Any:
    """``pl.tile.get_block_idx()`` (also ``pl.get_block_idx()``, ``pl.tensor.get_block_idx()``): the index of the
    SPMD block running (0 in any other task, as on a one-block dispatch)."""
    blocks = tr.emit.tasks.blocks
    if blocks:
        return blocks[-1]
    _in_kernel(tr, "get_block_idx", "block index", node)
    return Const(0)


def get_block_num(tr: Any, node: ast.Call) -> Any:
    """``pl.tile.get_block_num()`` (also ``pl.get_block_num()``, ``pl.tensor.get_block_num()``): the block count of
    the SPMD task running (1 in any other task, a one-block dispatch)."""
    counts = tr.emit.tasks.block_counts
    if counts:
        return counts[-1]
    _in_kernel(tr, "get_block_num", "block count", node)
    return 1


def _in_kernel(tr: Any, query: str, what: str, node: ast.Call) -> None:
    if node.args or node.keywords:
        raise tr.error(f"pl.tile.{query}() takes no arguments", node)
    if not tr.emit.tasks.depth and tr.fn.kind.name != "INCORE":
        raise tr.error(f"pl.tile.{query}() outside a kernel: it reads the {what} of the running task", node)


def task_dummy(tr: Any, node: ast.Call) -> Any:
    """``pl.system.task_dummy(deps=[...])``: a join task with no work; its task id."""
    kw = _kwargs(tr, node, frozenset({"deps"}), "pl.system.task_dummy")
    if node.args:
        raise tr.error("pl.system.task_dummy takes deps= only", node)
    with submit(tr, node, TaskKind.DUMMY, tr.hint("join"), deps=_deps(tr, kw.get("deps"))) as head:
        pass
    return head.tid


NO_DEP_NAMES = ("pl.no_dep", "pl.tensor.no_dep")
"""pypto's spellings of the no-dependency marker (``pl.no_dep`` is ``tensor_ops.no_dep``)."""


def no_dep(tr: Any, node: ast.Call) -> Any:
    """``pl.no_dep(t)`` (or ``pl.tensor.no_dep(t)``) as an argument of a kernel call: ``t`` takes no automatic
    edge in that task."""
    if len(node.args) != 1 or node.keywords:
        raise tr.error("pl.no_dep(tensor)", node)
    t = tr.eval(node.args[0])
    if not (isinstance(t, Var) and isinstance(t.type, TensorType)):
        raise tr.error(f"pl.no_dep takes a tensor, got {t!r}", node)
    tr.emit.tasks.no_dep.append(t)
    return t


def defer_wait(tr: Any, node: ast.Call) -> Any:
    """``pld.system.defer_wait(signal=, offsets=, expected=, cmp=pld.WaitCmp.Ge)``."""
    names = ("signal", "offsets", "expected")
    args = dict(zip(names, node.args, strict=False))
    args.update({kw.arg: kw.value for kw in node.keywords if kw.arg in names})
    cmp = next((tr.eval(kw.value) for kw in node.keywords if kw.arg == "cmp"), None)
    if set(args) != set(names) or cmp is None or getattr(cmp, "name", "") != "Ge":
        raise tr.error("pld.system.defer_wait(signal=, offsets=, expected=, cmp=pld.WaitCmp.Ge) (pypto: cmp must be "
                       "Ge, keyword-only)", node)
    if not tr.emit.tasks.depth:
        raise tr.error("pld.system.defer_wait outside a task: it belongs in a dedicated "
                       "`with pl.at(level=pl.Level.CORE_GROUP) as wait_tid:` task", node)
    signal = tr.eval(args["signal"])
    offsets = [tr.eval(e) for e in _items(tr, args["offsets"])]
    expected = tr.eval(args["expected"])
    tr.emit.signals.add(tr.emit.views.get(signal.name, signal.name))
    tr.fb.op(Op.DEFER_WAIT, [signal, offsets, expected], {"cmp": cmp})
    return None


def _items(tr: Any, node: ast.expr) -> list[ast.expr]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise tr.error("offsets= is a list, one entry per dim", node)
    return list(node.elts)


def spmd_submit(tr: Any, node: ast.Call) -> Any:
    """``out, tid = pl.spmd_submit(self.kernel, *args, core_num=N, deps=[...])``: an SPMD task running the
    kernel in every block; (the kernel's result, the task id)."""
    kw = _kwargs(tr, node, frozenset({"core_num", "sync_start", "deps", "allow_early_resolve"}), "pl.spmd_submit")
    func = node.args[0] if node.args else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
            and "core_num" in kw):
        raise tr.error("pl.spmd_submit(self.kernel, *args, core_num=N[, deps=[...]])", node)
    args, marked = _marked_args(tr, node.args[1:])
    inner = ast.copy_location(ast.Call(func=func, args=args, keywords=[]), node)
    result: list[Any] = []
    name = tr.hint("tid")
    tr.emit.tasks.no_dep.extend(marked)  # the SPMD task's, taken (and cleared) as it is submitted
    tid = _spmd_task(tr, node, name, {k: v for k, v in kw.items() if k != "core_num"}, tr.eval(kw["core_num"].value),
                     _deps(tr, kw.get("deps")), lambda block: result.append(tr.eval(inner)))
    _bind_tid(tr, name, tid)
    return (result[0] if result else None, tid)


def submit_call(tr: Any, node: ast.Call) -> Any:
    """``out, tid = pl.submit(self.kernel, *args, deps=[...], allow_early_resolve=, dumps=[...])``: one task running
    the InCore kernel; (the kernel's result, the task id). ``dumps=`` marks tensors for simpler's dump (no value
    changes); ``predicate=`` (a dispatch-time skip the scheduler evaluates) is not run by pldemu."""
    kw = _kwargs(tr, node, frozenset({"deps", "allow_early_resolve", "dumps", "predicate"}), "pl.submit")
    if "predicate" in kw:
        raise tr.error("pl.submit(predicate=...) is not supported by pldemu (a dispatch predicate the scheduler "
                       "evaluates at the task's dispatch): test the condition inside the kernel", node)
    func = node.args[0] if node.args else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
        raise tr.error("pl.submit(self.kernel, *args[, deps=[...]]): the first argument is the kernel", node)
    fn = tr.callee_function(node, func.attr)
    if fn.kind.name != "INCORE":
        raise tr.error(f"pl.submit(self.{func.attr}, ...): {func.attr} is not an InCore kernel (pl.submit launches "
                       "one kernel as a task)", node)
    args, marked = _marked_args(tr, node.args[1:])
    inner = ast.copy_location(ast.Call(func=func, args=args, keywords=[]), node)
    result: list[Any] = []
    name = tr.hint("tid")
    with submit(tr, node, TaskKind.KERNEL, name, name=fn.name, deps=_deps(tr, kw.get("deps")), no_dep=marked,
                early_resolve=_flag(tr, kw.get("allow_early_resolve"))) as head:
        result.append(tr.eval(inner))
    _bind_tid(tr, name, head.tid)
    return (result[0], head.tid)


def _marked_args(tr: Any, args: list[ast.expr]) -> tuple[list[ast.expr], tuple[Var, ...]]:
    """A submit's kernel arguments with their ``pl.no_dep(t)`` wrappers peeled, and those tensors: pypto strips
    the markers at every kernel call site, ``pl.submit`` / ``pl.spmd_submit`` too (``_strip_call_arg_markers``),
    into the task's NoDep arguments. Taken here, before the task, as the kernel call runs inside it."""
    plain: list[ast.expr] = []
    marked: list[Var] = []
    for a in args:
        if isinstance(a, ast.Call) and dsl_callee(tr, a) in NO_DEP_NAMES:
            marked.append(no_dep(tr, a))
            tr.emit.tasks.no_dep.pop()  # this task's, not the next call's
            plain.append(a.args[0])
        else:
            plain.append(a)
    return plain, tuple(marked)


def task_invalid(tr: Any, node: ast.Call) -> Const:
    """``pl.system.task_invalid()``: pypto's "no producer" task id, what a ``None`` seed of a
    ``pl.Scalar[pl.TASK_ID]`` is (skipped as a dep)."""
    if node.args or node.keywords:
        raise tr.error("pl.system.task_invalid() takes no arguments", node)
    return invalid_task()


TASK_OPS: Mapping[str, Callable[[Any, ast.Call], Any]] = MappingProxyType({
    **{f"{prefix}{query}": rule for prefix in ("pl.", "pl.tile.", "pl.tensor.")
       for query, rule in (("get_block_idx", get_block_idx), ("get_block_num", get_block_num))},
    "pl.system.task_dummy": task_dummy, **dict.fromkeys(NO_DEP_NAMES, no_dep), "pld.system.defer_wait": defer_wait,
    "pl.system.task_invalid": task_invalid,
    "pl.spmd_submit": spmd_submit, "pl.submit": submit_call,
})
"""The task ops of a device body (the device translator looks here before ``ops.DEVICE_OPS``)."""


def kernel_call(tr: Any, fn: Any, node: ast.Call, run: Callable[[], Any]) -> Any:
    """An InCore function called from an Orchestration: one task running its body (``run``)."""
    state: TaskState = tr.emit.tasks
    no_deps = tuple(state.no_dep)
    state.no_dep.clear()
    result: list[Any] = []
    with submit(tr, node, TaskKind.KERNEL, None, name=fn.name, no_dep=no_deps):
        result.append(run())
    return result[0]


def invalid_task() -> Const:
    """pypto's ``None`` seed of a ``pl.Scalar[pl.TASK_ID]``: the invalid id, skipped as a dep."""
    return Const(INVALID_TASK, TASK_ID.dtype)


__all__ = ["LOOP_KINDS", "LOOP_OPTIONS", "TASK_OPS", "WITH_RULES", "TaskState", "invalid_task", "kernel_call",
           "loop_local_outputs", "spmd_loop", "with_stmt"]
