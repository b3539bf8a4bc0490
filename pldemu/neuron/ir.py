"""The Neuron-style instruction IR the cast pass runs on: tensors, access patterns, instructions.

Names follow the spec (seeds/000) and neuron-casts.md so a reader of either recognises every term:
``SBTensor`` / ``PSUMTensor`` / HBM tensors are one :class:`Tensor` with a :class:`Memory`; an operand is
a producer instruction (:class:`ValueRef`, the SSA result of a ``NeuronInst``) or an access pattern
(:class:`AP`, the ``NeuronAP``: tensor, ``[[step, num], ...]``, offset, its own dtype); an instruction has
``src``, a destination ``dtype``, an optional ``dst`` (an AP it stores into) and ``canMutateDstTy``.

Nodes are frozen. The pass edits through :class:`FunctionEditor`, the one mutable place, whose methods
carry the spec's names (``mutateDstTy``, ``replaceAllUsesWith``, ``eraseFromParent``) and record every
edit in a journal, so the order of edits is observable.

Loops are a per-instruction trip-count annotation (``trips=N``, the product of the enclosing trip
counts): the IR has no induction variables, so a trip count changes how often an instruction runs
(``num_dynamic_instances``), never what it computes.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from pldemu.neuron.dtypes import NDType

MAX_PARTITIONS = 128
"""``pmax``: the partition dimension of every on-chip tensor is at most 128."""


class IRError(ValueError):
    """An ill-formed program or an illegal edit."""


class Memory(enum.Enum):
    """Where a tensor lives: ``NeuronSBTensor``, ``NeuronPSUMTensor``, or an HBM (DRAM) tensor."""

    SBUF = "sbuf"
    PSUM = "psum"
    HBM = "hbm"


class TensorFlag(enum.Enum):
    """The ``TensorType`` flags the pass can see (Input is what ``isInput`` tests)."""

    INPUT = "input"
    OUTPUT = "output"
    CONST = "const"


class Kind(enum.Enum):
    """The instruction kinds: three the pass may re-type, three for contrast."""

    ActivationOp = "ActivationOp"
    TensorScalarPtrOp = "TensorScalarPtrOp"
    TensorCopyOp = "TensorCopyOp"
    TensorTensorOp = "TensorTensorOp"
    MatMultOp = "MatMultOp"
    DMACopy = "DMACopy"


@dataclass(frozen=True)
class Tensor:
    """A named tensor, partition dimension first: ``shape = (partitions, free)``."""

    name: str
    memory: Memory
    shape: tuple[int, int]
    dtype: NDType
    flags: frozenset[TensorFlag] = frozenset()
    line: int = field(default=0, compare=False)

    @property
    def isInput(self) -> bool:
        """A graph (kernel) input: its dtype is fixed from outside."""
        return TensorFlag.INPUT in self.flags

    @property
    def isOutput(self) -> bool:
        return TensorFlag.OUTPUT in self.flags

    @property
    def is_const(self) -> bool:
        return TensorFlag.CONST in self.flags

    @property
    def is_psum(self) -> bool:
        """The ``isinstance(tensor, NeuronPSUMTensor)`` test."""
        return self.memory is Memory.PSUM

    @property
    def npartitions(self) -> int:
        return self.shape[0]

    @property
    def nelems(self) -> int:
        return self.shape[0] * self.shape[1]


@dataclass(frozen=True)
class AP:
    """An access pattern over ``tensor``: element ``offset + sum(i_k * step_k)`` for ``i_k < num_k``.

    The first pair walks the partitions (its step is the tensor's free size); the others walk the free
    dimension. Its dtype is its own field (NKI's ``ap(..., dtype=)``); the verifier requires it to equal
    the tensor's, as this IR has no reinterpreting views.
    """

    tensor: str
    pattern: tuple[tuple[int, int], ...]
    offset: int
    dtype: NDType

    @property
    def shape(self) -> tuple[int, int]:
        """(partitions, free elements) of the tile the pattern reads or writes."""
        return self.pattern[0][1], math.prod(num for _, num in self.pattern[1:])

    def indices(self) -> list[int]:
        """Flat element indices in pattern order (row-major over the pairs)."""
        out = [self.offset]
        for step, num in self.pattern:
            out = [base + i * step for base in out for i in range(num)]
        return out


@dataclass(frozen=True)
class ValueRef:
    """The result of the instruction called ``name`` (a ``NeuronInst`` operand)."""

    name: str


Operand = ValueRef | AP


@dataclass(frozen=True)
class Inst:
    """One instruction. Every instruction has a unique ``name``; it is a readable value only when the
    instruction has no ``dst`` (a store into a tensor is read back through an AP over that tensor)."""

    name: str
    kind: Kind
    srcs: tuple[Operand, ...]
    dtype: NDType
    dst: AP | None = None
    func: str | None = None
    scalar: float | None = None
    acc: bool = False
    canMutateDstTy: bool = False
    trips: int = 1
    line: int = field(default=0, compare=False)

    @property
    def src(self) -> Operand:
        """The (first) source operand: what gate 3 and ``tryEliminateCast`` read."""
        return self.srcs[0]

    @property
    def num_dynamic_instances(self) -> int:
        """How many times the instruction runs: the product of its enclosing trip counts."""
        return self.trips


@dataclass(frozen=True)
class Function:
    """A kernel: its tensors and its instructions in program order (``f.insts``)."""

    name: str
    tensors: tuple[Tensor, ...]
    insts: tuple[Inst, ...]

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise IRError(f"no tensor {name!r}")

    def inst(self, name: str) -> Inst:
        for i in self.insts:
            if i.name == name:
                return i
        raise IRError(f"no instruction %{name}")

    def dtype_of(self, operand: Operand) -> NDType:
        """``operand.dtype``: an AP's own dtype, or the producer's destination dtype."""
        return operand.dtype if isinstance(operand, AP) else self.inst(operand.name).dtype

    def shape_of(self, operand: Operand) -> tuple[int, int]:
        return operand.shape if isinstance(operand, AP) else self.result_shape(self.inst(operand.name))

    def result_shape(self, inst: Inst) -> tuple[int, int]:
        """The tile an instruction writes: its dst's shape, else its source's (same-shape elementwise ops)."""
        return inst.dst.shape if inst.dst is not None else self.shape_of(inst.src)

    def tile_size_in_bytes(self, inst: Inst) -> int:
        """Bytes of the tile ``inst`` produces, at its destination dtype."""
        p, free = self.result_shape(inst)
        return p * free * inst.dtype.itemsize

    def npartitions(self, inst: Inst) -> int:
        return self.result_shape(inst)[0]

    def users(self, name: str) -> list[Inst]:
        """Instructions reading the value ``%name``."""
        return [i for i in self.insts if ValueRef(name) in i.srcs]


class TensorUtils:
    """The spec's ``TensorUtils`` helper (stateless)."""

    @staticmethod
    def store_insts(f: Function, tensor: Tensor) -> list[Inst]:
        """Every instruction that writes ``tensor`` (its dst is an AP over it), in program order."""
        return [i for i in f.insts if i.dst is not None and i.dst.tensor == tensor.name]


def operands(inst: Inst) -> Iterator[Operand]:
    """Every operand of ``inst``, sources then destination."""
    yield from inst.srcs
    if inst.dst is not None:
        yield inst.dst


def _retype_ap(op: Operand, tensor: str, dtype: NDType) -> Operand:
    return replace(op, dtype=dtype) if isinstance(op, AP) and op.tensor == tensor else op


def _retype_dst(dst: AP | None, tensor: str, dtype: NDType) -> AP | None:
    return replace(dst, dtype=dtype) if dst is not None and dst.tensor == tensor else dst


class FunctionEditor:
    """The mutable working copy the pass edits; :meth:`freeze` gives the frozen result.

    ``journal`` lists every edit as ``(event, instruction name)`` in the order it happened.
    """

    def __init__(self, f: Function) -> None:
        self.name = f.name
        self.tensors = list(f.tensors)
        self.insts = list(f.insts)
        self.journal: list[tuple[str, str]] = []

    def freeze(self) -> Function:
        return Function(self.name, tuple(self.tensors), tuple(self.insts))

    @property
    def function(self) -> Function:
        """The current state, frozen (cheap at this IR's sizes)."""
        return self.freeze()

    def note(self, event: str, name: str) -> None:
        self.journal.append((event, name))

    def mutateDstTy(self, inst: Inst, dtype: NDType) -> None:
        """Make ``inst`` write ``dtype``. A store re-types its tensor and every AP over it
        ([INFERRED]: the tensor holds what its stores write, and an AP's dtype equals its tensor's here)."""
        self.note("mutateDstTy", inst.name)
        if inst.dst is None:
            self._replace(inst.name, lambda i: replace(i, dtype=dtype))
            return
        name = inst.dst.tensor
        self.tensors = [replace(t, dtype=dtype) if t.name == name else t for t in self.tensors]
        self.insts = [replace(i, srcs=tuple(_retype_ap(s, name, dtype) for s in i.srcs),
                              dst=_retype_dst(i.dst, name, dtype))
                      for i in self.insts]
        self._replace(inst.name, lambda i: replace(i, dtype=dtype))

    def replaceAllUsesWith(self, cast: Inst, new: Operand) -> None:
        """Point every use of ``%cast`` at ``new``. Like LLVM's RAUW it refuses to change the uses'
        type: the producer must already have been re-typed (hence mutateDstTy comes first)."""
        self.note("replaceAllUsesWith", cast.name)
        current = self.function
        old, got = current.inst(cast.name).dtype, current.dtype_of(new)
        if old != got:
            raise IRError(f"replaceAllUsesWith(%{cast.name}): the new value is {got.value}, "
                          f"the uses expect {old.value}")
        ref = ValueRef(cast.name)
        self.insts = [replace(i, srcs=tuple(new if s == ref else s for s in i.srcs)) for i in self.insts]

    def eraseFromParent(self, inst: Inst) -> None:
        """Remove ``inst``; it must have no uses left."""
        self.note("eraseFromParent", inst.name)
        if self.function.users(inst.name):
            raise IRError(f"eraseFromParent(%{inst.name}): it still has uses")
        self.insts = [i for i in self.insts if i.name != inst.name]

    def _replace(self, name: str, edit: Callable[[Inst], Inst]) -> None:
        self.insts = [edit(i) if i.name == name else i for i in self.insts]


__all__ = ["AP", "MAX_PARTITIONS", "Function", "FunctionEditor", "IRError", "Inst", "Kind", "Memory", "Operand",
           "Tensor", "TensorFlag", "TensorUtils", "ValueRef", "operands"]
