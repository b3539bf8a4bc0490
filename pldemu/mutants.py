"""The mutant catalogue: lowered collectives that are known to be broken, each modelling a real bug.

pldemu exists so that the bugs that bite on hardware (signal reuse, missing barriers, Eq vs Ge, Set
vs AtomicAdd, a root overwriting data a peer still reads) show up in our runs. A stress tool proves
it by catching every mutant here, and by passing every ``must_pass`` entry, under the conditions
the entry names.

A mutant is a recipe variant (``pldemu.lowering.RecipeVariant``, threaded through the lowering,
never patched into the IR afterwards) plus a usage: the collective and its geometry, the rank count,
an iteration budget and whether the harness may fence between calls. ``broadcast-rewrite-race`` is a
pure usage mutant: the specified recipe called back to back without the consume fence. A ``drop``
entry lives in the fenced model (``--visibility fenced``): the specified recipe, then InsertCommFence
leaving out one marker (``pldemu.lowering.DropMarker``); it runs under fenced visibility as lowered
(the runtime does not run the pass again, which would put the marker back).

    from pldemu.mutants import MUTANTS
    m = MUTANTS["wait-eq"]
    program = m.lower()              # what to run, m.spec.name on m.ranks ranks, m.iterations times
    correct = m.lower_correct()      # the same call with the specified recipe

``pldemu mutants`` lists the catalogue; ``pldemu mutants NAME --show`` diffs a mutant against the
correct lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir.enums import AllreduceMode, NotifyOp, WaitCmp
from pldemu.ir.nodes import Program
from pldemu.lowering import (
    CORRECT,
    DropMarker,
    InsertCommFence,
    InsertToolchainDrains,
    Marker,
    RecipeVariant,
    lower_composite_ops,
)

FAILURE_KINDS: tuple[str, ...] = ("wrong-data", "invariant", "deadlock", "race")
"""How a run can catch a mutant:

