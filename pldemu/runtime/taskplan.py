"""What the compiler needs to submit a function's tasks to the rank's scheduler (``runtime.tasksched``).

Made once per function that holds a task, unless the task order is ``program`` and no task-aware check is
on (then every task runs at its submission, as the compiler has always emitted it, with no graph built; a
function without tasks never gets here, so it compiles exactly as before issue 40). With ``--races`` the
program order goes through the scheduler too, whose ``program`` policy runs each task to completion at its
submission: the task graph is built by the one TensorMap, so the task-aware checks report what they report
in every other order. Per task statement it gives the variables its body captures,
its ``TaskInfo`` (shape, pypto's static tags from ``runtime.taskdeps.submissions``), and whether it can be
submitted at all: a task whose body assigns a scalar the Orchestration reads later runs inline after a
drain (the Orchestration could not read a value a concurrent task has not produced yet; pypto outlines
such a value into a task output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pldemu.ir import Op
from pldemu.ir import nodes as ir
from pldemu.ir.walk import stmt_bodies, stmt_exprs, walk_calls, walk_expr, walk_stmts
from pldemu.runtime.machine import Machine
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.taskdeps import Submission, submissions
from pldemu.runtime.tasksched import TaskInfo, TaskScheduler, task_shape

NO_DRAIN: frozenset[Op] = frozenset({Op.TENSOR_CREATE, Op.TENSOR_VIEW, Op.RANK, Op.NRANKS, Op.GET_COMM_CTX})
"""Orchestration ops that touch no tensor data: no need to wait for the tasks first."""

ORCH_ACCESS: frozenset[Op] = frozenset({Op.TENSOR_READ, Op.TENSOR_WRITE})
"""Orchestration ops that wait only for their tensor's writers (pypto's ``get_tensor_data`` /
``set_tensor_data``)."""


def _names(stmts: Iterable[ir.Stmt]) -> Iterator[str]:
    """Every variable name the statements ``stmts`` (not their nested bodies) use or bind."""
    for s in stmts:
        for e in stmt_exprs(s):
            for sub in walk_expr(e):
                if isinstance(sub, ir.Var):
                    yield sub.name
        if isinstance(s, (ir.Assign, ir.For)):
            yield s.var.name
        if isinstance(s, ir.Task):
            yield from (v.name for v in s.no_dep)


def _read_outside(stmts: tuple[ir.Stmt, ...], task: ir.Task) -> Iterator[str]:
    """The names statements outside ``task`` (by identity) may read: another task's body reads only what it
    does not bind itself (its own scalars are its locals)."""
    for s in stmts:
        if s is task:
            continue
        if isinstance(s, ir.Task):
            yield from _names([s])
            yield from set(_names(walk_stmts(s.body.stmts))) - _bound(s.body.stmts)
            continue
        yield from _names([s])
        for body in stmt_bodies(s):
            yield from _read_outside(body.stmts, task)


def _bound(stmts: tuple[ir.Stmt, ...]) -> set[str]:
    return {s.var.name for s in walk_stmts(stmts) if isinstance(s, (ir.Assign, ir.For))}


@dataclass
class TaskPlan:
    """One function's tasks as the compiler submits them."""

    fn: ir.Function
    scheduler: TaskScheduler
    subs: dict[int, Submission]

    def concurrent(self, task: ir.Task) -> bool:
        """Whether ``task`` is submitted (else it runs inline after a drain)."""
        inside = {s.var.name for s in walk_stmts(task.body.stmts)
                  if isinstance(s, ir.Assign) and not isinstance(s.var.type, ir.TensorType)}
        return not inside or not (inside & set(_read_outside(self.fn.body.stmts, task)))

    def captures(self, task: ir.Task) -> list[str]:
        """The variables the body of ``task`` reads or binds, in a stable order."""
        return sorted(set(_names(walk_stmts(task.body.stmts))))

    def info(self, task: ir.Task, where: str, defined: Callable[[str], bool]) -> TaskInfo:
        """The scheduler's view of ``task``: its arguments are the buffers of its tags that are bound outside
        its body (``defined`` there), their values taken at submission."""
        sub = self.subs[id(task)]
        local = _bound(task.body.stmts)
        names = tuple(n for n in sub.args.tags if n not in local and defined(n))
        signals = frozenset(c.args[0].name for c in walk_calls(task.body.stmts)
                            if c.op is Op.NOTIFY and isinstance(c.args[0], ir.Var))
        return TaskInfo(where, task.kind, task_shape(task), names, tuple(sub.args.tags[n] for n in names),
                        sub.args.manual, signals)

    def awaited(self, e: ir.Stmt | ir.Expr) -> list[str] | None:
        """The tensors an Orchestration statement reads or writes with ``pl.read`` / ``pl.write`` when those are
        all the tensor data it touches (it then waits only for their writers, as pypto's runtime does), else
        None (it drains)."""
        exprs = stmt_exprs(e) if not isinstance(e, (ir.Call, ir.BinOp, ir.Var, ir.Const, ir.ListExpr)) else (e,)
        calls = [c for x in exprs for c in walk_expr(x) if isinstance(c, ir.Call) and c.op not in NO_DRAIN]
        if not calls or any(c.op not in ORCH_ACCESS or not isinstance(c.args[0], ir.Var) for c in calls):
            return None
        return sorted({c.args[0].name for c in calls if isinstance(c.args[0], ir.Var)})

    def touches(self, e: ir.Stmt | ir.Expr) -> bool:
        """Whether an Orchestration expression calls an op on tensor data (it waits for the tasks first)."""
        exprs = stmt_exprs(e) if not isinstance(e, (ir.Call, ir.BinOp, ir.Var, ir.Const, ir.ListExpr)) else (e,)
        return any(isinstance(c, ir.Call) and c.op not in NO_DRAIN for x in exprs for c in walk_expr(x))


def graph_needed(options: RuntimeOptions) -> bool:
    """Whether a rank's tasks go through its scheduler (which builds the task graph): in a concurrent order
    always; in program order only for the checks decided from the graph (``race_tasks``, ``race_threads``:
    on with ``--races``), which must report the same in every order."""
    return options.task_order != "program" or options.race_detect


def task_plan(fn: ir.Function, m: Machine) -> TaskPlan | None:
    """The plan of ``fn``, or None when it submits no task or its tasks need no graph (``graph_needed``)."""
    if not graph_needed(m.options) or not any(isinstance(s, ir.Task) for s in walk_stmts(fn.body.stmts)):
        return None
    if m.tasks is None:
        m.tasks = TaskScheduler(m)
    return TaskPlan(fn, m.tasks, {id(s.task): s for s in submissions(fn)})


__all__ = ["NO_DRAIN", "ORCH_ACCESS", "TaskPlan", "graph_needed", "task_plan"]
