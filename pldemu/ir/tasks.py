"""pypto's rules for what a task and a task scope may contain, as rule tables the verifier runs.

Sources (pypto e2d0f78, ``../shared/reference/pypto-task-graph.md``): a task is one kernel dispatch, so
a kernel body submits no task (``docs/en/user/tasks/00-model.md``); a scope inside MANUAL is
forbidden, AUTO and MANUAL alike (``docs/en/user/tasks/01-scopes.md:22-57``); ``defer_wait`` lives
only in a ``pl.at(level=CORE_GROUP)`` task without ``allow_early_resolve``, and after it only scalar
bookkeeping and control flow may follow (``docs/en/user/distributed/02-primitives.md:122-232``);
``task_dummy`` is a join with no work (``docs/en/user/tasks/03-tuning.md:167-175``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pldemu.ir import nodes as ir
from pldemu.ir.ops import Op
from pldemu.ir.walk import walk_calls, walk_stmts

AFTER_DEFER_WAIT: frozenset[Op] = frozenset({Op.DEFER_WAIT, Op.RANK, Op.NRANKS, Op.GET_COMM_CTX})
"""What may follow a ``defer_wait`` in its task: more registrations and scalar bookkeeping (pypto: no
``tensor.read``, payload or cache op, no further comm)."""


def _nested(t: ir.Task, task_depth: int, manual_depth: int) -> str | None:
    if task_depth:
        return (f"a {t.kind.value} task inside a task: a kernel body submits no task (pl.at, pl.spmd and InCore "
                "calls belong in the Orchestration)")
    return None


def _block_var(t: ir.Task, task_depth: int, manual_depth: int) -> str | None:
    if t.block_var is not None and t.kind is not ir.TaskKind.SPMD:
        return f"a {t.kind.value} task has no block index (only spmd tasks have blocks)"
    blocks = ir.static_int(t.blocks)
    if t.kind is not ir.TaskKind.SPMD and blocks != 1:
        return f"a {t.kind.value} task runs one block"
    if blocks is not None and blocks < 1:
        return f"an spmd task needs at least one block, got {blocks}"
    return None


def _dummy(t: ir.Task, task_depth: int, manual_depth: int) -> str | None:
    if t.kind is ir.TaskKind.DUMMY and (t.body.stmts or t.no_dep or t.early_resolve):
        return "a dummy task (pl.system.task_dummy) has only deps: no body, nodep or early resolve"
    return None


def _defer_wait_host(t: ir.Task, task_depth: int, manual_depth: int) -> str | None:
    if not any(c.op is Op.DEFER_WAIT for c in walk_calls(t.body.stmts)):
        return None
    if t.kind is not ir.TaskKind.CORE_GROUP:
        return (f"pld.system.defer_wait in a {t.kind.value} task: pypto allows it only in a dedicated "
                "`with pl.at(level=pl.Level.CORE_GROUP) as wait_tid:` task")
    if t.early_resolve:
        return "pld.system.defer_wait in a task with allow_early_resolve=True (pypto refuses it)"
    return None


def _after_defer_wait(t: ir.Task, task_depth: int, manual_depth: int) -> str | None:
    seen = False
    for s in walk_stmts(t.body.stmts):
        if not isinstance(s, (ir.Assign, ir.Eval)):
            continue
        calls = list(walk_calls([s]))
        bad = [c for c in calls if c.op not in AFTER_DEFER_WAIT]
        if seen and bad:
            where = f" ({s.origin})" if s.origin is not None else ""
            return (f"{bad[0].op.text} after pld.system.defer_wait{where}: only scalar bookkeeping and control "
                    "flow may follow a deferred wait (its task's TaskId completes later; put the work in a task "
                    "with deps=[wait_tid])")
        seen = seen or any(c.op is Op.DEFER_WAIT for c in calls)
    return None


TaskRule = Callable[[ir.Task, int, int], str | None]

TASK_RULES: tuple[TaskRule, ...] = (_nested, _block_var, _dummy, _defer_wait_host, _after_defer_wait)
"""Each rule gets the task, the tasks and the manual scopes enclosing it, and gives a problem or None."""


def task_problems(t: ir.Task, task_depth: int, manual_depth: int) -> Iterator[str]:
    """What is wrong with ``t`` by pypto's rules (its body's own statements are checked as usual)."""
    for rule in TASK_RULES:
        problem = rule(t, task_depth, manual_depth)
        if problem is not None:
            yield problem


def scope_problems(s: ir.TaskScope, task_depth: int, manual_depth: int) -> Iterator[str]:
    """What is wrong with scope ``s`` where it stands."""
    kind = "pl.manual_scope()" if s.manual else "pl.scope()"
    if task_depth:
        yield f"{kind} inside a task: scopes belong in the Orchestration"
    if manual_depth:
        yield f"{kind} inside pl.manual_scope(): pypto forbids a scope inside a manual scope"


__all__ = ["AFTER_DEFER_WAIT", "TASK_RULES", "scope_problems", "task_problems"]
