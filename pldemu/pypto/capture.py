"""``@pl.program`` / ``@pl.function``: capture a class from its source, as pypto's parser does.

Nothing in a method body runs. ``@pl.function`` on a method only records its kind; ``@pl.program``
reads the class source (``inspect`` + ``ast``), keeps the decorating frame's globals and locals as the
closure (factory functions close over sizes, dtypes, roots) and each method's evaluated annotations,
and checks every name a body uses, so an unknown ``pl`` name or an undefined variable is reported at
decoration time with the user's file:line.
"""

from __future__ import annotations

import ast
import builtins
import collections
import dataclasses
import enum
import linecache
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from pldemu.pypto.errors import NOT_RUN, FrontendError, not_provided, pypto_name_of
from pldemu.pypto.types import plain_annotation


class Kind(enum.Enum):
    """What a ``@pl.function`` is: a kernel, a per-device orchestration, the host orchestrator, or a
    helper spliced at its call sites (``pl.jit.inline`` / ``pl.jit.opaque``)."""

    INCORE = "InCore"
    ORCHESTRATION = "Orchestration"
    HOST = "HOST"
    SUB_WORKER = "SubWorker"
    INLINE = "Inline"
    OPAQUE = "Opaque"


@dataclasses.dataclass(frozen=True)
class FunctionAttrs:
    """What ``@pl.function(...)`` recorded on a method."""

    kind: Kind


ATTRS = "__pypto_function__"
HOST_LEVEL = frozenset({Kind.HOST, Kind.SUB_WORKER})
"""The kinds of function at pypto's HOST level or above (Linqu level >= 3)."""


def function(func: Callable[..., Any] | None = None, *, type: Any = None, level: Any = None, role: Any = None,
             attrs: Any = None, auto_scope: bool = True, strict_ssa: bool = False,
             external_source: Any = None) -> Any:
    """``@pl.function`` (pypto's default type, Opaque), ``@pl.function(type=pl.FunctionType.InCore)`` or
    ``(level=pl.Level.HOST, role=...)``. ``attrs=``, ``auto_scope=`` and ``strict_ssa=`` change nothing a
    program computes here; ``external_source=`` (a kernel written in C++) is refused."""
    if external_source is not None:
        raise TypeError("@pl.function(external_source=...): pldemu runs pypto's DSL, not a kernel's C++ source")
    if level is not None:
        if getattr(level, "value", None) != "HOST":
            raise TypeError(f"@pl.function: level= takes pl.Level.HOST (the HOST orchestrator), got {level!r}")
        kind = Kind.SUB_WORKER if getattr(role, "value", None) == "SubWorker" else Kind.HOST
    elif type is None or getattr(type, "value", None) in ("InCore", "Orchestration", "Opaque", "Inline"):
        kind = Kind.OPAQUE if type is None else Kind(type.value)
    else:
        raise TypeError(f"@pl.function: type= must be pl.FunctionType.Opaque, InCore, Orchestration or Inline, got "
                        f"{type!r}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, ATTRS, FunctionAttrs(kind))
        return fn

    return mark if func is None else mark(func)


_INCORE_SCOPES = frozenset({"at", "incore", "spmd", "cluster", "auto_incore"})


def _outlined_kind(kind: Kind, node: ast.FunctionDef) -> Kind:
    """An Opaque function with an InCore scope (``with pl.at(...)``, ``pl.spmd``, ...) is an Orchestration:
    pypto's OutlineIncoreScopes outlines the scopes into kernels and promotes the function; one without
    stays an Opaque helper, spliced where it is called."""
    scoped = any(isinstance(w, ast.With) and any(
        isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Attribute)
        and i.context_expr.func.attr in _INCORE_SCOPES for i in w.items) for w in ast.walk(node))
    return Kind.ORCHESTRATION if kind is Kind.OPAQUE and scoped else kind


@dataclasses.dataclass(frozen=True)
class CapturedFunction:
    """One ``@pl.function`` method or ``pl.jit`` function: its AST (lines already in file coordinates),
    annotations, the file it is written in and the names its body sees (``closure``)."""

    name: str
    kind: Kind
    node: ast.FunctionDef
    params: tuple[str, ...]
    annotations: Mapping[str, Any]
    file: str
    closure: Mapping[str, Any] = dataclasses.field(repr=False)
    """Not in the repr: a module's globals hold its programs, whose closures hold the globals again (pytest's
    report of a failing test reprs every frame's arguments: minutes, gigabytes)."""
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Parameter defaults (``pl.jit`` functions; a ``@pl.program`` method has none)."""
    python: Callable[..., Any] | None = dataclasses.field(default=None, compare=False)
    """A SubWorker's own Python function: it runs as Python, in the process that called the program."""
    inferred: bool = False
    """Its parameters are typed by their arguments (an outlined HOST ``pl.at`` scope: ``translate.outline``)."""

    @property
    def abstract(self) -> bool:
        """A SubWorker whose body is only ``...`` (or a docstring and ``...``): a callback point that
        ``prepare(callbacks=)`` must bind."""
        body = [s for s in self.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                  and isinstance(s.value.value, str))]
        return self.kind is Kind.SUB_WORKER and (not body or all(
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis
            for s in body))


