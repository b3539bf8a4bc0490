"""The options a compiled pypto call runs with: one value, set by the pytest plugin (or ``pldemu python``),
read by compile().

The plugin (or any caller) wraps a test in ``with use_options(FrontendOptions(...)):``; a compiled
program's ``__call__`` reads :func:`current_options` when it runs. A context variable, so nested or
concurrent uses never leak into each other.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pldemu.runtime.options import PLATFORM_CLUSTERS, RuntimeOptions


def _pypto_runtime() -> RuntimeOptions:
    # Race detection is on by default (item 8 of issue 21). Windows are zero at allocation by pypto's contract: the
    # translation loads zeros into them (``poison`` still marks fresh tiles).
    # Tasks share the clusters of the default platform (a2a3sim), as ``from_flags`` gives them for a platform.
    return RuntimeOptions(race_detect=True, cores=PLATFORM_CLUSTERS["a2a3sim"])


@dataclasses.dataclass(frozen=True)
class FrontendOptions:
    """How compiled pypto programs run.

    ``runtime``: pldemu's runtime knobs (races, jitter, visibility, seed, ...). ``timeout``: seconds the
    whole ``mpiexec`` job of one call may take. ``codegen_only``: compile (translate, lower, write the
    artifacts) but do not run; a call then leaves its tensors untouched. ``platform``: the
    ``--platform`` value of pypto's suite, recorded in the artifacts.
    """

    runtime: RuntimeOptions = dataclasses.field(default_factory=_pypto_runtime)
    timeout: float = 120.0
    codegen_only: bool = False
    platform: str = "a2a3sim"
    force: bool = False
    """Run a call whose estimated memory exceeds what the machine has (``--force`` / ``--pldemu-force``)."""

    @classmethod
    def from_flags(cls, overrides: Mapping[str, Any], job_timeout: float | None = None,
                   **fields: Any) -> FrontendOptions:
        """The layer's options with a command line's flags applied (``pldemu pytest``'s ``--pldemu-*``,
        ``pldemu python``'s): ``overrides``, ``RuntimeOptions`` fields; ``job_timeout``, seconds one call's
        job may take (default :attr:`timeout`); ``fields``, the other fields (``codegen_only``,
        ``platform``). Unless ``overrides`` sets it, a wait gives up after a third of the job timeout (at
        least 1 s, at most the runtime's default), so a deadlock is reported before its job is killed.
        A value ``RuntimeOptions`` refuses is a ``ValueError``."""
        base = cls()
        limit = base.timeout if job_timeout is None else float(job_timeout)
        waits = max(1.0, min(base.runtime.timeout, limit / 3))
        cores = PLATFORM_CLUSTERS.get(str(fields.get("platform", base.platform)))  # tasks share the platform's
        runtime = dataclasses.replace(base.runtime, **{"timeout": waits, "cores": cores, **overrides})
        return cls(runtime=runtime, timeout=limit, **fields)


_CURRENT: contextvars.ContextVar[FrontendOptions | None] = contextvars.ContextVar(
    "pldemu_pypto_options", default=None)


def current_options() -> FrontendOptions:
    """The options in effect (the defaults outside any :func:`use_options` block)."""
    opts = _CURRENT.get()
    return FrontendOptions() if opts is None else opts


@contextmanager
def use_options(opts: FrontendOptions) -> Iterator[FrontendOptions]:
    """Make ``opts`` the current options inside the block."""
    token = _CURRENT.set(opts)
    try:
        yield opts
    finally:
        _CURRENT.reset(token)


__all__ = ["FrontendOptions", "current_options", "use_options"]
