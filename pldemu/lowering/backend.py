"""Backends: who plans the scratch of the select primitives (TSEL / TSELS) and which dtypes they take.

The spec's ``Backend::PlanOpScratch(op, request)``: a backend answers a scratch request for an op with
a plan that is *required* (dtype + shape of the compiler-created scratch tile) or *unsupported*.
pypto's code spells the same facts as per-backend hooks (GetTselScratchSpec / GetTselsScratchSpec /
SupportsTsel[s]DataType); this follows the spec's shape. Standalone lowering (no backend) keeps the
historical A5 geometry with the dtype gates skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pldemu.ir.dtypes import DType
from pldemu.ir.ops import Op

_WIDE = frozenset({DType.INT16, DType.UINT16, DType.INT32, DType.UINT32, DType.FP16, DType.FP32})
_BYTE = frozenset({DType.INT8, DType.UINT8})


@dataclass(frozen=True)
class ScratchRequest:
    """What an op needs scratch for: the source element type and its physical column count."""

    dtype: DType
    cols: int


@dataclass(frozen=True)
class ScratchPlan:
    """A backend's answer: the scratch tile to create, or unsupported (``required`` False)."""

    required: bool
    dtype: DType | None = None
    shape: tuple[int, ...] = ()

    def describe(self) -> str:
        assert self.dtype is not None
        return f"{self.dtype.value}{list(self.shape)}"


UNSUPPORTED = ScratchPlan(False)


@dataclass(frozen=True)
class Backend:
    """One target's select contract. ``None`` dtype sets mean ungated (standalone lowering)."""

    name: str
    tsel_dtypes: frozenset[DType] | None
    tsels_dtypes: frozenset[DType] | None
    tsel_scratch: tuple[DType, tuple[int, ...]]
    tsels_scratch_in_src: bool
    """True: TSELS scratch is one physical source row in the source dtype (A2/A3); else the TSEL spec."""

    def plan_op_scratch(self, op: Op, request: ScratchRequest) -> ScratchPlan:
        """Scratch for ``op`` (tile.sel or tile.sels) on ``request``'s source, or UNSUPPORTED."""
        gate = self.tsels_dtypes if op is Op.TILE_SELS else self.tsel_dtypes
        if gate is not None and request.dtype not in gate:
            return UNSUPPORTED
        if op is Op.TILE_SELS and self.tsels_scratch_in_src:
            return ScratchPlan(True, request.dtype, (1, request.cols))
        dtype, shape = self.tsel_scratch
        return ScratchPlan(True, dtype, shape)


BACKENDS: Mapping[str, Backend] = MappingProxyType({
    "a2a3": Backend("a2a3", _WIDE | {DType.BF16}, _WIDE, (DType.UINT32, (1, 16)), True),
    "a5": Backend("a5", _WIDE | _BYTE | {DType.BF16}, _WIDE | _BYTE, (DType.UINT8, (1, 32)), False),
    "none": Backend("none", None, None, (DType.UINT8, (1, 32)), False),
})
"""``pldemu lower --backend``: Ascend910B (A2/A3), Ascend950 (A5), or standalone (default)."""

STANDALONE = BACKENDS["none"]

__all__ = ["BACKENDS", "STANDALONE", "UNSUPPORTED", "Backend", "ScratchPlan", "ScratchRequest"]
