"""The one dispatch table of LowerCompositeOps: op -> lowering rule (explicit function references).

Also each collective's argument roles (``ARGS``: result alias, signal), derived from the signature
table at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from pldemu.ir.ops import Op
from pldemu.ir.signatures import SIGNATURES, SameAsArg
from pldemu.lowering.all_to_all import lower_all_to_all
from pldemu.lowering.all_to_all_v import lower_all_to_all_v
from pldemu.lowering.allgather import lower_allgather
from pldemu.lowering.allreduce import lower_allreduce
from pldemu.lowering.barrier import lower_barrier
from pldemu.lowering.broadcast import lower_broadcast
from pldemu.lowering.common import Rule
from pldemu.lowering.math import lower_tile_cos, lower_tile_sin
from pldemu.lowering.mx import lower_tile_tquant_mx
from pldemu.lowering.reduce_scatter import lower_reduce_scatter
from pldemu.lowering.select import lower_tile_select

RULES: MappingProxyType[Op, Rule] = MappingProxyType(
    {
        Op.ALLREDUCE: lower_allreduce,
        Op.ALLGATHER: lower_allgather,
        Op.REDUCE_SCATTER: lower_reduce_scatter,
        Op.BROADCAST: lower_broadcast,
        Op.BARRIER: lower_barrier,
        Op.ALL_TO_ALL: lower_all_to_all,
        Op.ALL_TO_ALL_V: lower_all_to_all_v,
        Op.TILE_SIN: lower_tile_sin,
        Op.TILE_COS: lower_tile_cos,
        Op.TILE_SELECT: lower_tile_select,
        Op.TILE_TQUANT_MX: lower_tile_tquant_mx,
    }
)
"""A call whose op is listed is rewritten; anything else passes through unchanged. No rule emits a
listed op, which is what makes the pass idempotent."""



@dataclass(frozen=True)
class CollectiveArgs:
    """Argument positions of a collective: the one its result aliases, and its signal."""

    result: int
    signal: int

    @staticmethod
    def of(op: Op) -> CollectiveArgs:
        """Read from the signature table: the argument the result deducer returns, and ``signal``."""
        sig = SIGNATURES[op]
        if not isinstance(sig.deduce, SameAsArg):  # pragma: no cover - import-time consistency check
            raise RuntimeError(f"{op.text}: a collective's result must be one of its arguments")
        return CollectiveArgs(result=sig.deduce.index, signal=[p.name for p in sig.params].index("signal"))


ARGS: MappingProxyType[Op, CollectiveArgs] = MappingProxyType(
    {op: CollectiveArgs.of(op) for op in RULES if op.is_collective})
"""Used before lowering to follow buffer aliases and to check signal conventions program-wide; derived
from ``SIGNATURES`` so the two cannot disagree."""

__all__ = ["ARGS", "RULES", "CollectiveArgs"]
