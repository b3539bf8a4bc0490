"""Orchestration and InCore bodies inlined into one pldemu function, statement by statement.

Every statement is emitted with the pypto file:line as its origin, so verifier errors, race reports
and wait-for graphs name the user's line. Python-valued expressions (closure ints, ``pld.world_size()``,
host scalars) fold here; anything touching the rank becomes an IR expression. Semantics kept from
pypto: ``pl.store`` and the collectives return their tensor (tensors are references, so
``init_values`` / ``pl.yield_`` on tensors is plain rebinding); a tile or scalar carried through
``pl.range(init_values=)`` is a variable re-assigned by ``pl.yield_``; an ``if`` whose body returns
early takes the rest of the block as its else branch. ``//`` and ``%`` of device values are C's truncating
division and remainder (``tdiv`` / ``trem``), what pypto's code generators emit for its FloorDiv / FloorMod;
where that differs from floor semantics the run reports it (``pldemu.runtime.truncation``). Python-valued
operands fold here with Python's floor semantics, as pypto folds them (its parser's closure folding, its
simplifier) or as its HOST level computes them (generated Python).
"""

from __future__ import annotations

import ast
import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.ir.nodes import (
    Assign,
    BinOp,
    BinOpKind,
    Call,
    Const,
    Expr,
    ScalarType,
    SourcePos,
    Stmt,
    TensorType,
    TileType,
    Type,
    Var,
    as_expr,
    binop,
    eval_nr,
    format_expr,
    join_scalar,
)
from pldemu.ir.ops import Op
from pldemu.ir.walk import walk_stmts
from pldemu.npdtypes import scalar_as
from pldemu.pypto.capture import CapturedFunction, CapturedProgram, Kind
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.translate import arrays, early_exit
from pldemu.pypto.translate.cube_split import split_aiv_loop
from pldemu.pypto.translate.evaluator import Evaluator, dsl_callee
from pldemu.pypto.translate.level import Carry, Emit, Unreadable, Window, fit_to_carry
from pldemu.pypto.translate.ops import DEVICE_OPS, VIEW_OPS, is_ir
from pldemu.pypto.translate.regions import (
    Region,
    TensorView,
    assemble_tile,
    based,
    in_kernel,
    is_tensor,
    load_view,
    slice_tile,
    store_region,
    subscript_region,
    tensor_region,
)
from pldemu.pypto.translate.tasks import (
    LOOP_KINDS,
    LOOP_OPTIONS,
    TASK_OPS,
    invalid_task,
    kernel_call,
    loop_local_outputs,
    spmd_loop,
    with_stmt,
)
from pldemu.pypto.types import (
    TASK_ID,
    ArrayAnn,
    BakedFloat,
    BakedInt,
    DynVar,
    ScalarAnn,
    SymInt,
    TensorAnn,
    TileAnn,
    dim_expr,
    dim_value,
    dtype_of_ir,
)

_IR_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}

def _floor_differs(kind: BinOpKind, a: Any, b: Any, truncated: Const) -> bool:
    """A folded ``tdiv`` / ``trem`` of two device constants whose floor value would differ."""
    floor = binop(BinOpKind.FLOORDIV if kind is BinOpKind.TDIV else BinOpKind.MOD, a, b)
    return not (isinstance(floor, Const) and floor.value == truncated.value)


_PING_PONG_STEPS = 256
"""The longest loop pldemu translates once per iteration to carry a swapped tensor (its program grows with it)."""

_TRUNCATING_HINT = {BinOpKind.TDIV: "quot", BinOpKind.TREM: "rem"}
"""The variable a truncating operator's value gets when it is not assigned to a name."""

_WRAPPING = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.DIV})
"""The scalar operators whose result can leave its integer dtype's range (and wraps on the device) or need more
precision than its float dtype has (and rounds there)."""


_TILE_MAKERS = frozenset({"pl.load", "pl.tile.load", "pl.create_tile", "pl.tile.create", "pl.tile.create_tile", "pl.tile.full",
                          "pl.aiv_shard", "pl.tile.aiv_shard"})
"""Ops whose result is a tile to pypto whatever their operands (a tensor's load, an allocation, a crossing)."""


def _call_operands(node: ast.Call) -> list[ast.expr]:
    return [*node.args, *(kw.value for kw in node.keywords)]


