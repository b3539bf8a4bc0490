"""``pypto.runtime.distributed_runner``: where a compiled call runs (one pldemu job), and prepared workers
(:mod:`pldemu.pypto.prepared`)."""

from __future__ import annotations

from typing import Any

from pldemu.pypto.prepared import DistributedRunHandle, DistributedWorker


def execute_distributed(compiled: Any, *args: Any) -> Any:
    """Run ``compiled`` with the host tensors ``args`` (see ``pldemu.pypto.execute.run``)."""
    __tracebackhide__ = True
    from pldemu.pypto.errors import FrontendError
    from pldemu.pypto.execute import run

    try:
        compiled.last = run(compiled.program, compiled.nranks, args, compiled.output_dir)
    except FrontendError as err:
        raise err.with_traceback(None) from None
    return None


__all__ = ["DistributedRunHandle", "DistributedWorker", "execute_distributed"]
