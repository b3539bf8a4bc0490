"""The runtime interpreter: executes LOWERED pld programs on every rank of an MPI communicator.

``ProgramInstance(program, comm, options)`` validates, prepares and allocates a program on one rank;
``run()`` executes it; ``execute()`` does all three once. Errors: ``ProgramError`` (bad program or
instantiation), ``DeadlockError`` (a wait passed its deadline; carries the wait-for report) and the
windows layer's ``WindowAccessError`` for refused accesses (with the program location).

Importing this package does not initialise MPI: the names below load their modules on first use, so
a launching process can use ``pldemu.job.launch`` and ``pldemu.runtime.options`` without becoming
an MPI process itself.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pldemu.runtime.errors import DeadlockError, ProgramError, WindowAccessError
    from pldemu.runtime.interpreter import OpCounter, ProgramInstance, RunStats, execute
    from pldemu.runtime.ops import HANDLERS
    from pldemu.runtime.options import RuntimeOptions
    from pldemu.runtime.sites import CallSite, Location, OpEvent

_EXPORTS = {
    "DeadlockError": "pldemu.runtime.errors",
    "ProgramError": "pldemu.runtime.errors",
    "WindowAccessError": "pldemu.runtime.errors",
    "HANDLERS": "pldemu.runtime.ops",
    "OpCounter": "pldemu.runtime.interpreter",
    "ProgramInstance": "pldemu.runtime.interpreter",
    "RunStats": "pldemu.runtime.interpreter",
    "execute": "pldemu.runtime.interpreter",
    "RuntimeOptions": "pldemu.runtime.options",
    "CallSite": "pldemu.runtime.sites",
    "Location": "pldemu.runtime.sites",
    "OpEvent": "pldemu.runtime.sites",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pldemu.runtime' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = [
    "HANDLERS",
    "CallSite",
    "DeadlockError",
    "Location",
    "OpCounter",
    "OpEvent",
    "ProgramError",
    "ProgramInstance",
    "RunStats",
    "RuntimeOptions",
    "WindowAccessError",
    "execute",
]