@dataclasses.dataclass(frozen=True)
class CapturedProgram:
    """What ``@pl.program`` returns in place of the class (pypto returns an ``ir.Program``)."""

    name: str
    file: str
    functions: Mapping[str, CapturedFunction]
    closure: Mapping[str, Any] = dataclasses.field(repr=False)
    specialized: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Host scalar parameters baked into the program (``pl.jit``: a scalar argument is specialised, its
    value part of the cache key); a call's own value for them is not read."""
    jit_names: Mapping[Any, str] = dataclasses.field(default_factory=dict, compare=False)
    """``pl.jit`` function object -> the name of its function in this program."""
    node_files: Mapping[int, str] = dataclasses.field(default_factory=dict, compare=False)
    """``id(node)`` -> file, for the AST nodes of functions written in another file than ``file``
    (``pl.jit`` helpers imported from another module)."""
    line: int = dataclasses.field(default=0, compare=False)
    """The line of the ``class`` statement (0 where there is none: a ``pl.jit`` program)."""

    @property
    def sub_workers(self) -> dict[str, CapturedFunction]:
        """The program's SubWorkers (``@pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)``), by name."""
        return {name: f for name, f in self.functions.items() if f.kind is Kind.SUB_WORKER}

    def host(self) -> CapturedFunction:
        hosts = [f for f in self.functions.values() if f.kind is Kind.HOST]
        if len(hosts) != 1:
            # At the second HOST when there are several, else at the class.
            line = hosts[1].node.lineno if hosts else self.line
            raise FrontendError(f"program {self.name} needs exactly one HOST orchestrator "
                                f"(@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)), "
                                f"found {len(hosts)}", self.file, line)
        return hosts[0]

    @property
    def distributed(self) -> bool:
        """Some function is at HOST level or above: pypto's ``ir.compile`` then gives a
        ``DistributedCompiledProgram``, else (an L2-only program) a ``CompiledProgram``."""
        return any(f.kind in HOST_LEVEL for f in self.functions.values())

    def with_single_device_host(self, entry: str) -> CapturedProgram:
        """This program with a HOST that dispatches ``entry`` once to device 0 (:func:`single_device_host`)."""
        host = single_device_host(self.functions[entry])
        return dataclasses.replace(self, functions={**self.functions, host.name: host})

    def error(self, message: str, node: ast.AST | None) -> FrontendError:
        """An error at ``node``'s line of the user's file (the file ``node`` is written in)."""
        return FrontendError(message, self.file_of(node), getattr(node, "lineno", 0))

    def file_of(self, node: ast.AST | None) -> str:
        """The file ``node`` is written in."""
        return self.node_files.get(id(node), self.file)

    def function_named(self, value: Any) -> str | None:
        """The name under which the program holds ``value``, a ``pl.jit`` function object that a body
        calls by its bare name (or ``self.<name>``); None for anything else."""
        try:
            return self.jit_names.get(value)
        except TypeError:  # unhashable: not a function object
            return None


def program(cls: type) -> CapturedProgram:
    """``@pl.program``: capture ``cls`` (see the module docstring)."""
    __tracebackhide__ = True
    frame = sys._getframe(1)
    closure = collections.ChainMap(dict(frame.f_locals), frame.f_globals)
    try:
        return _capture(cls, closure, frame.f_code.co_filename, frame.f_lineno)
    except FrontendError as err:
        raise err.with_traceback(None) from None


def _class_node(cls: type, file: str, near: int) -> ast.ClassDef:
    """The class statement of ``cls`` in ``file`` (the one of that name nearest the decorating line:
    factory functions define one class per call, at one place)."""
    text = "".join(linecache.getlines(file))
    if not text:
        raise FrontendError(f"@pl.program {cls.__name__}: cannot read the source of {file}", file, near)
    nodes = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    if not nodes:
        raise FrontendError(f"@pl.program {cls.__name__}: class not found in {file}", file, near)
    return min(nodes, key=lambda n: abs(n.lineno - near))


