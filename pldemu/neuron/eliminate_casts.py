"""NeuronEliminateCasts: absorb a widening cast into its producer by re-typing the producer's destination.

Reproduces the spec's "Reimplementation contract" (seeds/000, TongaEliminateCasts.py) step by step:

* :meth:`NeuronEliminateCasts.shouldMutateInstDstType`: four gates in order (capability flag, three-kind
  whitelist, "src dtype already the target", int/float class equality);
* :meth:`~NeuronEliminateCasts.tryEliminateCast`: the same-dtype bail, then branch A (one producer
  instruction, asserted) or branch B (an AP over a tensor: bail on graph inputs and PSUM, and on a tensor
  with no stores, every store must pass before any is rewritten, each store rewritten, the cast erased
  once);
* :meth:`~NeuronEliminateCasts.eliminateCast`: ``mutateDstTy`` -> ``count_cast`` -> ``replaceAllUsesWith``;
  erasing is the caller's;
* :meth:`~NeuronEliminateCasts.transformStmts`: collect the candidate casts first, then try each once;
* :meth:`~NeuronEliminateCasts.count_cast`: ``tile_size_in_bytes // npartitions * num_dynamic_instances``
  into the statistic "Number of bytes of casts eliminated" (bytes).

**No stores, no rewrite.** The contract's ``all()`` over a tensor's stores passes vacuously when the
tensor has none (a ``const`` tensor, or a kernel whose DMA load was deleted): nothing is re-typed, so the
cast keeps its uses and erasing it would fail (``eraseFromParent``: it still has uses). pldemu bails
there instead (:data:`NO_STORES_BAIL`, after the contract's two tensor bails): the cast is kept, its
verdict says why, and the statistic :data:`KEPT_NO_STORES` counts it. So the pass never raises on a
kernel its verifier accepts (tests/neuron/test_neuron_properties.py).

The gates and bails are data (fields of the frozen pass), so a test can build the pass without one, or
with two swapped, and see its discriminating program change verdict: the mutation tests in
tests/neuron/test_mutants.py.

Gate 3 and the spec's own docstring disagree. As contracted ([CONFIRMED] control flow), gate 3 refuses a
producer whose *source* dtype already equals the target; but the docstring's canonical chain has exactly
that (producer src fp32, dst bf16; cast to fp32), so the contracted pass keeps the canonical cast. The
default (:data:`GATES`) is the contract; :data:`DOCSTRING_GATES` swaps in the reading the docstring
implies ("producer and consumer have the same src type": refuse unless src dtype == target), so both can
be run and compared (``pldemu casts --gate3 docstring``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pldemu.neuron.dtypes import NDType, is_int_type
from pldemu.neuron.ir import AP, Function, FunctionEditor, Inst, Kind, Tensor, TensorUtils, ValueRef
from pldemu.neuron.stats import Statistics, Unit

ELIMINATED_BYTES = "Number of bytes of casts eliminated"
"""The statistic ``count_cast`` adds to, registered in :attr:`Unit.Bytes`."""
KEPT_NO_STORES = "Number of casts kept: the tensor has no stores to re-type"
"""Casts the no-stores bail kept (pldemu's, not the contract's), registered in :attr:`Unit.Count`."""

MUTABLE_KINDS = frozenset({Kind.ActivationOp, Kind.TensorScalarPtrOp, Kind.TensorCopyOp})
"""Gate 2's whitelist: the only kinds whose destination dtype may be mutated."""


class Refusal(enum.Enum):
    """Why a candidate cast was kept: the gate a producer failed, or the bail taken."""

    GATE1_CAN_MUTATE_DST_TY = "gate 1: canMutateDstTy is false"
    GATE2_WHITELIST = "gate 2: not ActivationOp, TensorScalarPtrOp or TensorCopyOp"
    GATE3_SRC_IS_TARGET = "gate 3: the producer's src dtype already equals the target"
    GATE3_SRC_IS_NOT_TARGET = "gate 3 (docstring reading): the producer's src dtype is not the target"
    GATE4_INT_FLOAT_CLASS = "gate 4: the producer's dst and src differ in int/float class"
    BAIL_SAME_DTYPE = "bail: the cast's dtype equals its source's (a numeric no-op)"
    BAIL_GRAPH_INPUT = "bail: the tensor is a graph input (isInput: dtype fixed from outside)"
    BAIL_PSUM = "bail: the tensor is PSUM (dtype hardware-fixed)"
    BAIL_NO_STORES = ("bail: the tensor has no stores (a const tensor, or one never written): no producer to "
                      "re-type, the cast keeps its uses")


@dataclass(frozen=True)
class Gate:
    """One short-circuit gate of ``shouldMutateInstDstType``: ``passes(f, inst, dtype)``."""

    refusal: Refusal
    passes: Callable[[Function, Inst, NDType], bool]


@dataclass(frozen=True)
class CastBail:
    """An early bail of ``tryEliminateCast`` on the cast itself."""

    refusal: Refusal
    applies: Callable[[Function, Inst], bool]


