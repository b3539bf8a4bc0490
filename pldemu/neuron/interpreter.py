"""Execute a Neuron kernel on NumPy + ml_dtypes, the way the engines compute.

Every engine instruction reads its sources, computes in the compute dtype (fp32 on the machine), and
rounds to its destination dtype on write (round to nearest even, through ml_dtypes; integers round and
saturate [INFERRED]); bitvec ops work on raw integers; a same-dtype TensorCopyOp is bit-exact;
MatMultOp accumulates in fp32 into PSUM (``acc`` adds to what is there); DMACopy copies bytes.

:class:`Numerics` picks the storage: ``HARDWARE`` (every value in its declared dtype), ``FP32`` (the fp32
reference: on-chip floats held in fp32, kernel inputs and outputs in their declared dtypes, as if no
narrowing cast existed on chip) and ``FLOAT64`` (the exact reference: every float in float64, computed
in float64). Trip counts (``trips=``) are not re-executed: without induction variables a repeat
recomputes the same tile (MatMultOp with ``acc`` is the exception and is not put in loops here).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from pldemu.neuron.dtypes import NDType, is_int_type
from pldemu.neuron.ir import AP, Function, Inst, Kind, Memory, Operand, Tensor
from pldemu.neuron.ops import ACTIVATIONS, ARITH, BITVEC


class Numerics(enum.Enum):
    """How values are stored and computed (see the module docstring)."""

    HARDWARE = "hardware"
    FP32 = "fp32"
    FLOAT64 = "float64"


class _Machine:
    """One run's state: tensor contents (flat, storage dtype) and value tiles."""

    def __init__(self, f: Function, inputs: Mapping[str, np.ndarray], numerics: Numerics) -> None:
        self.f, self.numerics = f, numerics
        self.compute = np.dtype(np.float64 if numerics is Numerics.FLOAT64 else np.float32)
        self.tensors: dict[str, np.ndarray] = {}
        for t in f.tensors:
            given = inputs.get(t.name)
            flat = np.zeros(t.nelems) if given is None else np.asarray(given, dtype=np.float64).reshape(-1)
            self.tensors[t.name] = self.convert(flat, t.dtype, t.memory)
        self.values: dict[str, np.ndarray] = {}

    def storage(self, dtype: NDType, memory: Memory) -> np.dtype:
        if is_int_type(dtype) or self.numerics is Numerics.HARDWARE:
            return dtype.np
        if self.numerics is Numerics.FLOAT64 or memory is not Memory.HBM:
            return self.compute
        return dtype.np

    def convert(self, x: np.ndarray, dtype: NDType, memory: Memory) -> np.ndarray:
        """``x`` as stored in a ``dtype`` location of ``memory``: RNE for floats, round + saturate for ints."""
        target = self.storage(dtype, memory)
        if np.issubdtype(target, np.integer):
            info = np.iinfo(target)
            if not np.issubdtype(x.dtype, np.integer):
                x = np.rint(x.astype(np.float64))
            return np.clip(x, info.min, info.max).astype(target)
        return x.astype(target)

    def read(self, op: Operand) -> np.ndarray:
        if isinstance(op, AP):
            return self.tensors[op.tensor][op.indices()].reshape(op.shape)
        return self.values[op.name]

    def write(self, inst: Inst, result: np.ndarray) -> None:
        if inst.dst is None:
            self.values[inst.name] = self.convert(result, inst.dtype, Memory.SBUF)
            return
        t = self.f.tensor(inst.dst.tensor)
        self.tensors[t.name][inst.dst.indices()] = self.convert(result, inst.dtype, t.memory).reshape(-1)

    def arith(self, op: Operand) -> np.ndarray:
        return self.read(op).astype(self.compute)


Handler = Callable[[_Machine, Inst], np.ndarray]


def _activation(m: _Machine, inst: Inst) -> np.ndarray:
    assert inst.func is not None
    return ACTIVATIONS[inst.func](m.arith(inst.src))


def _tensor_scalar(m: _Machine, inst: Inst) -> np.ndarray:
    assert inst.func is not None and inst.scalar is not None
    if inst.func in BITVEC:
        x = m.read(inst.src)
        return BITVEC[inst.func](x, np.asarray(int(inst.scalar), dtype=x.dtype))
    return ARITH[inst.func](m.arith(inst.src), np.asarray(inst.scalar, dtype=m.compute))


def _tensor_copy(m: _Machine, inst: Inst) -> np.ndarray:
    x = m.read(inst.src)
    if x.dtype == m.storage(inst.dtype, Memory.SBUF):
        return x.copy()  # same dtype: bit-accurate
    return x.astype(m.compute)  # different dtypes: through the compute dtype (lossy for large int32)


def _tensor_tensor(m: _Machine, inst: Inst) -> np.ndarray:
    assert inst.func is not None
    return ARITH[inst.func](m.arith(inst.srcs[0]), m.arith(inst.srcs[1]))


def _matmul(m: _Machine, inst: Inst) -> np.ndarray:
    out = m.arith(inst.srcs[0]).T @ m.arith(inst.srcs[1])
    if inst.acc:
        assert inst.dst is not None
        out = out + m.arith(inst.dst)
    return out


def _dma(m: _Machine, inst: Inst) -> np.ndarray:
    return m.read(inst.src)


HANDLERS: Mapping[Kind, Handler] = MappingProxyType({
    Kind.ActivationOp: _activation,
    Kind.TensorScalarPtrOp: _tensor_scalar,
    Kind.TensorCopyOp: _tensor_copy,
    Kind.TensorTensorOp: _tensor_tensor,
    Kind.MatMultOp: _matmul,
    Kind.DMACopy: _dma,
})
if set(HANDLERS) != set(Kind):
    raise ImportError(f"interpreter: no handler for {sorted(k.value for k in set(Kind) - set(HANDLERS))}")


def run(f: Function, inputs: Mapping[str, np.ndarray], numerics: Numerics = Numerics.HARDWARE) -> dict[str, np.ndarray]:
    """Run verified ``f`` on ``inputs`` (tensor name -> values); the output tensors, shape (P, F), float64."""
    m = _Machine(f, inputs, numerics)
    for inst in f.insts:
        m.write(inst, HANDLERS[inst.kind](m, inst))
    return {t.name: m.tensors[t.name].astype(np.float64).reshape(t.shape) for t in f.tensors if t.isOutput}


def make_inputs(f: Function, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic values for every input and const tensor, exactly representable in its dtype."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in f.tensors:
        if t.isInput or t.is_const:
            out[t.name] = _values(rng, t)
    return out


def _values(rng: np.random.Generator, t: Tensor) -> np.ndarray:
    if is_int_type(t.dtype):
        low = 0 if np.iinfo(t.dtype.np).min == 0 else -8
        return rng.integers(low, 16, size=t.shape).astype(np.float64)
    return rng.uniform(-2.0, 2.0, size=t.shape).astype(t.dtype.np).astype(np.float64)


__all__ = ["HANDLERS", "Numerics", "make_inputs", "run"]
