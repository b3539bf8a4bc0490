"""pldemu: run pld.tensor.* distributed collectives for real across MPI ranks.

The Python API (:mod:`pldemu.api`): ``pldemu.launch(program, ranks, inputs=..., options=...)`` runs a
program on N ranks in an isolated ``mpiexec`` job and returns a :class:`RunResult`; importing pldemu
never initialises MPI. The names below are imported on first use, so that ``python -m pldemu`` (every
rank of a job) starts without loading the API.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"
"""pldemu's version, its one home: pyproject.toml reads it, `pldemu --version` prints it, CHANGELOG.md names it."""

_LAZY = {"JobError": "pldemu.api", "RunResult": "pldemu.api", "launch": "pldemu.api",
         "Placement": "pldemu.job.launch", "RuntimeOptions": "pldemu.runtime.options"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pldemu' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = ["JobError", "Placement", "RunResult", "RuntimeOptions", "__version__", "launch"]