def _marked(tr: DeviceTranslator, e: ast.expr) -> bool:
    """A name bound to a tile that is a tensor to pypto (``Emit.tensor_slices``)."""
    v = tr.env.get(e.id) if isinstance(e, ast.Name) else None
    return isinstance(v, Var) and v.name in tr.emit.tensor_slices


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class DeviceTranslator(Evaluator):
    """Translates one function body (a fresh environment per inlined call)."""

    WHERE = "in a device function"

    def __init__(self, emit: Emit, fn: CapturedFunction, env: dict[str, Any], called: bool = False) -> None:
        super().__init__(emit.prog, env, emit.dims, fn)
        self.emit = emit
        if called:
            self.dims = {**emit.dims, **self.declared_dims(fn, env)}
            self.own_dims = True
        self.fn = fn
        self.fb = emit.fb
        self.carries: list[Carry] = []
        self.owned: dict[str, Var] = {}
        """The variable each tile or scalar name owns: re-binding the name assigns it (see :meth:`bind`)."""
        self.windows: dict[Var, Window] = {}
        """Variables holding a window of another tile (``pl.tile.slice`` of a tile), as :meth:`bind` keeps them."""
        self.carried: frozenset[str] = frozenset()
        """Names an enclosing loop or branch carries: they keep their type."""
        self.sibling_local: frozenset[str] = frozenset()
        """Names first bound in an earlier branch of an enclosing ``if`` (not before it): pypto's SSA scopes
        them to that branch, so a later branch that binds them again carries nothing of theirs."""
        self.loading_views = False
        """True while an op that takes no view (not in ``VIEW_OPS``) evaluates its arguments: a name bound to a
        view then gives the view loaded (:meth:`eval_Name`)."""

    # -- entry -------------------------------------------------------------------------------------

    def run(self) -> Any:
        try:
            return self.block(self.fn.node.body)
        except FrontendError:
            raise
        except (TypeError, ValueError) as err:
            raise self.error_here(f"in {self.fn.name}: {err}") from None

    def error_here(self, message: str) -> FrontendError:
        """An error at the statement being translated."""
        line = self.fb.origin.line if self.fb.origin is not None else self.fn.node.lineno
        return FrontendError(message, self.prog.file, line)

    def tensor_shape(self, value: Any) -> tuple[int, ...] | None:
        if isinstance(value, TensorView):
            return value.region.extents
        if not (isinstance(value, Var) and isinstance(value.type, TensorType)):
            return None
        return tuple(_extent(d, self.emit.nranks) for d in value.type.shape)

    def declared_dims(self, fn: CapturedFunction, env: Mapping[str, Any]) -> dict[str, int]:
        """The dynamic dims ``fn``'s parameter annotations declare, bound to this call's argument extents
        (pypto's specializer overlays a dependency's own ``pl.dynamic`` dims on its caller's shapes)."""
        out: dict[str, int] = {}
        for param in fn.params:
            ann = fn.annotations.get(param)
            shape = self.tensor_shape(env.get(param)) if isinstance(ann, TensorAnn) and ann.dims else None
            if shape is None or len(shape) != len(ann.dims):  # type: ignore[union-attr]
                continue
            out.update((d.name, e) for d, e in zip(ann.dims, shape, strict=True)  # type: ignore[union-attr]
                       if isinstance(d, DynVar) and isinstance(e, int))
        return out

    def tensor_meta(self, value: Any, attr: str, node: ast.AST) -> Any:
        if isinstance(value, TensorView) and attr == "dtype":
            return dtype_of_ir(value.dtype)
        return super().tensor_meta(value, attr, node)

    def hint(self, default: str) -> str:
        return self.lhs or default

    # -- statements --------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt]) -> Any:
        """Translate ``body``; the value of its ``return`` (None when it falls off the end)."""
        for i, s in enumerate(body):
            self.fb.origin = SourcePos(self.fn.file, s.lineno)
            if isinstance(s, ast.Return):
                return self.eval(s.value) if s.value is not None else None
            if isinstance(s, ast.If) and _returns(s.body) and not s.orelse:
                return self.early_return(s, body[i + 1:])
            self.stmt(s)
        return None

    def early_return(self, s: ast.If, rest: list[ast.stmt]) -> Any:
        cond = _folded(self.eval(s.test))
        if not is_ir(cond):
            return self.block(s.body) if cond else self.block(rest)
        with self.fb.if_(cond):
            first = self.block(s.body)
        with self.fb.else_():
            second = self.block(rest)
        return second if second is not None else first

    def bind(self, name: str, value: Any) -> None:
        """pypto's names are SSA values: binding ``name`` never changes what another name holds.

        A tile or scalar name owns one variable, and re-binding the name assigns that variable, so a loop
        or a branch that re-binds it is seen after it (and by the loop's next iteration). A value another
        name (or the caller) still holds is copied into a variable of this name's own; an expression of
        variables is evaluated here, into one, so re-binding those variables later does not change it."""
        window = self.windows.get(value) if isinstance(value, Var) else None
        self._bind(name, value)
        held = self.env.get(name)
        if isinstance(held, Var):  # the variable the name now holds is a window exactly when the value was
            if window is not None:
                self.windows[held] = window
            else:
                self.windows.pop(held, None)

    def _bind(self, name: str, value: Any) -> None:
        mine = self.owned.get(name)
        if mine is not None and name in self.carried:
            value = fit_to_carry(self.fb, mine, value)
        same = mine is not None and _variable_kind(value, python=True) and as_expr(value).type == mine.type
        if mine is not None and not same and name in self.carried:
            raise self.error_here(f"{name} is re-bound in a loop or branch that carries it as {_kind(mine)}, here to "
                             f"{_kind(value)}: pypto keeps one type per carried value (pl.cast it)")
        if same:
            assert mine is not None
            # the statement just emitted defines ``value`` for this binding alone unless a name holds it
            # (``prior = t[0]`` then ``tid = prior``: retargeting would take ``prior``'s definition away)
            fresh = isinstance(value, Var) and not self.holds(value)
            if not (fresh and self.fb.retarget_last(value, mine)) and value != mine:
                self.fb.assign(mine, as_expr(value))
            self.emit.assigned(mine)
            self.env[name] = mine
        elif not _variable_kind(value):
            self.owned.pop(name, None)  # tensors are references; Python values and constants fold
            self.env[name] = value
        elif isinstance(value, Var) and self.fb.assigned_last(value) and not self.holds(value):
            self.env[name] = self.owned[name] = value
        elif any(value in c.values for c in self.carries):
            # ``out = pl.yield_(...)`` names the loop's result, the carry variable itself (defined before the
            # loop, so it is defined after it): the name takes it over from the carried name.
            self.owned = {k: v for k, v in self.owned.items() if v != value}
            self.env[name] = self.owned[name] = value
        elif is_ir(value) and not isinstance(value, Const):
            self.env[name] = self.owned[name] = var = self.fb.let(name, value)
            if isinstance(var.type, ScalarType):
                self.emit.lets[var] = value
        else:
            self.owned.pop(name, None)
            self.env[name] = value

    def holds(self, value: Var) -> bool:
        """Whether some name of this function (a parameter: the caller's value) holds ``value``."""
        return any(isinstance(v, Var) and v == value for v in self.env.values())

    def own_before(self, body: list[ast.stmt], skip: frozenset[str] = frozenset()) -> frozenset[str]:
        """Give each tile or scalar name that ``body`` re-binds a variable of its own before the block:
        pypto carries it through a loop (and merges a branch's), so the block must assign, not re-bind.
        The names carried."""
        carried = set()
        for name in sorted(_assigned_names(body) - skip - self.sibling_local):
            value: Any = self.env.get(name)
            if not _variable_kind(value, python=True):
                continue
            if name not in self.owned:
                self.env[name] = self.owned[name] = self.fb.let(name, as_expr(value))
                self.keep_level(value, self.owned[name])
            carried.add(name)
        return frozenset(carried)

    @contextlib.contextmanager
    def carrying(self, names: frozenset[str]) -> Iterator[None]:
        """While a loop or branch that carries ``names`` is translated."""
        saved = self.carried
        self.carried = saved | names
        try:
            yield
        finally:
            self.carried = saved

    @contextlib.contextmanager
    def if_outputs(self) -> Iterator[None]:
        """While a branch of an ``if`` is translated: a ``pl.yield_`` there is the if's phi (pypto's parser
        emits it as the IfStmt's yield: ``valid = pl.yield_(n)`` in each branch binds ``valid`` after it)."""
        self.carries.append(Carry([], branch=True))
        try:
            yield
        finally:
            self.carries.pop()

    def branch(self, s: ast.If) -> None:
        cond = _folded(self.eval(s.test))
        if not is_ir(cond):
            with self.if_outputs():
                self.block(s.body if cond else s.orelse)
            return
        if _returns(s.body) or _returns(s.orelse):
            raise self.error("a `return` inside if/else is supported only as an early return "
                             "(an if without else whose body ends in return)", s)
        before = frozenset(self.env)
        merged = (_assigned_names(s.body) & _assigned_names(s.orelse)) - before
        phis: dict[str, Var] = {}
        with self.carrying(self.own_before([*s.body, *s.orelse])):
            with self.fb.if_(cond), self.if_outputs():
                self.block(s.body)
                self.merge_numbers(merged, phis)
            if s.orelse:
                saved, self.sibling_local = self.sibling_local, self.sibling_local | (frozenset(self.env) - before)
                try:
                    with self.fb.else_(), self.if_outputs():
                        self.block(s.orelse)
                        self.merge_numbers(merged, phis)
                finally:
                    self.sibling_local = saved

    def merge_numbers(self, names: frozenset[str], phis: dict[str, Var]) -> None:
        """At the end of a branch of a run-time ``if``: each of ``names`` (first bound in every branch) is one
        variable, ``phis``'s, that the branch assigns. pypto's parser binds ``kind = 1`` to a variable and
        its SSA conversion merges the branches' (a phi); folded, a Python number bound so would be the last
        branch's after the ``if``, whichever ran (pypto-lib's ``source_kind = 1`` / ``0``)."""
        for name in sorted(names):
            value, phi = self.env.get(name), phis.get(name)
            if phi is None:
                if isinstance(value, (int, float, Const)):  # a pl.const / pl.cast of a literal is a number too
                    phi = self.fb.let(name, as_expr(value))
                elif isinstance(value, Var) and _variable_kind(value):
                    phi = value
                else:
                    continue
                phis[name] = self.env[name] = self.owned[name] = phi
            elif value is not phi and isinstance(value, (int, float)) and (t := _number_type(phi, value)):
                self.fb.assign(phi, Const(value, t.dtype))
                self.env[name] = self.owned[name] = phi
            elif value is not phi and (fitted := _fit_phi(self.fb, phi, value)) is not None:
                # a tile or scalar of the phi's type (a tile's valid box or memory fitted as a carry's: pypto's
                # phi takes the first branch's type): the branch assigns the one variable
                self.fb.assign(phi, as_expr(fitted))
                self.env[name] = self.owned[name] = phi
            elif value is not phi and _variable_kind(value, python=True):
                # each branch keeps its own (read there, pypto scopes it so); read after the if it is an error
                self.owned.pop(name, None)
                self.env[name] = Unreadable(
                    f"{name} is {_kind(phi)} after one branch of the if above and {_kind(value)} after another: "
                    "pypto merges the branches' values into one variable of the first branch's type (its SSA "
                    "conversion's phi), so pldemu does not guess; pl.cast one branch's value to the other's type")

    def unroll_loop(self, s: ast.For) -> None:
        """``for i in pl.unroll(stop | start, stop[, step])``: the body once per index, the index a Python int.
        pypto's parser takes the bounds as ``range``'s (``parse_range_call``) and requires them static ints
        with a non-zero step; pypto-lib's merge loop is ``pl.unroll(1, PREFILL_ATTN_BLOCKS)``."""
        it = s.iter
        assert isinstance(it, ast.Call)
        bounds = [self.eval(a) for a in it.args]
        if (it.keywords or not 1 <= len(bounds) <= 3 or not isinstance(s.target, ast.Name)
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)):
            raise self.error("pl.unroll(stop | start, stop[, step]) needs static int bounds, no keywords and "
                             "one loop variable", s)
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
        if step == 0:
            raise self.error("pl.unroll(start, stop, step): the step cannot be zero", s)
        for i in range(start, stop, step):
            self.env[s.target.id] = i
            self.block(s.body)

    def loop(self, s: ast.For) -> None:
        if s.orelse:
            raise self.error("for ... else is not supported", s)
        it = s.iter
        name = dsl_callee(self, it)
        if (exit_ := early_exit.first_exit(s.body)) is not None:
            s = self.without_exits(s, name, exit_)
        if name == "pl.unroll":
            self.unroll_loop(s)
            return
        if name == "pl.spmd":
            spmd_loop(self, s)
            return
        if name == "pl.split_aiv":
            split_aiv_loop(self, s)
            return
        if name == "pl.while_":
            self.while_loop(s)
            return
        kind = LOOP_KINDS.get(name or "")
        if kind is None:
            raise self.error("device loops are `for i in pl.range(...)` (or pl.parallel, pl.pipeline, pl.spmd), "
                             "or `pl.unroll(...)`", s)
        assert isinstance(it, ast.Call) and name is not None
        bounds = [self.eval(a) for a in it.args]
        inits = [kw for kw in it.keywords if kw.arg == "init_values"]
        others = [kw.arg for kw in it.keywords if kw.arg not in LOOP_OPTIONS[name]]
        if others or not 1 <= len(bounds) <= 3:
            raise self.error(f"{name}(stop | start, stop[, step][, init_values=(...)])", it)
        var_node, carried_node = _loop_targets(self, s.target, bool(inits))
        carried = _target_names(carried_node) if carried_node is not None else frozenset()
        snapshot = (len(self.fb._blocks[-1]), dict(self.env), dict(self.owned))
        rebound = self.own_before(s.body, carried | {var_node.id})
        carry = self.start_carry(self.eval(inits[0].value)) if inits else None
        if carry is not None and carried_node is not None:
            self.bind_carried(carried_node, carry)
        start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
        bound_before = dict(self.env)
        with self.fb.for_range(start, stop, step, hint=var_node.id, kind=kind) as var, \
                self.carrying(rebound | carried):
            self.env[var_node.id] = var
            if carry is not None:
                self.carries.append(carry)
            self.emit.loops += 1
            try:
                self.block(s.body)
            finally:
                self.emit.loops -= 1
                if carry is not None:
                    self.carries.pop()
        swapped = self.swapped_tensors(bound_before, self.fb._blocks[-1][-1])
        if swapped:
            self.ping_pong(s, var_node.id, [start, stop, step], swapped, snapshot, bool(inits))
            return
        loop_local_outputs(self, bound_before)
        if self.env.get(var_node.id) is var:
            # The loop variable lives in the loop (pypto's IR scopes it): a later `d = ...` binds a new name,
            # not a carry of a variable the IR no longer defines.
            del self.env[var_node.id]

    def swapped_tensors(self, before: Mapping[str, Any], loop: Stmt) -> list[str]:
        """The names bound before a loop to a tensor that its body re-bound to a buffer it creates (``cur = nxt``
        of a ``pl.create_tensor`` in the loop): pypto's SSA carries them, the next iteration seeing the new one."""
        created = {st.var.name for st in walk_stmts([loop]) if isinstance(st, Assign)
                   and isinstance(st.value, Call) and st.value.op is Op.TENSOR_CREATE}

        def buffer(v: Any) -> str | None:
            if isinstance(v, TensorView):
                v = v.base
            if not (isinstance(v, Var) and isinstance(v.type, TensorType)):
                return None
            return self.emit.views.get(v.name, v.name)
        return sorted(n for n, old in before.items() if buffer(old) is not None
                      and buffer(self.env.get(n)) in created - {buffer(old)})

    def ping_pong(self, s: ast.For, var: str, bounds: list[Any], swapped: list[str],
                  snapshot: tuple[int, dict[str, Any], dict[str, Var]], carried: bool) -> None:
        """A loop whose body swaps a carried tensor for another buffer, translated again iteration by
        iteration (as ``pl.unroll``), each iteration seeing the buffer the last one bound: pldemu translates a
        loop body once, with each tensor fixed. A static trip count of at most ``_PING_PONG_STEPS`` only."""
        steps = range(*bounds) if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) else None
        if carried or steps is None or len(steps) > _PING_PONG_STEPS:
            raise self.error(f"{', '.join(swapped)}: re-bound inside this loop to another tensor (pypto carries "
                             "it: the next iteration sees the new buffer), which pldemu runs only in a loop of a "
                             f"static trip count of at most {_PING_PONG_STEPS} without init_values; write the "
                             "result into one tensor created before the loop (pl.assemble), or alternate two "
                             "buffers explicitly", s)
        length, env, owned = snapshot
        del self.fb._blocks[-1][length:]
        self.env.clear()
        self.env.update(env)
        self.owned = owned
        for i in steps:
            self.env[var] = i
            self.block(s.body)
        self.env.pop(var, None)

    def without_exits(self, s: ast.For, name: str | None, exit_: ast.stmt) -> ast.For:
        """``s`` with its ``break`` / ``continue`` lowered (``early_exit``), the break flag bound to 0 before it;
        refused where pypto's parser refuses them; in a loop with ``init_values`` as ``early_exit.rewrite_carried``
        resolves its ``pl.yield_`` at the exit, or refused where pypto's result is ill-defined."""
        word = "break" if isinstance(exit_, ast.Break) else "continue"
        if name in early_exit.REFUSED_LOOPS:
            raise self.error(f"pypto refuses it: '{word}' not supported in {early_exit.REFUSED_LOOPS[name]} loops: "
                             f"'{word}' can only be used in sequential (pl.range) or while loops", exit_)
        if isinstance(s.iter, ast.Call) and any(kw.arg == "init_values" for kw in s.iter.keywords):
            carried = s.target.elts[1] if isinstance(s.target, ast.Tuple) and len(s.target.elts) == 2 else None
            names = [n.id for n in (carried.elts if isinstance(carried, ast.Tuple) else [carried])
                     if isinstance(n, ast.Name)]
            found = early_exit.rewrite_carried(s.body, s, names)
            if isinstance(found, tuple):
                raise self.error(*found)
            lowered = found
        else:
            lowered = early_exit.rewrite(s.body, s)
        if lowered.flag is not None:
            self.env[lowered.flag] = 0
        return ast.copy_location(ast.For(target=s.target, iter=s.iter, body=lowered.body, orelse=s.orelse,
                                         type_comment=None), s)

    def while_loop(self, s: ast.For) -> None:
        """``for (x, ...) in pl.while_(init_values=(a, ...)):`` whose first statement is ``pl.cond(condition)``:
        pypto's while loop with carried values (``x_out = pl.yield_(...)`` re-assigns them, as in a ``pl.range``
        loop); pypto's parser's rules on its form, in its words."""
        it = s.iter
        assert isinstance(it, ast.Call)
        inits = it.keywords[0].value if [kw.arg for kw in it.keywords] == ["init_values"] else None
        if it.args or not isinstance(inits, (ast.Tuple, ast.List)) or not inits.elts:
            raise self.error("pypto refuses it: pl.while_() takes no positional arguments and requires init_values, "
                             "a tuple or list: pl.while_(init_values=(...,)) with pl.cond(condition) as the first "
                             "statement of its body", it)
        target = s.target
        if not (isinstance(target, ast.Tuple) and len(target.elts) == len(inits.elts)
                and all(isinstance(e, ast.Name) for e in target.elts)):
            raise self.error(f"pypto refuses it: While loop target must be a tuple of {len(inits.elts)} names for "
                             "pl.while_(): for (var1, var2) in pl.while_(init_values=(...,))", target)
        cond = _cond_of(self, s.body[0]) if s.body else None
        if cond is None or s.orelse:
            raise self.error("pypto refuses it: First statement in pl.while_() body must be pl.cond(condition) (and "
                             "no else)", s.body[0] if s.body else s)
        for later in s.body[1:]:
            if _cond_of(self, later) is not None:
                raise self.error("pypto refuses it: pl.cond() can only be the first statement in a pl.while_() loop "
                                 "body", later)
        carried = _target_names(target)
        rebound = self.own_before(s.body[1:], carried)
        carry = self.start_carry(self.eval(inits))
        self.bind_carried(target, carry)
        self.run_while(cond, s.body[1:], rebound | carried, carry, s)

    def stmt_While(self, s: ast.While) -> None:
        """``while condition:``: pypto's natural while loop; the names its body re-binds are carried, as a
        ``pl.range`` loop's are; ``break`` / ``continue`` are lowered as in a ``pl.range`` loop (``early_exit``)."""
        if s.orelse:
            raise self.error("while ... else is not supported", s)
        test, body = s.test, s.body
        if early_exit.first_exit(body) is not None:
            lowered = early_exit.rewrite(body, s)
            body, test = lowered.body, early_exit.while_test(test, lowered.flag)
            if lowered.flag is not None:
                self.env[lowered.flag] = 0
        self.run_while(test, body, self.own_before(body), None, s)

    def run_while(self, test: ast.expr, body: list[ast.stmt], names: frozenset[str], carry: Carry | None,
                  node: ast.AST) -> None:
        """An IR ``while`` of ``test``, evaluated before every iteration: an expression of the carried values that
        computes nothing into a variable of its own (that would run once, before the loop)."""
        block = self.fb._blocks[-1]
        before = len(block)
        cond = _folded(self.eval(test))
        if len(block) != before:
            raise self.error(f"while condition `{ast.unparse(test)}` computes a value before the loop (an op call, a "
                             "// or %): pldemu evaluates a while condition before every iteration as an expression of "
                             "its carried scalars; compute the value in the body into a carried name and test that", test)
        if not is_ir(cond):
            if cond:
                raise self.error(f"while condition `{ast.unparse(test)}` is always true: the loop never ends "
                                 "(pldemu's loops have no break)", test)
            return
        t = as_expr(cond).type
        if not (isinstance(t, ScalarType) and t.dtype is DType.BOOL):
            raise self.error(f"pypto refuses it: while condition must be a bool scalar, got `{ast.unparse(test)}` "
                             f"({_kind(cond)})", test)
        with self.fb.while_(cond), self.carrying(names):
            if carry is not None:
                self.carries.append(carry)
            self.emit.loops += 1
            try:
                self.block(body)
            finally:
                self.emit.loops -= 1
                if carry is not None:
                    self.carries.pop()

    def bind_carried(self, target: ast.expr, carry: Carry) -> None:
        """The loop's carried names: each owns its carry variable (a tensor is itself)."""
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(names) != len(carry.values) or not all(isinstance(n, ast.Name) for n in names):
            raise self.error(f"{len(carry.values)} init_values for {ast.unparse(target)!r}", target)
        for n, v in zip(names, carry.values, strict=True):
            assert isinstance(n, ast.Name)
            self.env[n.id] = v
            if Carry.rebound(v):
                self.owned.pop(n.id, None)
            else:
                self.owned[n.id] = v

    def start_carry(self, inits: Any) -> Carry:
        values = []
        for v in (inits if isinstance(inits, (tuple, list)) else (inits,)):
            if isinstance(v, TensorView) or (is_ir(v) and isinstance(v.type, TensorType)):
                values.append(v)
            else:
                # A tile or scalar is a value: one variable the loop's pl.yield_ re-assigns.
                values.append(self.fb.let("carry", as_expr(v)))
                self.keep_level(v, values[-1])
        return Carry(values)

    def keep_level(self, value: Any, carry: Var) -> None:
        """A carry keeps its init's type in pypto's IR: a tensor-level tile's carry variable is one too."""
        if isinstance(value, Var) and value.name in self.emit.tensor_slices:
            self.emit.tensor_slices.add(carry.name)

    # -- expressions -------------------------------------------------------------------------------

    def stmt_With(self, s: ast.With) -> None:
        with_stmt(self, s)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:  # type: ignore[override]
        """``tid: pl.Scalar[pl.TASK_ID] = None``: pypto's invalid task id, a seed later tasks re-bind."""
        if s.value is not None and isinstance(s.target, ast.Name) and _is_task_id(self, s.annotation):
            value = self.eval(s.value)
            self.bind(s.target.id, invalid_task() if value is None else value)
            return
        self.stmt_Assign(s)

    def call_dsl(self, name: str, node: ast.Call) -> Any:
        task_op = TASK_OPS.get(name)
        if task_op is not None:
            return task_op(self, node)
        handler = DEVICE_OPS.get(name)
        if handler is None:
            raise self.error(f"{name} is not supported in a device function", node)
        marked = len(self.emit.tensor_slices)
        loading = self.loading_views
        with self.views_loaded(name not in VIEW_OPS):
            result = handler(self, node)
        if loading and isinstance(result, TensorView):  # a view op's view as another op's operand: read through it
            result = load_view(self, result, node)
        if isinstance(result, Var) and isinstance(result.type, TileType) and name not in _TILE_MAKERS and (
                len(self.emit.tensor_slices) > marked or any(_marked(self, a) for a in _call_operands(node))):
            self.emit.tensor_slices.add(result.name)  # an op of a tensor-level operand is tensor-level (pypto)
        return result

    @contextlib.contextmanager
    def views_loaded(self, loaded: bool) -> Iterator[None]:
        """Names bound to views give the view itself (``loaded`` False) or its loaded tile, meanwhile."""
        saved, self.loading_views = self.loading_views, loaded
        try:
            yield
        finally:
            self.loading_views = saved

    def eval_Name(self, node: ast.Name) -> Any:
        value = super().eval_Name(node)
        if isinstance(value, Unreadable):
            raise self.error(value.message, node)
        return load_view(self, value, node) if self.loading_views and isinstance(value, TensorView) else value

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        with self.views_loaded(False):  # a subscript of a view reads its base's region
            base = self.eval(node.value)
        return self.subscript(base, node)

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        with self.views_loaded(False):  # a view's .shape / .dtype are its own, as pl.jit folds them
            return super().eval_Attribute(node)

    def call_self(self, node: ast.Call, name: str) -> Any:
        fn = self.callee_function(node, name)
        if any(kw.arg == "device" for kw in node.keywords):
            raise self.error("device= is a HOST-level dispatch argument", node)
        with self.views_loaded(False):  # a view passed to a tensor parameter is that tensor (pypto's inliner)
            args = [self.eval(a) for a in node.args]
            kwargs = {kw.arg: self.eval(kw.value) for kw in node.keywords if kw.arg is not None}
        if fn.kind is Kind.INCORE and not in_kernel(self):  # a kernel's parameter is its annotation's type
            args, kwargs = [_whole(a) for a in args], {k: _whole(v) for k, v in kwargs.items()}
        if fn.kind is Kind.INCORE and self.fn.kind is Kind.ORCHESTRATION and not self.emit.tasks.depth:
            return kernel_call(self, fn, node, lambda: inline(self.emit, fn, args, kwargs, node))
        return inline(self.emit, fn, args, kwargs, node)

    def subscript(self, base: Any, node: ast.Subscript) -> Any:
        """``t[i, j]`` of a tensor (all indices scalars, one per dim) is ``tensor.read``; any other
        subscript of a tensor is its slice, loaded where it is made (pypto's ConvertTensorToTileOps); of a
        tile, all scalars are ``tile.read`` (pypto's parser), any other subscript its ``tile.slice``."""
        if isinstance(base, Var) and isinstance(base.type, TileType):
            region = subscript_region(self, base, self.indices(node), node)
            if len(region.drop) == len(region.extents):
                return self.fb.pld.tile.read(base, list(region.offsets), hint=self.hint("val"))
            window = slice_tile(self, base, region, node)
            if base.name in self.emit.tensor_slices:  # a window of a tensor is a tensor to pypto's dispatch
                self.emit.tensor_slices.add(window.name)
            return window
        if not (is_tensor(base) or isinstance(base, TensorView)):
            return super().subscript(base, node)
        region = subscript_region(self, base, self.indices(node), node)
        if len(region.drop) == len(region.extents):
            return self.fb.pld.tensor.read(*_read_at(base, region))
        return tensor_region(self, base, region, node)

    def indices(self, node: ast.Subscript) -> list[Any]:
        """A subscript's items: a ``slice`` of evaluated bounds, or an evaluated scalar index."""
        items = []
        for e in node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]:
            if not isinstance(e, ast.Slice):
                items.append(self.eval(e))
                continue
            if e.step is not None:
                raise self.error(f"a slice step is not supported in {ast.unparse(node)!r} (t[a:b])", node)
            items.append(slice(None if e.lower is None else self.eval(e.lower),
                               None if e.upper is None else self.eval(e.upper)))
        return items

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Subscript):
            self.assign_region(target, value)
        else:
            super().assign(target, value)

    def assign_region(self, target: ast.Subscript, value: Any) -> None:
        """``dst[a:b, c:d] = v``: pypto's ``dst = tensor.assemble(dst, v, [a, c])``, a store of the value
        (a tile, or a tensor loaded whole) into the region; ``dst`` stays the same tensor."""
        what = f"{ast.unparse(target)} = ..."
        if not isinstance(target.value, ast.Name):
            raise self.error(f"{what}: the target of a slice assignment must be a name (dst[a:b] = v)", target)
        dst = self.eval(target.value)
        if isinstance(dst, Var) and isinstance(dst.type, TileType):
            self.bind(target.value.id, assemble_tile(self, dst, self.indices(target), value, target))
            return
        if not (is_tensor(dst) or isinstance(dst, TensorView)):
            raise self.error(f"{what}: {target.value.id} must be a tensor or a tile, got {dst!r}", target)
        region = subscript_region(self, dst, self.indices(target), target)
        if len(region.drop) == len(region.extents) and arrays.is_array(self, dst):
            arrays.write(self, dst, region.offsets[0], value, target)  # pypto's array.update_element
            return
        if len(region.drop) == len(region.extents):
            raise self.error(f"{what}: an element write is not supported (as in pypto): use pl.write(dst, "
                             "[i, j], value), or slices (dst[i:i + 1, j:j + 1] = v)", target)
        store_region(self, value, *based(dst, region), target, what)

    def binary(self, op: ast.operator, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        """A device scalar expression, typed as pypto types it: the operands are promoted to the wider of
        their dtypes (``INT32 + 1`` is ``index``), and the dtype rules of pypto and ptoas apply."""
        if not (is_ir(lhs) or is_ir(rhs)):
            return super().binary(op, lhs, rhs, node)
        kind, name = _IR_BINOPS.get(type(op), (None, ""))
        if kind is None:
            raise self.error(f"unsupported scalar operator in {ast.unparse(node)!r}", node)
        a, b = self.promoted(name, as_expr(lhs), as_expr(rhs), node)
        typed = BinOp(kind, a, b)
        if kind is BinOpKind.DIV and not typed.type.dtype.is_float:
            raise self.error(f"{ast.unparse(node)}: `/` of {typed.type.dtype.value} scalars: pldemu runs pypto's "
                             "FloatDiv on floats only (pl.cast an operand to a float type, or use //)", node)
        folded = binop(kind, a, b)
        # The folding identities (x + 0 is x) would drop pypto's promotion of x to the wider dtype.
        out = folded if folded.type == typed.type else typed
        if isinstance(out, Const) and kind.is_truncating and _floor_differs(kind, a, b, out):
            out = typed  # runs on the device, where the value is C's and the finding is reported
        if not (isinstance(out, BinOp) and out.op.is_truncating):
            return self.wrapped(out, kind)
        # Computed once, where the user wrote it, as on the device: a name bound to it and used in three
        # statements is one site of the run's truncation findings, at this line.
        self.emit.truncating[(str(self.fb.origin or ""), format_expr(out))] = ast.unparse(node)
        var = self.fb.let(self.hint(_TRUNCATING_HINT[kind]), out)
        # Remembered as a scalar name's binding is, so that a slice's bounds written with it twice
        # (`t[p % B:p % B + 1]`, two variables here) still subtract to a static extent, as pypto's simplifier
        # folds them.
        self.emit.lets[var] = out
        return var

    def promoted(self, name: str, a: Expr, b: Expr, node: ast.AST) -> tuple[Expr, Expr]:
        """The operands of pypto's scalar operator ``name`` (PromoteBinaryOperands): its refusals, then each
        operand cast to the promoted dtype where the cast changes the value (``INT32(-1)`` as UINT32 is
        4294967295, an FP16 as BF16 rounds), so that a comparison or a division sees what the device does."""
        # a pl.at / pl.spmd body is an InCore kernel once pypto outlines it: the AI core's rules hold there too
        where = Kind.INCORE if in_kernel(self) else self.fn.kind
        for rule in _SCALAR_RULES:
            message = rule(where, name, a.type, b.type)
            if message is not None:
                raise self.error(f"{ast.unparse(node)}: {message}", node)
        if not (isinstance(a.type, ScalarType) and isinstance(b.type, ScalarType)):
            return a, b
        dtype = join_scalar(a.type, b.type)
        return self.held_as(a, dtype), self.held_as(b, dtype)

    def held_as(self, value: Expr, dtype: DType) -> Expr:
        """``value`` as pypto's MaybeCast leaves it in ``dtype``: itself where every value converts exactly."""
        src = value.type.dtype if isinstance(value.type, ScalarType) else dtype
        if _exact_cast(src, dtype):
            return value
        if isinstance(value, Const):
            held = scalar_as(dtype.np, value.value)
            return Const(int(held) if dtype.is_int else float(held), dtype)
        return self.fb.pld.tile.scalar_cast(value, dtype, hint=self.hint("cast"))

    def wrapped(self, value: Expr, kind: BinOpKind) -> Expr:
        """A ``+ - *`` of a fixed-width dtype as the device's register holds it. pypto types ``INT32 + INT32``
        INT32 and ``FP32 * FP32`` FP32 (PromoteSameCategoryDtype) and its code generators emit ``arith.addi`` on
        i32 / ``arith.mulf`` on f32 (C's ``int32_t`` / ``float`` in an Orchestration): an integer wraps, a float
        rounds to its dtype at every operation, while pldemu's IR scalars are exact integers and doubles; so the
        value is cast to its own dtype (``scalar.cast`` wraps or rounds), and a folded constant converted here.
        INDEX (64-bit) is left exact."""
        dtype = value.type.dtype if isinstance(value.type, ScalarType) else None
        if kind not in _WRAPPING or dtype is None or dtype is DType.INDEX or not (dtype.is_int or dtype.is_float):
            return value
        if isinstance(value, Const):
            held = scalar_as(dtype.np, value.value)
            return Const(int(held) if dtype.is_int else float(held), dtype)
        if not isinstance(value, BinOp):
            return value  # an identity folded away (x + 0): x is in range already
        return self.fb.pld.tile.scalar_cast(value, dtype, hint=self.hint("held"))

    def negate(self, value: Any, node: ast.AST) -> Any:
        if not is_ir(value):
            return super().negate(value, node)
        t = as_expr(value).type
        zero = Const(0.0 if t.dtype.is_float else 0, t.dtype) if isinstance(t, ScalarType) else 0
        return self.binary(ast.Sub(), zero, value, node)  # a negation (arith.negf on a float), not an addf

    def compare(self, op: ast.cmpop, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        if not (is_ir(lhs) or is_ir(rhs)):
            return super().compare(op, lhs, rhs, node)
        method = _IR_CMP.get(type(op))
        if method is None:
            raise self.error(f"unsupported comparison in {ast.unparse(node)!r}", node)
        a, b = self.promoted(method, as_expr(lhs), as_expr(rhs), node)
        return getattr(a, method)(b)

    def logical(self, is_and: bool, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        if not (is_ir(lhs) or is_ir(rhs)):
            return super().logical(is_and, lhs, rhs, node)
        return binop(BinOpKind.AND if is_and else BinOpKind.OR, lhs, rhs)

    def logical_not(self, value: Any, node: ast.AST) -> Any:
        return as_expr(value).eq(False) if is_ir(value) else not value


def _is_task_id(tr: DeviceTranslator, annotation: ast.expr) -> bool:
    """``pl.Scalar[pl.TASK_ID]``."""
    try:
        ann = tr.eval(annotation)
    except FrontendError:
        return False
    return isinstance(ann, ScalarAnn) and ann.dtype is TASK_ID


def _extent(d: Any, nranks: int) -> int:
    """A shape entry as the int it is at ``nranks`` ranks (a :class:`SymInt` where it depends on ``NR``)."""
    value = eval_nr(d, nranks)
    if value is None:
        return d  # not static: the IR expression itself
    return value if isinstance(d, Const) else SymInt(value, d)


def _exact_cast(src: DType, dst: DType) -> bool:
    """Every ``src`` value is the same number in ``dst`` (a widening that keeps the sign; INDEX and INT64 are
    one C++ ``int64_t``); BOOL and non-numeric pairs are left alone (pypto refuses them in an operator)."""
    if src is dst or {src, dst} <= {DType.INDEX, DType.INT64} or not (src.is_int or src.is_float):
        return True
    if src.is_float != dst.is_float:
        return True
    wider = dst.itemsize > src.itemsize
    return wider if src.is_float else wider and (src.int_range()[0] == 0 or dst.int_range()[0] < 0)


def _bool_operand(kind: Kind, name: str, a: Type, b: Type) -> str | None:
    """pypto's PromoteSameCategoryDtype: a bool scalar takes no part in arithmetic or a comparison."""
    if not any(isinstance(t, ScalarType) and t.dtype is DType.BOOL for t in (a, b)):
        return None
    return f"pypto refuses it: Operator '{name}' does not accept bool dtype (pl.cast it to an integer)"


def _mixed_categories(kind: Kind, name: str, a: Type, b: Type) -> str | None:
    """pypto's parser (PromoteSameCategoryDtype): a float and an integer scalar do not combine."""
    da, db = (t.dtype if isinstance(t, ScalarType) else None for t in (a, b))
    if da is None or db is None or da.is_float == db.is_float:
        return None
    return (f"pypto refuses it: Operator '{name}' requires same numeric dtype category, got {da.value} and "
            f"{db.value} (pl.cast one operand)")


def _float_add_in_kernel(kind: Kind, name: str, a: Type, b: Type) -> str | None:
    """ptoas has no lowering for a scalar ``arith.addf`` on the AI core (subf, mulf, divf and negf it lowers):
    pypto's PTO code generator emits one for a float scalar ``+`` in an InCore kernel."""
    if kind is not Kind.INCORE or name != "add" or not any(
            isinstance(t, ScalarType) and t.dtype.is_float for t in (a, b)):
        return None
    return ("scalar float arithmetic on the AI core: ptoas refuses it (failed to legalize operation "
            "'arith.addf' that was explicitly marked illegal); fold the value into a tile op instead "
            "(pl.add(tile, scalar))")


_SCALAR_RULES: tuple[Callable[[Kind, str, Type, Type], str | None], ...] = (
    _bool_operand, _mixed_categories, _float_add_in_kernel)
"""pypto's and ptoas's refusals of a device scalar expression: each gives its message, or None."""

_IR_BINOPS: Mapping[type[ast.operator], tuple[BinOpKind, str]] = MappingProxyType({
    ast.Add: (BinOpKind.ADD, "add"), ast.Sub: (BinOpKind.SUB, "sub"), ast.Mult: (BinOpKind.MUL, "mul"),
    # pypto's FloorDiv / FloorMod become arith.divsi / arith.remsi (InCore, pto_scalar_expr_codegen.cpp)
    # and C `/` / `%` (Orchestration, codegen_base.cpp): the device truncates.
    ast.FloorDiv: (BinOpKind.TDIV, "floordiv"), ast.Mod: (BinOpKind.TREM, "mod"),
    ast.Div: (BinOpKind.DIV, "truediv"),  # pypto's FloatDiv: arith.divf (InCore), C's float `/` (Orchestration)
})
"""A device scalar operator: the pldemu operator the device evaluates it with, and pypto's name for it."""


def _folded(cond: Any) -> Any:
    """A condition known at translation time as its Python value (a constant folds: the rank's block has it)."""
    return cond.value if isinstance(cond, Const) else cond


def _variable_kind(value: Any, python: bool = False) -> bool:
    """A tile or scalar value a name may own a variable for (with ``python``: a Python number too)."""
    if python and isinstance(value, (int, float)):
        return True
    return is_ir(value) and isinstance(as_expr(value).type, (ScalarType, TileType))


def _fit_phi(fb: Any, phi: Var, value: Any) -> Any:
    """``value`` as the phi ``phi`` of an ``if`` takes it (its valid box or memory space fitted, as a loop carry's),
    or None when it is not a tile or scalar variable of the phi's type."""
    if not (isinstance(value, Var) and _variable_kind(value)):
        return None
    fitted = fit_to_carry(fb, phi, value)
    return fitted if as_expr(fitted).type == phi.type else None


def _number_type(v: Var, value: int | float) -> ScalarType | None:
    """``v``'s scalar type when it takes the literal ``value`` as pypto's constants do (an int any scalar type, a
    float only a float type); None for other pairs: each branch keeps its own binding (pypto scopes it there)."""
    t = v.type
    return t if isinstance(t, ScalarType) and (t.dtype.is_float or not isinstance(value, float)) else None


def _kind(value: Any) -> str:
    if not _variable_kind(value, python=True):
        return type(value).__name__
    t = as_expr(value).type
    if isinstance(t, TileType):
        return f"a {list(t.shape)} {t.dtype.value} tile"
    return f"a {t.dtype.value} scalar" if isinstance(t, ScalarType) else repr(value)


def _target_names(target: ast.expr) -> frozenset[str]:
    if isinstance(target, ast.Name):
        return frozenset({target.id})
    if isinstance(target, (ast.Tuple, ast.List)):
        return frozenset().union(*(_target_names(t) for t in target.elts))
    return frozenset()


def _assigned_names(body: list[ast.stmt]) -> frozenset[str]:
    """The names ``body`` binds by assignment (at any depth; loop variables are not re-bindings)."""
    out: frozenset[str] = frozenset()
    for node in (n for s in body for n in ast.walk(s)):
        if isinstance(node, ast.Assign):
            out = out.union(*(_target_names(t) for t in node.targets))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out |= _target_names(node.target)
    return out


def _whole(arg: Any) -> Any:
    """An argument of a kernel called from the orchestration level: a view fully valid (pypto compiles the
    kernel with the parameter's shape and dtype, no valid shape: the kernel reads the whole window)."""
    return arg.whole() if isinstance(arg, TensorView) else arg


def _read_at(t: Var | TensorView, region: Region) -> tuple[Var, list[Any]]:
    """The tensor and indices of an element read (a view's at its base)."""
    base, at = based(t, region)
    return base, list(at.offsets)


def _returns(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return)




def _cond_of(tr: DeviceTranslator, s: ast.stmt) -> ast.expr | None:
    """The condition of a ``pl.cond(condition)`` statement; None for any other statement."""
    if not (isinstance(s, ast.Expr) and dsl_callee(tr, s.value) == "pl.cond"):
        return None
    assert isinstance(s.value, ast.Call)
    if len(s.value.args) != 1 or s.value.keywords:
        raise tr.error("pypto refuses it: pl.cond() requires exactly 1 argument: pl.cond(condition)", s)
    return s.value.args[0]


def _loop_targets(tr: DeviceTranslator, target: ast.expr, carried: bool) -> tuple[ast.Name, ast.expr | None]:
    if not carried and isinstance(target, ast.Name):
        return target, None
    if carried and isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name):
        return target.elts[0], target.elts[1]
    raise tr.error("loop target must be `i`, or `i, (a, ...)` with init_values=", target)


def inline(emit: Emit, fn: CapturedFunction, args: list[Any], kwargs: dict[str, Any], node: ast.AST,
           dispatched: bool = False) -> Any:
    """Translate a call of ``fn`` with its parameters bound to ``args`` / ``kwargs``; its return value.
    ``dispatched``: a HOST dispatch (whose scalar arguments are run-time values on the device), not a
    call inside a device body (where ``pl.jit`` specialises a Python number passed on, as pypto's
    specializer takes a dependency's scalars from its caller's call site)."""
    if len(args) > len(fn.params):
        raise emit.prog.error(f"self.{fn.name} takes {len(fn.params)} arguments, got {len(args)}", node)
    bound = dict(zip(fn.params, args, strict=False))
    for k, v in kwargs.items():
        if k not in fn.params or k in bound:
            raise emit.prog.error(f"self.{fn.name}: unexpected or repeated argument {k!r}", node)
        bound[k] = v
    for p, default in fn.defaults.items():
        bound.setdefault(p, default)
    missing = [p for p in fn.params if p not in bound]
    if missing:
        raise emit.prog.error(f"self.{fn.name}: missing argument(s) {', '.join(missing)}", node)
    for p, v in bound.items():
        v = bound[p] = window_view(emit, fn.annotations.get(p), v)
        check_argument(emit.prog, fn, p, v, node, isinstance(v, Var) and v.name in emit.tensor_slices)
        literal = bool(emit.prog.jit_names) and not dispatched and isinstance(v, (int, float))
        bound[p] = v if literal else _device_scalar(fn.annotations.get(p), v)
    saved = emit.fb.origin
    try:
        return DeviceTranslator(emit, fn, dict(bound), called=True).run()
    finally:
        emit.fb.origin = saved


def _device_scalar(ann: Any, value: Any) -> Any:
    """A Python number passed to a ``pl.Scalar[dtype]`` parameter, as the typed device scalar it is in pypto
    (a constant of ``dtype``: it still folds in the rank's block, and its dtype is checked where pypto
    checks it, e.g. ``pl.cast`` of an index-typed expression)."""
    if isinstance(value, (BakedInt, BakedFloat)):  # a pl.jit literal: folds as Python (pypto's simplifier) does
        return int(value) if isinstance(value, int) else float(value)
    if not isinstance(ann, ScalarAnn) or is_ir(value):
        return value
    dtype = ann.dtype.ir
    return Const(float(value) if dtype.is_float else int(value), dtype)


def _check_tensor_tile(prog: CapturedProgram, fn: CapturedFunction, param: str, ann: TensorAnn, value: Var,
                       node: ast.AST) -> None:
    t = value.type
    assert isinstance(t, TileType)
    if ann.dtype is not None and t.dtype != ann.dtype.ir:
        raise prog.error(f"self.{fn.name}: {param} is {ann.dtype!r}, got a {t.dtype.value} tensor", node)
    dims = None if ann.dims is None else [d if isinstance(d, int) and not isinstance(d, bool) else None
                                          for d in ann.dims]
    if dims is not None and (len(dims) != len(t.shape) or any(d not in (None, e) for d, e in zip(dims, t.shape,
                                                                                                  strict=True))):
        raise prog.error(f"self.{fn.name}: {param} is a {list(ann.dims or ())} tensor, got a {list(t.shape)} "
                         f"slice ({value.name})", node)


def window_view(emit: Emit, ann: Any, value: Any) -> Any:
    """A window passed to a ``pld.DistributedTensor`` parameter of another rank with the same element count
    (pypto's ``pld.window(buf, [SIZE])`` into ``[1, SIZE]``): a ``tensor.view`` of the same cells with the
    parameter's shape, as the callee sees it in pypto (it reads the window through its own declared
    shape); anything else unchanged, for ``check_argument`` to judge."""
    t = getattr(value, "type", None)
    if (not isinstance(ann, TensorAnn) or not ann.distributed or ann.dims is None or not isinstance(t, TensorType)
            or not t.window or len(ann.dims) == len(t.shape) or not isinstance(value, Var)):
        return value
    dims = [dim_value(d, emit.dims) for d in ann.dims]
    have = [eval_nr(d, emit.nranks) for d in t.shape]
    if None in have or math.prod(int(d) for d in dims) != math.prod(int(h) for h in have if h is not None):
        return value
    view = emit.fb.pld.tensor.view(value, [dim_expr(d) for d in dims])
    emit.views[view.name] = emit.views.get(value.name, value.name)
    return view


def check_argument(prog: CapturedProgram, fn: CapturedFunction, param: str, value: Any, node: ast.AST,
                   tensor_level: bool = False) -> None:
    """The argument matches the parameter's annotation kind and dtype (a view: a tensor of its extents; a tile
    that is a tensor to pypto, ``tensor_level``: one of its dtype and extents)."""
    ann = fn.annotations.get(param)
    if isinstance(ann, TensorAnn) and isinstance(value, TensorView):
        check_view_argument(prog, fn, param, ann, value, node)
    elif isinstance(ann, TensorAnn) and tensor_level:
        # a kernel's tensor slice handed to an inline function: pypto inlines the call before it converts
        # tensor ops to tile ops, so the parameter is that slice, loaded where it was made
        _check_tensor_tile(prog, fn, param, ann, value, node)
    elif isinstance(ann, TensorAnn):
        t = getattr(value, "type", None)
        if isinstance(t, TileType):
            raise prog.error(f"self.{fn.name}: {param} is a tensor parameter, got a tile ({value.name}): "
                             "pldemu loads a tensor slice (x[a:b], pl.slice) or a tensor-level op's value onto "
                             "the core where it is made; pass the tensor (and the offsets)", node)
        if not isinstance(t, TensorType):
            raise prog.error(f"self.{fn.name}: {param} is a tensor parameter, got {value!r}", node)
        if ann.dtype is not None and t.dtype != ann.dtype.ir:
            raise prog.error(f"self.{fn.name}: {param} is {ann.dtype!r}, got a {t.dtype.value} tensor", node)
        if ann.distributed and not t.window:
            raise prog.error(f"self.{fn.name}: {param} is a pld.DistributedTensor; pass a window "
                             "(pld.window of an alloc_window_buffer), not a host tensor", node)
        if ann.dims is not None and len(ann.dims) != len(t.shape):
            same = " (a window of another rank is accepted where its element count is the parameter's)"
            raise prog.error(f"self.{fn.name}: {param} has {len(ann.dims)} dims, the argument "
                             f"{len(t.shape)}{same if ann.distributed else ''}", node)
    elif isinstance(ann, TileAnn):
        t = getattr(value, "type", None)
        if not isinstance(t, TileType) or t.dtype != ann.dtype.ir or len(t.shape) != len(ann.dims):
            raise prog.error(f"self.{fn.name}: {param} is a pl.Tile of {len(ann.dims)} dims of {ann.dtype!r}, got "
                             f"{value!r}", node)
    elif isinstance(ann, ArrayAnn):
        t = getattr(value, "type", None)
        if not (isinstance(t, TensorType) and t.dtype == ann.dtype.ir and len(t.shape) == 1
                and eval_nr(t.shape[0], 1) == ann.extent):
            raise prog.error(f"self.{fn.name}: {param} is a pl.Array[{ann.extent}, {ann.dtype!r}], got {value!r}",
                             node)
    elif isinstance(ann, ScalarAnn) and not (is_ir(value) or isinstance(value, (int, float))):
        raise prog.error(f"self.{fn.name}: {param} is a pl.Scalar, got {value!r}", node)
    elif ann is None and param in fn.params and not prog.jit_names and not fn.inferred:  # else typed by its argument
        raise prog.error(f"self.{fn.name}: parameter {param} has no annotation", fn.node)


def check_view_argument(prog: CapturedProgram, fn: CapturedFunction, param: str, ann: TensorAnn, view: TensorView,
                        node: ast.AST) -> None:
    """A view (a slice) passed to a tensor parameter: the parameter's dtype and rank; not a window parameter."""
    rank = len(view.region.extents)
    if ann.dtype is not None and view.dtype != ann.dtype.ir:
        raise prog.error(f"self.{fn.name}: {param} is {ann.dtype!r}, got a view of a {view.dtype.value} tensor", node)
    if ann.distributed:
        raise prog.error(f"self.{fn.name}: {param} is a pld.DistributedTensor; pass a window, not a slice", node)
    if ann.dims is not None and len(ann.dims) != rank:
        raise prog.error(f"self.{fn.name}: {param} has {len(ann.dims)} dims, the argument (a slice of "
                         f"{view.base.name}) {rank}", node)


__all__ = ["DeviceTranslator", "Emit", "inline"]