* ``wrong-data``: some rank's result differs from the collective's definition (the oracle);
* ``invariant``: a signal cell is non-zero once every rank has retired its calls (or negative, or
  beyond two calls' worth of credits, at any time);
* ``deadlock``: a wait never completes (a bounded wait times out);
* ``race``: a race detector sees a window written while a peer may still read it (or read before
  the write it depends on is ordered), whether or not the bytes happened to differ.
"""

CONDITIONS: MappingProxyType[str, str] = MappingProxyType({
    "reuse": "at least two back-to-back calls on the same signal: the bug only bites from the second call on",
    "restage": "the inputs rewritten between calls (the harness iteration loop), not one call repeated on "
               "the same data",
    "no-fence": "no consume fence between calls, even for the collective the harness normally fences",
    "jitter": "uneven, varying rank speeds: the bug is a timing window hit with some probability per call",
    "cell-check": "every signal cell checked to be 0 when all ranks have retired their calls",
    "timeout": "every wait bounded: the failure is a hang that must end in a timeout, not a stuck job",
    "straggler": "one rank slowed before every primitive (the entry's straggler), so fast peers lap it between "
                 "its notify and its wait: the window opens on every call, not by luck",
    "fenced": "fenced visibility (--visibility fenced): only system.fence lands a write, a notify releases nothing; "
              "the program runs with InsertCommFence's markers as the entry placed them",
})
"""What a harness must provide for a mutant to show (for a must_pass entry: what it must survive)."""


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: a recipe variant, the call it applies to, and what must catch it."""

    name: str
    spec: CollectiveSpec
    """The collective call the bug lives in: small sizes, FP32, NR symbolic (run on ``ranks``)."""
    variant: RecipeVariant
    description: str
    """One line: what is lowered differently (or used differently) from the specified recipe."""
    models: str
    """One line: the real bug this reproduces."""
    expected: tuple[str, ...]
    """The failure kinds (from FAILURE_KINDS) expected to catch it; empty for must_pass."""
    must_pass: bool = False
    """A control: a fixed recipe that must pass under the same conditions as its mutants."""
    consume_fence: bool = True
    """True: the harness applies its usual consume fence (after consuming the results of allgather,
    all_to_all and broadcast). False: no fence between calls at all."""
    iterations: int = 100
    """Recommended number of back-to-back calls per run (the budget a harness should catch it in)."""
    ranks: int = 4
    conditions: tuple[str, ...] = ()
    """Keys of CONDITIONS the harness must provide."""
    straggler: tuple[int, float] | None = None
    """The straggler schedule ``(rank, microseconds)`` a harness applies unless its user chose one.
    Set where the bug needs one rank to be late at a precise point (a timing window that random jitter
    opens only by luck, so a quiet machine would let the mutant survive)."""
    drop: DropMarker | None = None
    """The InsertCommFence marker this entry leaves out (None: no fences placed by the entry). Set
    for the entries of the fenced model, which a harness runs under ``--visibility fenced`` with the
    runtime's own InsertCommFence off (``--no-insert-fences``), so the missing marker stays missing."""

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"mutant name must be a non-empty word, got {self.name!r}")
        for what, text in (("description", self.description), ("models", self.models)):
            if not text or "\n" in text:
                raise ValueError(f"{self.name}: {what} must be one non-empty line")
        unknown = set(self.expected) - set(FAILURE_KINDS)
        if unknown:
            raise ValueError(f"{self.name}: unknown failure kinds {sorted(unknown)}; expected {FAILURE_KINDS}")
        if self.must_pass == bool(self.expected):
            raise ValueError(f"{self.name}: a mutant expects failure kinds; a must_pass control expects none")
        unknown = set(self.conditions) - set(CONDITIONS)
        if unknown:
            raise ValueError(f"{self.name}: unknown conditions {sorted(unknown)}; expected {sorted(CONDITIONS)}")
        if self.iterations < 1 or self.ranks < 2:
            raise ValueError(f"{self.name}: iterations must be >= 1 and ranks >= 2")
        if (self.straggler is not None) != ("straggler" in self.conditions):
            raise ValueError(f"{self.name}: a straggler schedule and the 'straggler' condition go together")
        if self.straggler is not None and not (0 <= self.straggler[0] < self.ranks and self.straggler[1] > 0):
            raise ValueError(f"{self.name}: straggler must be (rank < ranks, microseconds > 0), got {self.straggler}")
        if (self.drop is not None) != ("fenced" in self.conditions):
            raise ValueError(f"{self.name}: a dropped fence marker and the 'fenced' condition go together")

    @property
    def collective(self) -> str:
        """The collective, with the allreduce mode (``allreduce/ring``)."""
        if self.spec.name == "allreduce":
            return f"allreduce/{self.spec.mode.name}"
        return self.spec.name

    @property
    def program(self) -> Program:
        """The un-lowered program of one call of ``spec``."""
        return collective_program(self.spec).program

    def lower(self) -> Program:
        """The mutant: one call of ``spec`` lowered with ``variant`` (and, for a ``drop`` entry,
        InsertCommFence without that marker)."""
        return self.lowering()(self.program)

    def lower_correct(self) -> Program:
        """The same call lowered with the specified recipe (for a ``drop`` entry: with its variant,
        which is then another correct recipe, and every marker)."""
        return _lower(self.program, CORRECT if self.drop is None else self.variant,
                      None if self.drop is None else InsertCommFence())

    def lowering(self) -> Callable[[Program], Program]:
        """LowerCompositeOps with this mutant's variant (then InsertCommFence without the dropped
        marker, for a ``drop`` entry), for hooks that take a lowering function
        (``pldemu.harness.check.run_check(..., lower=m.lowering())``)."""
        fences = None if self.drop is None else InsertCommFence(drop=self.drop)
        return partial(_lower, variant=self.variant, fences=fences)