@dataclass(frozen=True)
class TensorBail:
    """A branch-B bail on the tensor behind the cast's access pattern (``applies(f, tensor)``)."""

    refusal: Refusal
    applies: Callable[[Function, Tensor], bool]


GATE1 = Gate(Refusal.GATE1_CAN_MUTATE_DST_TY, lambda f, inst, dtype: inst.canMutateDstTy)
GATE2 = Gate(Refusal.GATE2_WHITELIST, lambda f, inst, dtype: inst.kind in MUTABLE_KINDS)
GATE3 = Gate(Refusal.GATE3_SRC_IS_TARGET, lambda f, inst, dtype: f.dtype_of(inst.src) != dtype)
# [STRONG] gate 4 is is_int_type(dst) == is_int_type(src) (the spec reconstructs == from symmetric targets).
GATE4 = Gate(Refusal.GATE4_INT_FLOAT_CLASS,
             lambda f, inst, dtype: is_int_type(inst.dtype) == is_int_type(f.dtype_of(inst.src)))
GATE3_DOCSTRING = Gate(Refusal.GATE3_SRC_IS_NOT_TARGET, lambda f, inst, dtype: f.dtype_of(inst.src) == dtype)

GATES: tuple[Gate, ...] = (GATE1, GATE2, GATE3, GATE4)
"""The contract's gates, in its order."""
DOCSTRING_GATES: tuple[Gate, ...] = (GATE1, GATE2, GATE3_DOCSTRING, GATE4)
"""Gate 3 as the docstring's canonical chain needs it (see the module docstring)."""

SAME_DTYPE_BAIL = CastBail(Refusal.BAIL_SAME_DTYPE, lambda f, cast: cast.dtype == f.dtype_of(cast.src))
CAST_BAILS: tuple[CastBail, ...] = (SAME_DTYPE_BAIL,)
GRAPH_INPUT_BAIL = TensorBail(Refusal.BAIL_GRAPH_INPUT, lambda f, t: t.isInput)
PSUM_BAIL = TensorBail(Refusal.BAIL_PSUM, lambda f, t: t.is_psum)
NO_STORES_BAIL = TensorBail(Refusal.BAIL_NO_STORES, lambda f, t: not TensorUtils.store_insts(f, t))
TENSOR_BAILS: tuple[TensorBail, ...] = (GRAPH_INPUT_BAIL, PSUM_BAIL, NO_STORES_BAIL)
"""The contract's two tensor bails, then pldemu's no-stores bail (see the module docstring)."""


@dataclass(frozen=True)
class Verdict:
    """What happened to one candidate cast."""

    cast: str
    eliminated: bool
    refusal: Refusal | None = None
    refused_by: str | None = None
    """The producer or store that failed a gate (None for a bail)."""
    producers: tuple[str, ...] = ()
    """The instructions whose dst dtype was mutated."""
    bytes: int = 0

    def describe(self) -> str:
        if self.eliminated:
            return f"%{self.cast}: eliminated; mutated {', '.join('%' + p for p in self.producers)}; {self.bytes} bytes"
        who = f" (%{self.refused_by})" if self.refused_by else ""
        return f"%{self.cast}: kept by {self.refusal.value if self.refusal else '?'}{who}"


@dataclass(frozen=True)
class PassResult:
    """The program before and after, one verdict per candidate (in walk order) and the edit journal."""

    before: Function
    after: Function
    verdicts: tuple[Verdict, ...]
    journal: tuple[tuple[str, str], ...]

    @property
    def eliminated(self) -> tuple[str, ...]:
        return tuple(v.cast for v in self.verdicts if v.eliminated)

    @property
    def bytes_eliminated(self) -> int:
        """Bytes this run added to the statistic."""
        return sum(v.bytes for v in self.verdicts)


