"""What a device-level rule (``translate/ops.py``, ``translate/regions.py``) sees of the translator
translating the body it is in: the state every inlined body of one rank's block shares (:class:`Emit`),
a loop's carried values (:class:`Carry`) and :class:`DeviceLevel`, the translator's face to its rules,
so that the rule tables need not import the translator that dispatches to them."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import TensorType, TileType, Var
from pldemu.ir.walk import walk_expr
from pldemu.pypto.capture import CapturedFunction, CapturedProgram
from pldemu.pypto.errors import FrontendError


@dataclasses.dataclass
class TaskState:
    """Where the translation stands in the task structure of one rank's block (in ``Emit``)."""

    depth: int = 0
    """Tasks enclosing the statement being translated (a kernel body submits no task)."""
    manual: int = 0
    """Manual scopes enclosing it."""
    blocks: list[Var] = dataclasses.field(default_factory=list)
    """The block index of each enclosing SPMD task, innermost last (``pl.tile.get_block_idx()``)."""
    block_counts: list[Any] = dataclasses.field(default_factory=list)
    """The block count of each enclosing SPMD task, innermost last (``pl.tile.get_block_num()``)."""
    no_dep: list[Var] = dataclasses.field(default_factory=list)
    """Tensors the arguments being evaluated wrapped in ``pl.no_dep``: the next task's."""
    outputs: dict[Var, int] = dataclasses.field(default_factory=dict)
    """The tensors made for ``pl.at`` bodies' outputs (``tasks._escaping_tiles``), each with the number of
    loops enclosing the task that made it."""


