"""``pypto.runtime.distributed_runner``: where a compiled call runs (one pldemu job), and prepared workers
(:mod:`pldemu.pypto.prepared`)."""

from __future__ import annotations

from typing import Any

from pldemu.pypto.prepared import DistributedRunHandle, DistributedWorker


def execute_distributed(compiled: Any, *args: Any, config: Any = None) -> Any:
    """Run ``compiled`` with the host tensors ``args`` (see ``pldemu.pypto.execute.run``); ``config``, the
    call's ``RunConfig``, answered as :mod:`pldemu.pypto.dfx` says (its swimlane switch: a trace)."""
    __tracebackhide__ = True
    from pldemu.pypto.dfx import call_options
    from pldemu.pypto.errors import FrontendError
    from pldemu.pypto.execute import run

    try:
        compiled.last = run(compiled.program, compiled.nranks, args, compiled.output_dir,
                            call_options(config, compiled.output_dir))
    except FrontendError as err:
        raise err.with_traceback(None) from None
    return None


__all__ = ["DistributedRunHandle", "DistributedWorker", "execute_distributed"]
