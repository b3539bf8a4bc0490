"""What pypto's HOST collective builtins take: the variants their type deducers accept.

pypto's LowerHostTensorCollectives turns a HOST ``pld.tensor.*`` into one ``builtin.tensor.*`` call per device
(src/ir/transforms/lower_host_tensor_collectives_pass.cpp), and each builtin's type deducer checks its variant at
compile time (src/ir/op/distributed/collective.cpp): the mesh allreduce takes FP16 or FP32 and any ReduceOp, but
the ring allreduce (``mode="ring"``) and reduce_scatter take only ``op=ReduceOp.Sum`` on FP32, and broadcast,
allgather, all_to_all and all_to_all_v only FP32; the ring one also wants a static src whose element count is a
multiple of the rank count. pldemu's recipes would run the others; a program pypto refuses is refused here, in
pypto's words, at the collective's line. A kernel's (InCore) collectives are composites with their own rules."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pldemu.ir.enums import ReduceOp
from pldemu.pypto.translate.values import HostView

_SUM_FP32 = ("op", "FP32")
_FP32 = ("FP32",)

_VARIANTS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType({
    "pld.tensor.reduce_scatter": ("builtin.tensor.reduce_scatter", _SUM_FP32),
    "pld.tensor.broadcast": ("builtin.tensor.broadcast", _FP32),
    "pld.tensor.allgather": ("builtin.tensor.allgather", _FP32),
    "pld.tensor.all_to_all": ("builtin.tensor.all_to_all", _FP32),
    "pld.tensor.all_to_all_v": ("builtin.tensor.all_to_all_v", _FP32),
})
"""A HOST collective -> pypto's builtin and what its deducer checks (``op``: ReduceOp.Sum; ``FP32``: the dtype)."""


def builtin_refusal(name: str, b: Mapping[str, Any], nranks: int) -> str | None:
    """pypto's message refusing the HOST collective ``name`` with bound arguments ``b``, or None."""
    if name == "pld.tensor.allreduce":
        if str(b.get("mode", "mesh")) != "ring":
            return None
        return _ring_src(b, nranks) or _checks("builtin.tensor.allreduce_ring", _SUM_FP32, b)
    found = _VARIANTS.get(name)
    return None if found is None else _checks(*found, b)


def _checks(builtin: str, checks: tuple[str, ...], b: Mapping[str, Any]) -> str | None:
    for check in checks:
        message = _CHECKS[check](builtin, b, "op" in checks)
        if message is not None:
            return f"pypto refuses it: {message}"
    return None


def _op(builtin: str, b: Mapping[str, Any], _sum: bool) -> str | None:
    op = b.get("op", ReduceOp.Sum)
    if ReduceOp(op) is ReduceOp.Sum:
        return None
    return f"{builtin} op must be ReduceOp.Sum (got {ReduceOp(op).name})"


def _fp32(builtin: str, b: Mapping[str, Any], with_sum: bool) -> str | None:
    dtype = _data(b).dtype.name
    if dtype == "FP32":
        return None
    if with_sum:
        return (f"{builtin} currently supports only (op=ReduceOp.Sum, dtype=FP32); got (op=ReduceOp.Sum, "
                f"dtype={dtype})")
    return f"{builtin} currently supports only dtype=FP32; got {dtype}"


_CHECKS: Mapping[str, Callable[[str, Mapping[str, Any], bool], str | None]] = MappingProxyType({
    "op": _op, "FP32": _fp32,
})


def _data(b: Mapping[str, Any]) -> HostView:
    """The window whose dtype the builtin takes (its ``dtype`` kwarg is this operand's)."""
    for key in ("target", "local_data", "input"):
        if isinstance(b.get(key), HostView):
            return b[key]
    raise AssertionError(f"a HOST collective without a data window: {sorted(b)}")


def _ring_src(b: Mapping[str, Any], nranks: int) -> str | None:
    """The ring builtin partitions src into NR compile-time chunks: its element count a multiple of NR."""
    sig = b.get("signal")
    if isinstance(sig, HostView) and len(sig.shape) == 2:
        nranks = int(sig.shape[1])  # pypto reads the rank count off the signal (a comm group's size)
    numel = math.prod(int(d) for d in _data(b).shape)
    if nranks <= 0 or numel % nranks == 0:
        return None
    return (f"pypto refuses it: builtin.tensor.allreduce_ring requires the src data size (product of shape = "
            f"{numel}) to be an exact multiple of the rank count ({nranks}); got a remainder of {numel % nranks}")


__all__ = ["builtin_refusal"]
