"""The op handlers: one function per non-collective op, in ONE table checked complete at import.

One module per family: ``comm`` (put, get, remote_load, notify, wait, the communicator queries),
``tensor`` (view, read, write), ``tile`` (tile memory, element-wise math, cast, compare, select),
``math`` (exp, log, sqrt, rsqrt, recip, neg, abs, div, divs), ``reduce`` (row / column reductions and
expands), ``matmul`` (the cube and tile.move), ``layout`` (tile.reshape), ``sort`` (sort32, mrgsort, gather, arange), ``mx`` (the MX quantisation family) and ``fused`` (addc, addsc,
tri, fillpad_expand, the cube's bias and GEMV forms); their tables merge here into :data:`HANDLERS`.

A handler is called as ``handler(machine, site, args)``: ``args`` are the call's evaluated arguments in
signature order (scalars as Python numbers, ``[lists]`` as int tuples, tensors as ``TensorRef``, tiles
as ``Tile``; absent optional arguments are simply missing), ``site.attrs`` the decoded attributes.
It returns the op's value (``None`` for effect-only ops).

Semantics follow the protocol digest (shared/reference/collectives-protocol.md) and the runtime brief:
valid regions are what loads read and stores write, the rest of a fresh tile is poison; tile math runs
in the tile's dtype over the physical tile; a put/get extent of 0 is a no-op. What a put, get or
remote_load moves is decoded by ``transfer.py`` (the one planner, shared with the deferred-visibility
wrappers and the race detector); the handlers here only carry the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir import AtomicType, Call, DType, Op, WaitCmp
from pldemu.runtime.machine import Handler
from pldemu.runtime.ops.comm import COMM_BINDINGS, COMM_HANDLERS, Binding
from pldemu.runtime.ops.fused import FUSED_HANDLERS
from pldemu.runtime.ops.layout import LAYOUT_HANDLERS
from pldemu.runtime.ops.math import MATH_HANDLERS
from pldemu.runtime.ops.matmul import MATMUL_HANDLERS
from pldemu.runtime.ops.mx import MX_HANDLERS
from pldemu.runtime.ops.reduce import REDUCE_HANDLERS
from pldemu.runtime.ops.sort import SORT_HANDLERS
from pldemu.runtime.ops.tensor import TENSOR_HANDLERS
from pldemu.runtime.ops.tile import TILE_HANDLERS


def decode_attrs(call: Call) -> Mapping[str, Any]:
    """A call's attributes in the form handlers use (done once per call site, not per execution)."""
    out: dict[str, Any] = {}
    for key, value in call.attrs:
        if isinstance(value, DType):
            out[key] = value.np
        elif isinstance(value, WaitCmp):
            out[key] = value
            out[key + "_code"] = int(value)
        elif isinstance(value, AtomicType):
            out[key] = value is AtomicType.Add
        else:
            out[key] = value
    return MappingProxyType(out)


HANDLERS: Mapping[Op, Handler] = MappingProxyType(
    {
        **COMM_HANDLERS,
        **TENSOR_HANDLERS,
        **TILE_HANDLERS,
        **MATH_HANDLERS,
        **REDUCE_HANDLERS,
        **MATMUL_HANDLERS,
        **LAYOUT_HANDLERS,
        **SORT_HANDLERS,
        **MX_HANDLERS,
        **FUSED_HANDLERS,
    }
)
"""The one dispatch table: every non-collective op; collectives must be lowered before running."""

BINDINGS: Mapping[Op, Binding] = COMM_BINDINGS
"""The call-site specialisations of the table's handlers (``comm.Binding``): used by the compiler only
where a site runs the table's own handler, unobserved."""

SIGNAL_OPS: frozenset[Op] = frozenset({Op.NOTIFY, Op.WAIT, Op.GET_COMM_CTX, Op.RANK, Op.NRANKS, Op.FENCE,
                                       Op.CACHEINVALID, Op.BAR_ALL})
"""Ops whose handlers (the table's own) never compute on numpy data: a function made of them alone
(a lowered barrier) runs without ``np.errstate``, which cost a sixth of a barrier's ``run()``."""

_missing = sorted(op.text for op in Op if not op.is_composite and op not in HANDLERS)
_collective = sorted(op.text for op in HANDLERS if op.is_composite)
if _missing or _collective:  # pragma: no cover - import-time completeness check
    raise RuntimeError(f"runtime handler table: missing {_missing}, collectives that must not run {_collective}")

__all__ = ["BINDINGS", "HANDLERS", "SIGNAL_OPS", "Binding", "Handler", "decode_attrs"]
