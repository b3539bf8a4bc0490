"""Recipe variants: named, deliberate deviations from the specified collective recipes.

The project must prove that the bugs that bite on hardware (signal reuse, a missing barrier, Eq
instead of Ge, Set instead of AtomicAdd, an unbalanced epilogue, a wait before the rank's own
notify) actually show up in our runs. To get known-broken programs that are *lowered*, not patched
after the fact, the deviation is a value passed down the pass:

    LowerCompositeOps(variant=RecipeVariant(wait_cmp=WaitCmp.Eq)).apply(program)

The pass object holds the variant as its one option field; it puts it in every rule's
``LoweringContext``, and ``emit_comm`` copies it into the ``Comm`` that every shared protocol helper
takes, so a recipe cannot forget it. Nothing is global. The default value of every field is the correct
recipe, so ``RecipeVariant()`` lowers byte-identically to the plain pass.

The mutant catalogue built on these fields is ``pldemu.mutants``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pldemu.ir.enums import NotifyOp, WaitCmp
from pldemu.ir.nodes import Expr, ExprLike, as_expr


@dataclass(frozen=True)
class RecipeVariant:
    """One field per deviation; every default is the recipe as specified.

    Fields act wherever the deviation can occur: the barrier-protocol fields change every barrier
    of every collective in the lowered program, the recipe-specific fields only their collective.
    """

    notify_before_wait: bool = True
    """A barrier posts its own credits, then waits for the peers'. False: every barrier waits first
    (each rank waits for credits no rank has posted yet: the deadlock shape)."""

    wait_cmp: WaitCmp = WaitCmp.Ge
    """Comparison of every credit wait. Eq deadlocks when a fast peer has already advanced the cell
    past the generation (its next barrier or its next call's credit) before this rank polls."""

    credit_op: NotifyOp = NotifyOp.AtomicAdd
    """How a credit is posted. Set writes the generation the waiter expects instead of adding 1,
    while the epilogue still subtracts: Set mixed with AtomicAdd on one cell, so a fast peer's
    next-call credit is clobbered or absorbed."""

    generation_threshold: bool = True
    """Every barrier waits for its call-local generation g. False: every wait uses the fixed
    threshold 1, which a second barrier on the same cells (or the next call) passes immediately."""

    epilogue: bool = True
    """Each call retires the credits it issued. False: no epilogue, so cells grow call after call
    and the next call's barriers pass early."""

    epilogue_shortfall: int = 0
    """The epilogue retires N - shortfall credits per cell instead of N (the off-by-one epilogue).
    A shortfall that leaves nothing to retire emits no epilogue at all."""

    mesh_post_reduce_barrier: bool = True
    """Mesh allreduce barriers after each chunk's reduction, before storing it. False: a fast rank
    overwrites its chunk while a slow peer may still remote_load it (write-after-read); the
    epilogue then retires only the ready credit."""

    reduce_scatter_post_reduce_barrier: bool = True
    """reduce_scatter barriers (g=2) after its remote loads. False: a fast rank leaves the call and
    restages its rows while a slow peer may still remote_load them; the epilogue retires 1."""

    ring_push_done: bool = True
    """Ring allreduce barriers after every push (push-done, g=2k+2). False: a rank reads its receive
    slot before the left neighbour's push has landed; ready barriers become g=k+1 and the
    epilogue retires ``chunks`` per row."""

    a2av_readiness_wait: bool = True
    """all_to_all_v senders wait for each destination's readiness credit (Ge 1) before publishing
    into its recv_counts and target. False: no wait (the readiness notify stays), so a sender may
    publish before the destination has reset its counts or consumed its previous result."""

    allgather_pull: bool = False
    """Not a bug but another recipe: allgather pulls (every rank stores its own row into its own
    target, barrier, gets every peer's row, read-complete barrier, epilogue 2) instead of pushing.
    Its own-row stores are published to peers within the call, so in the fenced model they need
    the fence after a window write (the mutant ``allgather-pull-drop-write-fence``)."""

    broadcast_read_complete: bool = False
    """The one non-default that is a fix, not a bug: broadcast adds a read-complete barrier (g=2)
    after the get and retires 2, so the root cannot leave the call (and rewrite its window) while a
    peer is still reading it (the race of pypto #2175, which the specified recipe leaves open)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "wait_cmp":
                ok = isinstance(value, WaitCmp)
            elif f.name == "credit_op":
                ok = isinstance(value, NotifyOp)
            elif f.name == "epilogue_shortfall":
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            else:
                ok = isinstance(value, bool)
            if not ok:
                raise ValueError(f"RecipeVariant.{f.name}: invalid value {value!r} (expected {f.type})")

    # -- what the shared helpers ask ------------------------------------------------------------

    def threshold(self, g: ExprLike) -> ExprLike:
        """The value a wait for generation ``g`` compares against."""
        return g if self.generation_threshold else 1

    def credit_value(self, g: ExprLike) -> ExprLike:
        """The value a credit completing generation ``g`` carries: +1 added, or the threshold Set."""
        return 1 if self.credit_op is NotifyOp.AtomicAdd else self.threshold(g)

    def retired(self, issued: ExprLike) -> Expr | None:
        """Credits per cell the epilogue retires for a call that issued ``issued``; None: no epilogue."""
        if not self.epilogue:
            return None
        value = as_expr(issued)
        if self.epilogue_shortfall:
            value = value - self.epilogue_shortfall
        return value

    # -- description ----------------------------------------------------------------------------

    @property
    def is_default(self) -> bool:
        """True when this is the recipe as specified."""
        return self == RecipeVariant()

    def deviations(self) -> tuple[str, ...]:
        """``field=value`` for every field that differs from the specified recipe, in field order."""
        default = RecipeVariant()
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                text = value.name if isinstance(value, (WaitCmp, NotifyOp)) else repr(value)
                out.append(f"{f.name}={text}")
        return tuple(out)

    def __str__(self) -> str:
        return "RecipeVariant(" + ", ".join(self.deviations()) + ")"


CORRECT = RecipeVariant()
"""The recipe as specified (the default of every entry point)."""

__all__ = ["CORRECT", "RecipeVariant"]
