"""Helpers of the stress MPI tests: a lowering that drops ops (on ``helpers.lowered_then``)."""

from __future__ import annotations

from collections.abc import Callable

from helpers import call_of, lowered_then

from pldemu.ir import Op, Program


def lowering_without(op: Op) -> Callable[[Program], Program]:
    """LowerCompositeOps, then every ``op`` statement removed from main."""
    return lowered_then(lambda st: None if call_of(st, op) is not None else st)
