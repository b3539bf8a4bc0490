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

    if compiled.program.sub_workers:  # its SubWorkers run here, mid-run: a resident job has the channel
        with DistributedWorker(compiled, config) as rt:
            rt(*args, config=config)
        return None
    try:
        compiled.last = run(compiled.program, compiled.nranks, args, compiled.output_dir,
                            call_options(config, compiled.output_dir), compiled.translations)
    except FrontendError as err:
        raise err.with_traceback(None) from None
    return None


def _tensor_from_continuous(arg: Any) -> Any:
    """A SubWorker argument as a torch tensor, sharing memory (pypto's converter of simpler's mapped
    arguments; pldemu hands a SubWorker the host tensors themselves, so this is a view of them)."""
    if hasattr(arg, "numpy") or not hasattr(arg, "__array__"):
        return arg
    import torch  # type: ignore[import-not-found]  # real torch, or pldemu's stand-in while active

    return torch.from_numpy(arg)


__all__ = ["DistributedRunHandle", "DistributedWorker", "_tensor_from_continuous", "execute_distributed"]
