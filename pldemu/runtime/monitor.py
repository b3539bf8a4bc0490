"""Monitors: instrumentation that sees an op both before and after it executes.

A listener (``ProgramInstance.add_listener``) is called before each op and cannot see its outcome.
A *monitor* also sees the result and failures, which is what the race detector needs (a satisfied
wait is an acquire: it may only take effect once the wait returned) and what the tracer needs (a
slice has a start and an end). Monitors are compiled into the call sites they ask for
(``wants(op)``): a site no monitor wants keeps the plain closure, and an instance without monitors
compiles exactly the closures it always did, so instrumentation costs nothing when it is off.

Per executed op the compiled site calls ``before(event)``, the handler, then ``after(event, result)``
(monitors in reverse order, so that the first monitor attached brackets the others), or
``failed(event, error)`` when the handler raised. Ops do not nest, so a monitor may keep per-op state
between ``before`` and ``after`` in plain attributes. ``run_started``/``run_ended`` bracket every
``ProgramInstance.run()``; ``run_ended`` gets the error that ended a failed run.
"""

from __future__ import annotations

from typing import Any, Protocol

from pldemu.ir import Op
from pldemu.runtime.sites import OpEvent


class Monitor(Protocol):
    """What ``ProgramInstance.add_monitor`` accepts (see the module docstring)."""

    def wants(self, op: Op) -> bool:
        """True if this monitor must see every execution of ``op`` (asked once per call site)."""
        ...

    def before(self, event: OpEvent) -> None:
        """Called just before the op's handler runs."""
        ...

    def after(self, event: OpEvent, result: Any) -> None:
        """Called once the handler returned ``result``."""
        ...

    def failed(self, event: OpEvent, error: BaseException) -> None:
        """Called when the handler raised ``error`` (which then propagates)."""
        ...

    def run_started(self, run: int) -> None:
        """A ``run()`` (1-based call number ``run`` of the instance) begins on this rank."""
        ...

    def run_ended(self, run: int, error: BaseException | None) -> None:
        """A ``run()`` ended, normally (``error`` None) or by ``error``."""
        ...


class MonitorBase:
    """A monitor that wants nothing and does nothing: subclass it and override what you need."""

    def wants(self, op: Op) -> bool:
        return False

    def before(self, event: OpEvent) -> None:
        return None

    def after(self, event: OpEvent, result: Any) -> None:
        return None

    def failed(self, event: OpEvent, error: BaseException) -> None:
        return None

    def run_started(self, run: int) -> None:
        return None

    def run_ended(self, run: int, error: BaseException | None) -> None:
        return None


__all__ = ["Monitor", "MonitorBase"]
