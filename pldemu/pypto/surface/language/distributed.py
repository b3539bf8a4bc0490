"""``pypto.language.distributed`` (``pld``): windows, signals, remote data movement, collectives.

The enums are pldemu's own (the member names are pypto's); every op is a :class:`DslOp` the
translator dispatches on by name. pypto spells most ops twice, ``pld.<category>.<op>`` (canonical) and
``pld.<op>`` (its short form, a re-export): both spellings here are the same :class:`DslOp`, so one rule runs
them. ``pld.remote_store`` is the exception (it dispatches on its source's level, as pypto's does).
"""

from __future__ import annotations

import sys
from typing import Any

from pldemu.ir.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp
from pldemu.pypto.errors import not_provided
from pldemu.pypto.types import DistributedTensor, DslOp, Namespace

alloc_window_buffer = DslOp("pld.alloc_window_buffer")
window = DslOp("pld.window")
world_size = DslOp("pld.world_size")
get_comm_ctx = DslOp("pld.get_comm_ctx")
rank = DslOp("pld.rank")
nranks = DslOp("pld.nranks")
remote_store = DslOp("pld.remote_store")
"""``pld.remote_store(src, target, peer, offsets, *, atomic=)``: ``pld.tile.remote_store`` of a tile,
``pld.tensor.remote_store`` of a tensor (pypto's unified dispatch on ``src``)."""
system = Namespace("pld.system", ("notify", "wait", "defer_wait"),
                   same={"world_size": world_size, "get_comm_ctx": get_comm_ctx, "rank": rank, "nranks": nranks})
tile = Namespace("pld.tile", ("remote_load", "remote_store"))
tensor = Namespace("pld.tensor", ("put", "get", "remote_store", "allreduce", "allgather", "reduce_scatter",
                                  "broadcast", "barrier", "all_to_all", "all_to_all_v"),
                   same={"alloc_window_buffer": alloc_window_buffer, "window": window})
remote_load = tile.remote_load


class CommCtx:
    """``pld.CommCtx``: the type of ``pld.get_comm_ctx(t)``, for annotations (``ctx: pld.CommCtx = ...``)."""


CommCtxType = CommCtx
"""pypto's IR name of the same type (its printer's spelling of a ``pld.CommCtx`` annotation)."""


def __getattr__(name: str) -> Any:
    """A name pypto has and this layer does not: an AttributeError saying why (``not_provided``)."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(not_provided(f"pypto.language.distributed.{name}"), name=name, obj=sys.modules[__name__])


__all__ = ["AtomicType", "CommCtx", "CommCtxType", "DistributedTensor", "NotifyOp", "ReduceOp", "WaitCmp",
           "alloc_window_buffer", "get_comm_ctx", "nranks", "rank", "remote_load", "remote_store", "system",
           "tensor", "tile", "window", "world_size"]