def _capture(cls: type, closure: Mapping[str, Any], file: str, near: int) -> CapturedProgram:
    node = _class_node(cls, file, near)
    functions: dict[str, CapturedFunction] = {}
    for item in node.body:
        if not isinstance(item, ast.FunctionDef):
            continue
        attrs = getattr(cls.__dict__.get(item.name), ATTRS, None)
        if attrs is None:
            raise FrontendError(f"method {item.name} of @pl.program {cls.__name__} is not a @pl.function",
                                file, item.lineno)
        fn = cls.__dict__[item.name]
        sub = attrs.kind is Kind.SUB_WORKER
        args = item.args.args
        if sub and args and args[0].arg == "self":
            raise FrontendError(f"SubWorker {item.name} must not declare self (pypto runs its body as a plain "
                                "function on the host)", file, item.lineno)
        params = tuple(a.arg for a in (args if sub else args[1:]))
        annotations = {k: annotation(v, closure, file, item) for k, v in getattr(fn, "__annotations__", {}).items()}
        functions[item.name] = CapturedFunction(item.name, _outlined_kind(attrs.kind, item), item, params,
                                                annotations, file, closure,
                                                python=fn if sub else None)
    prog = CapturedProgram(cls.__name__, file, functions, closure, line=node.lineno)
    for fn in functions.values():
        if fn.kind is not Kind.SUB_WORKER:  # a SubWorker's body is Python (torch), not pypto's DSL
            check_names(prog, fn)
    return prog


def single_device_host(entry: CapturedFunction) -> CapturedFunction:
    """``def _host_<entry>(<params>): self.<entry>(<params>)`` at the entry's line: how a one-device entry
    with no HOST of its own runs (a ``@pl.jit`` / ``@pl.jit.incore`` entry, an L2 program's
    Orchestration): one dispatch to device 0."""
    params = ", ".join(entry.params)
    node = ast.parse(f"def _host_{entry.name}({params}):\n    self.{entry.name}({params})\n").body[0]
    assert isinstance(node, ast.FunctionDef)
    for n in ast.walk(node):  # every node at the entry's def line: what the host does is written there
        if isinstance(n, (ast.stmt, ast.expr, ast.arg)):
            n.lineno = n.end_lineno = entry.node.lineno
    return CapturedFunction(node.name, Kind.HOST, node, entry.params, entry.annotations, entry.file, entry.closure)


def annotation(value: Any, closure: Mapping[str, Any], file: str, fn: ast.FunctionDef) -> Any:
    """An annotation as a value: a string one (``from __future__ import annotations``) is evaluated in
    the closure, as Python would have at definition time; a bare ``pl.Tensor`` is a shapeless
    :class:`~pldemu.pypto.types.TensorAnn`."""
    if not isinstance(value, str):
        return plain_annotation(value)
    try:
        return plain_annotation(eval(value, {"__builtins__": builtins}, dict(closure)))
    except Exception as err:
        what = err.message if isinstance(err, FrontendError) else f"{type(err).__name__}: {err}"
        raise FrontendError(f"annotation {value!r} of {fn.name}: {what}", file, fn.lineno) from None


_KNOWN_BUILTINS = frozenset({"True", "False", "None", "range", "len", "min", "max", "int", "float", "abs"})


def check_names(prog: CapturedProgram, fn: CapturedFunction) -> None:
    """Every name a body reads is a parameter, a local, the closure or a builtin; every ``pl.x`` /
    ``pld.x.y`` chain exists in the surface."""
    local = set(fn.params) | {"self"}
    for n in ast.walk(fn.node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            local.add(n.id)
    for n in ast.walk(fn.node):
        if n is fn.node:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if n.id not in local and n.id not in fn.closure and not hasattr(builtins, n.id):
                raise prog.error(f"unknown name {n.id!r} in {fn.name}", n)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            _check_attribute(prog, fn, n, local)


def _check_attribute(prog: CapturedProgram, fn: CapturedFunction, node: ast.Attribute, local: set[str]) -> None:
    chain: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        chain.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name) or cur.id in local:
        return
    base = fn.closure.get(cur.id)
    if not isinstance(base, ModuleType) or not base.__name__.startswith("pldemu.pypto.surface"):
        return
    obj: Any = base
    spelled = cur.id
    for attr in reversed(chain):
        if isinstance(obj, ModuleType) and attr in ("language", "distributed"):
            obj = getattr(obj, attr, None)
        elif not hasattr(obj, attr):
            name = pypto_name_of(obj, attr)
            if name is not None and name in NOT_RUN:  # a name pypto has that pldemu does not run: what, why
                raise prog.error(not_provided(name, f"{spelled}.{attr}"), node)
            raise prog.error(f"{spelled}.{attr} is not supported by pldemu's pypto layer "
                             f"(unknown name in pypto's DSL, or out of scope)", node)
        else:
            obj = getattr(obj, attr)
        spelled += "." + attr


__all__ = ["HOST_LEVEL", "CapturedFunction", "CapturedProgram", "FunctionAttrs", "Kind", "annotation", "check_names",
           "function", "program", "single_device_host"]
