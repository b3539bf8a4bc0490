"""``pypto.language.distributed`` (``pld``): windows, signals, remote data movement, collectives.

The enums are pldemu's own (the member names are pypto's); every op is a :class:`DslOp` the
translator dispatches on by name.
"""

from __future__ import annotations

from pldemu.ir.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp
from pldemu.pypto.types import DistributedTensor, DslOp, Namespace

alloc_window_buffer = DslOp("pld.alloc_window_buffer")
window = DslOp("pld.window")
world_size = DslOp("pld.world_size")
get_comm_ctx = DslOp("pld.get_comm_ctx")
rank = DslOp("pld.rank")
nranks = DslOp("pld.nranks")
system = Namespace("pld.system", ("notify", "wait", "defer_wait"))
tile = Namespace("pld.tile", ("remote_load", "remote_store", "put", "get"))
tensor = Namespace("pld.tensor", ("put", "get", "remote_store", "allreduce", "allgather", "reduce_scatter",
                                  "broadcast", "barrier", "all_to_all", "all_to_all_v"))

__all__ = ["AtomicType", "DistributedTensor", "NotifyOp", "ReduceOp", "WaitCmp", "alloc_window_buffer",
           "get_comm_ctx", "nranks", "rank", "system", "tensor", "tile", "window", "world_size"]