def _lower(program: Program, variant: RecipeVariant, fences: InsertCommFence | None) -> Program:
    lowered = lower_composite_ops(program, variant=variant)
    # a drop entry leaves out one of InsertCommFence's markers; the toolchain's drains stay
    return lowered if fences is None else InsertToolchainDrains().apply(fences.apply(lowered))


def _catalogue(*mutants: Mutant) -> MappingProxyType[str, Mutant]:
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate mutant names in {names}")
    return MappingProxyType({m.name: m for m in mutants})


# Shared geometry: 64 FP32 elements is one chunk (and, on 4 ranks, four 16-element ring segments,
# each at least one alignment unit), small enough for thousands of iterations.
_MESH = CollectiveSpec("allreduce", size=64)
_RING = CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=64)
_NOTIFY_OVERTAKES = "PTOAS #711/#744, pypto #1561: the notify overtakes the data, the peer's wait returns onto stale bytes"

MUTANTS: MappingProxyType[str, Mutant] = _catalogue(
    Mutant(
        "barrier-fixed-threshold", _MESH,
        RecipeVariant(credit_op=NotifyOp.Set, generation_threshold=False, epilogue=False),
        "every barrier notifies Set 1 and waits Ge 1, no epilogue: any later barrier on the cells passes at once",
        "a one-shot flag barrier (set 1, wait for 1) reused for the post-reduce barrier and the next call",
        ("invariant", "wrong-data", "race"), iterations=20, conditions=("cell-check", "jitter"),
    ),
    Mutant(
        "wait-eq", _MESH, RecipeVariant(wait_cmp=WaitCmp.Eq),
        "every credit wait compares Eq instead of Ge",
        "waiting for cell == g: a fast peer's next credit moves the cell past g before the poll, which then spins forever",
        # The straggler posts its credits, then sleeps before its wait; the peers pass that barrier and
        # post the next generation's credit meanwhile, so the straggler's first poll already sees g+1.
        ("deadlock",), iterations=200, conditions=("straggler", "timeout"), straggler=(1, 1000.0),
    ),
    Mutant(
        "set-credits", _MESH, RecipeVariant(credit_op=NotifyOp.Set),
        "credits Set the cell to the awaited generation (1, 2) instead of AtomicAdd +1; the epilogue still subtracts 2",
        "Set mixed with AtomicAdd on one counter: a fast peer's next-call credit is absorbed by the Set, then retired",
        ("deadlock", "invariant"), iterations=200, conditions=("reuse", "jitter", "timeout", "cell-check"),
    ),
    Mutant(
        "allreduce-no-post-reduce-barrier", _MESH, RecipeVariant(mesh_post_reduce_barrier=False),
        "mesh allreduce stores each reduced chunk with no barrier after the remote loads (epilogue retires 1)",
        "write-after-read across ranks: a fast rank overwrites its input while a slow peer still remote_loads it",
        ("wrong-data", "race"), iterations=200, conditions=("jitter",),
    ),
    Mutant(
        "reduce-scatter-no-post-reduce-barrier", CollectiveSpec("reduce_scatter", size=64),
        RecipeVariant(reduce_scatter_post_reduce_barrier=False),
        "reduce_scatter drops barrier 2 after its remote loads (epilogue retires 1)",
        "a fast rank returns and restages its rows for the next call while a slow peer still remote_loads them",
        ("wrong-data", "race"), iterations=500, conditions=("restage", "jitter"),
    ),
    Mutant(
        "no-epilogue", _MESH, RecipeVariant(epilogue=False),
        "no epilogue: the call never retires its credits, cells grow by 2 per call",
        "a self-clearing barrier that forgets to clear: the next call's barriers see old credits and pass early",
        ("invariant", "wrong-data", "race"), iterations=20, conditions=("reuse", "cell-check"),
    ),
    Mutant(
        "epilogue-one-short", _MESH, RecipeVariant(epilogue_shortfall=1),
        "the epilogue retires N-1 credits per cell instead of N (1 of 2)",
        "an off-by-one credit count: one stale credit per cell per call, so later barriers pass one generation early",
        ("invariant", "wrong-data", "race"), iterations=20, conditions=("reuse", "cell-check"),
    ),
    Mutant(
        "ring-no-push-done", _RING, RecipeVariant(ring_push_done=False),
        "ring allreduce without the push-done barrier: half the ring barriers (ready g=k+1), epilogue retires chunks",
        "reading a slot the left neighbour is still pushing into (pypto #2280's push ring without its second barrier)",
        ("wrong-data", "race"), iterations=200, conditions=("jitter",),
    ),
    Mutant(
        "a2av-no-readiness", CollectiveSpec("all_to_all_v", size=16, max_recv=2),
        RecipeVariant(a2av_readiness_wait=False),
        "all_to_all_v senders publish counts and rows without waiting for the destination's readiness credit",
        "publishing into a peer's recv_counts/target before it has reset its counts and consumed its last result",
        ("wrong-data", "race"), iterations=200, conditions=("reuse", "jitter"),
    ),
    Mutant(
        "wait-before-notify", CollectiveSpec("barrier"), RecipeVariant(notify_before_wait=False),
        "every barrier waits for the peers' credits before posting its own",
        "the classic barrier deadlock: every rank waits for a credit no rank has posted",
        ("deadlock",), iterations=1, conditions=("timeout",),
    ),
    Mutant(
        "broadcast-rewrite-race", CollectiveSpec("broadcast", size=64, root=1), CORRECT,
        "the specified broadcast, called back to back with no consume fence while the root rewrites its input",
        "pypto #2175 (deferred): a fast root overwrites its window for the next call while a slow peer still gets it",
        ("wrong-data", "race"), consume_fence=False, iterations=500,
        conditions=("restage", "no-fence", "jitter"),
    ),
    Mutant(
        "broadcast-read-complete", CollectiveSpec("broadcast", size=64, root=1),
        RecipeVariant(broadcast_read_complete=True),
        "the fixed broadcast: a read-complete barrier (g=2) after the get, epilogue retires 2",
        "the fix of pypto #2175: no rank, the root included, leaves the call before every get has finished",
        (), must_pass=True, consume_fence=False, iterations=500, conditions=("restage", "no-fence", "jitter"),
    ),
    Mutant(
        "allgather-drop-put-fence", CollectiveSpec("allgather", size=64), CORRECT,
        "InsertCommFence without the system.fence after allgather's put: the rows are still pending at the barrier",
        _NOTIFY_OVERTAKES, ("wrong-data", "race"), iterations=20, conditions=("fenced",),
        drop=DropMarker(Marker.PUT_FENCE, 0),
    ),
    Mutant(
        "allgather-pull-drop-write-fence", CollectiveSpec("allgather", size=64), RecipeVariant(allgather_pull=True),
        "pull allgather, InsertCommFence without the system.fence after the own-row tile.store into the target",
        "PTOAS #995: a publish-side marker lost (there the region cacheinvalid lowered to nothing), the suite green",
        ("wrong-data", "race"), iterations=20, conditions=("fenced",),
        drop=DropMarker(Marker.WRITE_FENCE, 0),
    ),
    Mutant(
        "ring-drop-put-fence", _RING, CORRECT,
        "InsertCommFence without the system.fence after the ring's reduce-scatter push (the allgather push keeps it)",
        _NOTIFY_OVERTAKES, ("wrong-data", "race"), iterations=20, conditions=("fenced",),
        drop=DropMarker(Marker.PUT_FENCE, 0),
    ),
)
"""Every catalogue entry by name (immutable)."""

__all__ = ["CONDITIONS", "FAILURE_KINDS", "MUTANTS", "Mutant"]