@dataclass(frozen=True)
class NeuronEliminateCasts:
    """The pass. ``stats`` receives the byte statistic; the other fields default to the contract.

    The spec's counter is a class attribute shared by every instance and invocation; here it lives in
    the explicit ``stats`` registry (no global state): passes that share a registry share the counter.
    """

    stats: Statistics = field(default_factory=Statistics)
    gates: tuple[Gate, ...] = GATES
    cast_bails: tuple[CastBail, ...] = CAST_BAILS
    tensor_bails: tuple[TensorBail, ...] = TENSOR_BAILS

    def __post_init__(self) -> None:
        self.stats.register_stats(**{ELIMINATED_BYTES: Unit.Bytes, KEPT_NO_STORES: Unit.Count})

    def first_refusal(self, f: Function, inst: Inst, dtype: NDType) -> Refusal | None:
        """The first gate ``inst`` fails for re-typing to ``dtype``, or None (short-circuit, in order)."""
        return next((g.refusal for g in self.gates if not g.passes(f, inst, dtype)), None)

    def shouldMutateInstDstType(self, f: Function, inst: Inst, dtype: NDType) -> bool:
        """May ``inst``'s destination dtype become ``dtype``?"""
        return self.first_refusal(f, inst, dtype) is None

    def count_cast(self, ed: FunctionEditor, cast: Inst) -> int:
        """Add the eliminated cast's bytes to the statistic; returns them."""
        ed.note("count_cast", cast.name)
        f = ed.function
        cast = f.inst(cast.name)  # the live cast: it must not have been erased yet
        bytes_per_partition = f.tile_size_in_bytes(cast) // f.npartitions(cast)
        eliminated_bytes = bytes_per_partition * cast.num_dynamic_instances
        self.stats.add(ELIMINATED_BYTES, eliminated_bytes)
        return eliminated_bytes

    def eliminateCast(self, ed: FunctionEditor, cast: Inst, src_inst: Inst, dtype: NDType) -> int:
        """Re-type ``src_inst``, count the cast, redirect the cast's uses to ``cast.src`` (bytes counted)."""
        ed.mutateDstTy(src_inst, dtype)
        counted = self.count_cast(ed, cast)
        # cast.src as it is now: in branch B, mutateDstTy has just re-typed the AP with its tensor
        ed.replaceAllUsesWith(cast, ed.function.inst(cast.name).src)
        return counted

    def tryEliminateCast(self, ed: FunctionEditor, cast: Inst) -> Verdict:
        """Eliminate ``cast`` if legal (see the module docstring); the verdict says what happened."""
        f = ed.function
        dtype = cast.dtype
        for bail in self.cast_bails:
            if bail.applies(f, cast):
                return Verdict(cast.name, False, bail.refusal)
        if not isinstance(cast.src, AP):
            assert isinstance(cast.src, ValueRef), f"%{cast.name}: the cast's src is neither an AP nor an instruction"
            producer = f.inst(cast.src.name)
            refusal = self.first_refusal(f, producer, dtype)
            if refusal is not None:
                return Verdict(cast.name, False, refusal, producer.name)
            counted = self.eliminateCast(ed, cast, producer, dtype)
            ed.eraseFromParent(cast)
            return Verdict(cast.name, True, producers=(producer.name,), bytes=counted)
        return self._try_access_pattern(ed, cast, f.tensor(cast.src.tensor), dtype)

    def _try_access_pattern(self, ed: FunctionEditor, cast: Inst, tensor: Tensor, dtype: NDType) -> Verdict:
        """Branch B: every store of ``tensor`` must pass before any is rewritten."""
        f = ed.function
        for bail in self.tensor_bails:
            if bail.applies(f, tensor):
                if bail.refusal is Refusal.BAIL_NO_STORES:
                    self.stats.add(KEPT_NO_STORES, 1)
                return Verdict(cast.name, False, bail.refusal)
        checked: Iterator[tuple[Inst, Refusal | None]] = (
            (store, self.first_refusal(f, store, dtype)) for store in TensorUtils.store_insts(f, tensor))
        failed = next(((store, r) for store, r in checked if r is not None), None)  # all(): first failure stops
        if failed is not None:
            return Verdict(cast.name, False, failed[1], failed[0].name)
        # The second store_insts call, as in the spec; [CONFIRMED] count_cast runs once per store (via
        # eliminateCast), so a cast behind k stores adds k times its bytes.
        stores = [s.name for s in TensorUtils.store_insts(ed.function, tensor)]
        counted = 0
        for name in stores:
            live = ed.function
            counted += self.eliminateCast(ed, live.inst(cast.name), live.inst(name), dtype)
        # [STRONG] erased once, after every store is re-typed (the spec's single-erase reading).
        ed.eraseFromParent(cast)
        return Verdict(cast.name, True, producers=tuple(stores), bytes=counted)

    def transformStmts(self, f: Function) -> PassResult:
        """One forward walk over a snapshot of the candidates; no inner fixpoint ([STRONG])."""
        ed = FunctionEditor(f)
        # [STRONG] candidates are TensorCopyOps whose dst is falsy; [INFERRED] "falsy dst" means the cast
        # yields a value (no store into a tensor), the only kind replaceAllUsesWith can redirect.
        candidates = [inst.name for inst in f.insts if inst.kind is Kind.TensorCopyOp and not inst.dst]
        # The spec's list holds live objects; names fetched from the editor give the same live view.
        verdicts = tuple(self.tryEliminateCast(ed, ed.function.inst(name)) for name in candidates)
        return PassResult(f, ed.freeze(), verdicts, tuple(ed.journal))


__all__ = ["CAST_BAILS", "DOCSTRING_GATES", "ELIMINATED_BYTES", "GATES", "KEPT_NO_STORES", "MUTABLE_KINDS",
           "NO_STORES_BAIL", "TENSOR_BAILS",
           "CastBail", "Gate", "NeuronEliminateCasts", "PassResult", "Refusal", "TensorBail", "Verdict"]