@dataclasses.dataclass
class Emit:
    """What every inlined body of one rank's block shares."""

    prog: CapturedProgram
    fb: FunctionBuilder
    nranks: int
    signals: set[str]
    """Buffers used as a signal (notify / wait / a collective's signal): declared SIGNAL."""
    dims: Mapping[str, int]
    scratch: dict[str, tuple[Var, tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    """LOCAL buffers the translation adds, by the buffer they stand for: (var, numeric shape at this rank count)."""
    arrays: set[str] = dataclasses.field(default_factory=set)
    """The LOCAL buffers that are ``pl.array`` s (``translate/arrays.py``): an element write goes there."""
    task_arrays: set[str] = dataclasses.field(default_factory=set)
    """Those of ``arrays`` whose element type is ``pl.TASK_ID`` (an INT64 to pldemu): a ``deps=`` entry."""
    views: dict[str, str] = dataclasses.field(default_factory=dict)
    """A window's ``tensor.view`` made to pass it to a parameter of another rank (``device.window_view``) ->
    the window's buffer: a signal used through the view is that buffer's."""
    tasks: TaskState = dataclasses.field(default_factory=TaskState)
    """Where the translation stands in the task structure (``translate/tasks.py``)."""
    tensor_slices: set[str] = dataclasses.field(default_factory=set)
    """Tiles that are a tensor's slice loaded where it is made (``regions.load_region``): still a tensor to
    pypto, so ``pl.matmul(..., b_trans=True)`` on one is its tensor-level form."""
    lets: dict[Var, Any] = dataclasses.field(default_factory=dict)
    """A scalar name's variable -> the expression it was bound to, while neither it nor a variable of the
    expression has been assigned since (a slice's extent ``d:end`` with ``end = d + 1`` folds through them)."""
    loops: int = 0
    """Device loops (``pl.range`` / ``pl.parallel`` / ``pl.pipeline``) enclosing the statement being translated:
    a buffer made inside one is made again at every iteration (``fresh_buffers``)."""
    printed: set[str] = dataclasses.field(default_factory=set)
    """The ``pl.static_print`` lines printed so far: each once, though every rank's block translates the body."""
    truncating: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(origin ``file:line``, the ``tdiv`` / ``trem`` as printed) -> the user's text of that ``//`` / ``%``:
    how a run's truncation findings (``Truncation.origin``, ``.expr``) name the user's expression."""

    def assigned(self, var: Var) -> None:
        """``var`` was assigned: what was known of it, and of every expression that reads it, is stale."""
        self.lets = {v: e for v, e in self.lets.items() if v != var and var not in _vars_of(e)}


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """What a name holds where reading it is an error (``message``, at the read), though a new binding of it is
    fine: one bound to values of two types by the branches of a run-time ``if`` (after the ``if``), one an
    earlier phase of a ``pl.spmd`` body bound (in a later phase: ``tasks.spmd_phases``)."""

    message: str


def fresh_buffers(emit: Emit, kernel: bool) -> bool:
    """Whether a buffer made here (``pl.create_tensor``, ``pl.array.create``) is a new one at each execution
    (``tensor.create``) rather than one LOCAL buffer of the rank: in a loop, where pypto's orchestration
    allocates it at every iteration and a task of one iteration may still use its own while the next
    iteration's tasks run; in a task body, where each core running a block has its own."""
    return kernel or emit.loops > 0


def _vars_of(e: Any) -> list[Var]:
    return [a for a in walk_expr(e) if isinstance(a, Var)]


@dataclasses.dataclass
class Carry:
    """Loop-carried values of one ``pl.range(init_values=)``: a Var per tile or scalar, a tensor itself; or, with
    ``branch``, a branch of an ``if``, whose ``pl.yield_`` is pypto's phi (the IfStmt's outputs: the names it binds,
    merged after the ``if`` as any name every branch binds), not the enclosing loop's yield."""

    values: list[Any]
    branch: bool = False

    @staticmethod
    def rebound(value: Any) -> bool:
        """A tensor, or a view of one (a slice passed as a tensor), is carried by rebinding its name: its ops
        write it in place; a tile or a scalar is a carry variable that ``pl.yield_`` re-assigns."""
        return not isinstance(value, Var) or isinstance(value.type, TensorType)


def fit_to_carry(fb: FunctionBuilder, mine: Var, value: Any) -> Any:
    """``value`` made fit the carried tile ``mine`` it re-binds (a name the loop carries, or ``pl.yield_``'s
    operand). A tile in another memory space (a split-K accumulator from a Vec ``tile.full`` re-bound to its
    matmul_acc in Acc) is moved back to the carry's space: pypto's InferTileMemorySpace gives the carry the
    yielded space instead; the values are the same. One with another valid box (the first K step's
    ``pl.matmul`` of valid-shaped slices, into a carry from a ``pl.create_tensor``) takes the carry's: pypto's
    loop-carried value keeps its init's type. Anything else is returned as it is."""
    t, v = mine.type, getattr(value, "type", None)
    if not (isinstance(t, TileType) and isinstance(v, TileType)
            and (v.dtype, v.shape, v.layout) == (t.dtype, t.shape, t.layout)):
        return value
    if v.memory is not t.memory:
        value = fb.pld.tile.move(value, t.memory)
    if v.valid_shape != t.valid_shape:
        value = fb.pld.tile.set_validshape(value, list(t.valid_shape or t.shape))
    return value


@dataclasses.dataclass(frozen=True)
class Window:
    """A tile that is a window of another (``pl.tile.slice`` of a tile): pypto's ``pto.subview``, which shares
    the parent's buffer, so an op that writes its operand in place (``tile.matmul_acc``) writes the parent."""

    parent: Var
    offsets: tuple[Any, ...]


class DeviceLevel(Protocol):
    """The translator of one device function body, as its op rules use it."""

    emit: Emit
    fb: FunctionBuilder
    fn: CapturedFunction
    carries: list[Carry]
    windows: dict[Var, Window]
    """The variables that hold a window of another tile, and where (kept by ``bind`` as names re-bind)."""

    def error(self, message: str, node: ast.AST) -> FrontendError:
        """An error at ``node``'s line of the user's file."""

    def eval(self, node: ast.expr) -> Any:
        """The value of an expression of the body."""

    def hint(self, default: str) -> str:
        """The name of the variable a value gets (the assignment's target, else ``default``)."""

    def binary(self, op: ast.operator, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        """``lhs op rhs`` of scalars, typed, wrapped and refused as pypto's scalar operators are."""


__all__ = ["Carry", "DeviceLevel", "Emit", "TaskState", "Window", "fit_to_carry"]
