"""Helpers of the multi-rank runtime tests: a hand-written credit barrier in IR."""

from __future__ import annotations

from pldemu.ir import FunctionBuilder, Var
from pldemu.ir.nodes import ExprLike


def emit_barrier(fb: FunctionBuilder, sig: Var, me: Var, nr: Var, generation: ExprLike) -> None:
    """The protocol's credit barrier: +1 on cell [me, 0] of every peer, then wait for cell [src, 0] of
    every peer to reach ``generation`` (Ge)."""
    pld = fb.pld
    with fb.for_range(1, nr, hint="k") as k:
        pld.system.notify(sig, (me + k) % nr, [me, 0], 1)
    with fb.for_range(1, nr, hint="k") as k:
        pld.system.wait(sig, [(me + k) % nr, 0], generation)


def emit_epilogue(fb: FunctionBuilder, sig: Var, me: Var, nr: Var, credits: ExprLike) -> None:
    """Retire ``credits`` per peer from my own cells (self-notify, negative AtomicAdd)."""
    with fb.for_range(1, nr, hint="k") as k:
        fb.pld.system.notify(sig, me, [(me + k) % nr, 0], 0 - credits)
