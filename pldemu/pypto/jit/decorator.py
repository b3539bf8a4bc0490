"""``pl.jit``: pypto's decorator family (``@pl.jit``, ``.host``, ``.incore``, ``.inline``, ``.opaque``).

pypto's ``pl.jit`` is a source-to-source preprocessor onto the ``@pl.program`` pipeline; here it is the
same thing one level down: a :class:`JITFunction` becomes a :class:`~pldemu.pypto.capture.CapturedProgram`
(:mod:`pldemu.pypto.jit.specialize`) that the one translator runs, as a ``@pl.program`` class does.
Nothing in a body runs when it is decorated; ``compile`` / the call specialise it from their arguments.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from pldemu.pypto.jit.kinds import JitKind
from pldemu.pypto.jit.specialize import compiled_for, lowered_for, translated_for

_UNSET: Any = object()
"""``auto_scope=`` not passed (a kind that does not take it refuses any explicit value, as pypto does)."""


class JITFunction:
    """A ``pl.jit``-decorated function: ``compile(*samples, config=)``, ``f(*args, config=)``, ``lower``.

    Equal specialisation keys give the same compiled object (:attr:`_cache`, one per function, as
    pypto's L1 cache); the attributes pypto-lib reads (``_func``, ``_func_type``, ``_level``,
    ``_auto_scope``, ``__name__``) are pypto's."""

    __name__: str

    def __init__(self, func: Callable[..., Any], kind: JitKind, level: Any = None, auto_scope: bool = True) -> None:
        if not callable(func):
            raise TypeError(f"@pl.jit.{kind.value} decorates a function, got {type(func).__name__}")
        functools.update_wrapper(self, func)
        self._func = func
        self._kind = kind
        self._func_type = kind.value
        self._level = level
        self._auto_scope = auto_scope
        self._cache: dict[Any, Any] = {}
        self._memo: dict[str, Any] = {}
        """What does not change with the arguments (the parsed def, the dependency graph, the source
        hash), found at the first compile, as pypto keeps its dependency graph and source hash."""

    def compile(self, *args: Any, config: Any = None, **kwargs: Any) -> Any:
        """Specialise and compile for these arguments (shapes, dtypes and scalar values; tensor contents
        are never read), or from the annotations when no tensor is given (signature mode); the cached
        compiled program when the key was seen before. The program is translated for them now, so what
        pldemu refuses is reported here, and a call with arguments of their kind reuses the translation."""
        __tracebackhide__ = True
        return translated_for(self, args, kwargs, config)

    def __call__(self, *args: Any, config: Any = None, **kwargs: Any) -> Any:
        """Compile (or take from the cache), then run: in-place calls return None."""
        __tracebackhide__ = True
        compiled, ordered = compiled_for(self, args, kwargs, config, signature_mode=False)
        return compiled(*ordered, config=config)

    def lower(self, *args: Any, config: Any = None, **kwargs: Any) -> Any:
        """What pldemu runs for these arguments: the translated pldemu program (``print`` it, or
        ``.as_python()``), before LowerCompositeOps; nothing runs and nothing is cached."""
        __tracebackhide__ = True
        return lowered_for(self, args, kwargs, config)

    def _param_names(self) -> list[str]:
        """The function's parameter names in order (pypto's private helper, which pypto-lib's drivers call to
        order their tensor specs)."""
        return [p for p in inspect.signature(self._func).parameters if p != "self"]

    def __repr__(self) -> str:
        return f"<pl.jit.{self._func_type} {self.__name__}>"


class _Decorator:
    """One decorator of the family, bare (``@pl.jit.host``) or called (``@pl.jit.host(auto_scope=False)``)."""

    def __init__(self, kind: JitKind, level: bool = False, auto_scope: bool = False) -> None:
        self._kind = kind
        self._takes_level = level
        self._takes_auto_scope = auto_scope

    def _spelled(self) -> str:
        return "@pl.jit" if self._kind is JitKind.ORCHESTRATION else f"@pl.jit.{self._kind.value}"

    def __call__(self, func: Any = None, *, level: Any = None, auto_scope: Any = _UNSET) -> Any:
        if level is not None and not self._takes_level:
            raise TypeError(f"{self._spelled()} does not accept a level= argument")
        if auto_scope is not _UNSET and not self._takes_auto_scope:
            raise TypeError(f"{self._spelled()} does not accept an auto_scope= argument (auto_scope is only "
                            "meaningful for the Orchestration entry, the HOST orchestrator, and inline "
                            "sub-functions)")
        scoped = True if auto_scope is _UNSET else bool(auto_scope)
        if func is None:
            return lambda f: JITFunction(f, self._kind, level, scoped)
        return JITFunction(func, self._kind, level, scoped)


class JitDecorator(_Decorator):
    """The ``pl.jit`` object: ``@pl.jit`` (a per-device Orchestration) and its sub-decorators."""

    def __init__(self) -> None:
        super().__init__(JitKind.ORCHESTRATION, auto_scope=True)
        self.host = _Decorator(JitKind.HOST, auto_scope=True)
        self.incore = _Decorator(JitKind.INCORE, level=True)
        self.inline = _Decorator(JitKind.INLINE, auto_scope=True)
        self.opaque = _Decorator(JitKind.OPAQUE)

    def extern(self, *args: Any, **kwargs: Any) -> Any:
        """``@pl.jit.extern``: a hand-written C++ kernel, which pldemu cannot run."""
        raise NotImplementedError("pl.jit.extern (a hand-written .cpp kernel) is out of scope for pldemu's pypto "
                                  "layer: pldemu runs pypto's DSL, not device C++")


__all__ = ["JITFunction", "JitDecorator"]
