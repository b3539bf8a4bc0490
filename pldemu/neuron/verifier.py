"""Well-formedness of a Neuron kernel: what the parser cannot see (names, shapes, dtypes, bounds, memories).

``verify(f)`` returns ``f`` or raises :class:`VerifyError` whose message starts ``line N:`` (the CLI puts
the file name in front). Rules follow neuron-casts.md: at most 128 partitions; PSUM holds fp32 and is
written by MatMultOp; engines read and write SBUF/PSUM, DMACopy moves bytes between HBM and SBUF (so its
dtypes agree); an AP's dtype equals its tensor's and stays inside it; graph inputs are never stored to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from pldemu.neuron.dtypes import NDType, is_int_type
from pldemu.neuron.ir import AP, MAX_PARTITIONS, Function, Inst, IRError, Kind, Memory, Tensor, ValueRef
from pldemu.neuron.ops import ACTIVATIONS, ARITH, BITVEC

SrcInfo = tuple[tuple[int, int], NDType, Memory | None]
"""(shape, dtype, memory) of a source; memory None for a value tile."""

MATMUL_MAX_FREE = 512
"""One matmul output fits one PSUM bank: at most 512 fp32 per partition."""


class VerifyError(IRError):
    """A rule broken at a source line (``line`` 0: not from a file)."""

    def __init__(self, message: str, line: int) -> None:
        self.message, self.line = message, line
        super().__init__(f"line {line}: {message}")

    def located(self, filename: str) -> str:
        """``filename:line: message``."""
        return f"{filename}:{self.line}: {self.message}"


def _fail(line: int, message: str) -> VerifyError:
    return VerifyError(message, line)


def _check_tensor(t: Tensor) -> None:
    p, free = t.shape
    if not 1 <= p <= MAX_PARTITIONS:
        raise _fail(t.line, f"tensor {t.name} has {p} partitions; 1..{MAX_PARTITIONS} allowed")
    if free < 1:
        raise _fail(t.line, f"tensor {t.name} has free size {free}; at least 1 needed")
    if t.is_psum and (t.dtype is not NDType.FP32 or t.flags):
        raise _fail(t.line, f"PSUM tensor {t.name} must be plain fp32 (its dtype is hardware-fixed)")


def _check_ap(f: Function, inst: Inst, ap: AP) -> Tensor:
    try:
        t = f.tensor(ap.tensor)
    except IRError as err:
        raise _fail(inst.line, f"%{inst.name}: {err}") from None
    where = f"%{inst.name}: access pattern over {t.name}"
    if ap.dtype is not t.dtype:
        raise _fail(inst.line, f"{where}: dtype mismatch: the AP says {ap.dtype.value}, the tensor is {t.dtype.value}")
    step0, num0 = ap.pattern[0]
    if step0 != t.shape[1] or not 1 <= num0 <= t.npartitions:
        raise _fail(inst.line, f"{where}: the first pair must be [{t.shape[1]}, <= {t.npartitions}] "
                               f"(partitions), got [{step0}, {num0}]")
    if any(num < 1 or step < 0 for step, num in ap.pattern) or ap.offset < 0:
        raise _fail(inst.line, f"{where}: counts must be >= 1, steps and the offset >= 0")
    p0, f0 = divmod(ap.offset, t.shape[1])
    free_last = f0 + sum((num - 1) * step for step, num in ap.pattern[1:])
    if p0 + num0 > t.npartitions or free_last >= t.shape[1]:
        raise _fail(inst.line, f"{where}: out of bounds: partitions {p0}..{p0 + num0 - 1} of {t.npartitions}, "
                               f"free elements {f0}..{free_last} of {t.shape[1]}")
    return t


def _check_operands(f: Function, inst: Inst, defined: Mapping[str, Inst]) -> list[SrcInfo]:
    """(shape, dtype, memory or None for a value) of each source."""
    out: list[SrcInfo] = []
    for src in inst.srcs:
        if isinstance(src, ValueRef):
            producer = defined.get(src.name)
            if producer is None:
                raise _fail(inst.line, f"%{inst.name}: %{src.name} is not defined before this instruction")
            if producer.dst is not None:
                raise _fail(inst.line, f"%{inst.name}: %{src.name} writes tensor {producer.dst.tensor}; "
                                       "read it through an access pattern")
            out.append((f.result_shape(producer), producer.dtype, None))
        else:
            out.append((src.shape, src.dtype, _check_ap(f, inst, src).memory))
    return out


_ARITY = MappingProxyType({Kind.ActivationOp: 1, Kind.TensorScalarPtrOp: 1, Kind.TensorCopyOp: 1,
                           Kind.TensorTensorOp: 2, Kind.MatMultOp: 2, Kind.DMACopy: 1})
_FUNCS: Mapping[Kind, frozenset[str]] = MappingProxyType({
    Kind.ActivationOp: frozenset(ACTIVATIONS), Kind.TensorScalarPtrOp: frozenset(ARITH) | frozenset(BITVEC),
    Kind.TensorTensorOp: frozenset(ARITH)})


def _check_attrs(inst: Inst) -> None:
    where = f"%{inst.name} ({inst.kind.value})"
    if len(inst.srcs) != _ARITY[inst.kind]:
        raise _fail(inst.line, f"{where} takes {_ARITY[inst.kind]} source(s), got {len(inst.srcs)}")
    funcs = _FUNCS.get(inst.kind, frozenset())
    if not (inst.func in funcs if funcs else inst.func is None):
        expected = f"func= one of {', '.join(sorted(funcs))}" if funcs else "no func="
        raise _fail(inst.line, f"{where} needs {expected}, got {inst.func!r}")
    if (inst.scalar is not None) != (inst.kind is Kind.TensorScalarPtrOp):
        raise _fail(inst.line, f"{where}: scalar= belongs to TensorScalarPtrOp (and it needs one)")
    if inst.acc and inst.kind is not Kind.MatMultOp:
        raise _fail(inst.line, f"{where}: acc belongs to MatMultOp")
    if inst.trips < 1:
        raise _fail(inst.line, f"{where}: trips={inst.trips}; at least 1")


def _check_elementwise(inst: Inst, srcs: list[SrcInfo]) -> None:
    where = f"%{inst.name} ({inst.kind.value})"
    if any(mem is Memory.HBM for _, _, mem in srcs):
        raise _fail(inst.line, f"{where}: engines read SBUF or PSUM; bring HBM data in with DMACopy")
    if len({shape for shape, _, _ in srcs}) != 1:
        raise _fail(inst.line, f"{where}: source shapes differ: {[s for s, _, _ in srcs]}")
    if inst.func in BITVEC and not (is_int_type(srcs[0][1]) and is_int_type(inst.dtype)):
        raise _fail(inst.line, f"{where}: bitvec op {inst.func} needs integer dtypes")


def _check_matmul(f: Function, inst: Inst, srcs: list[SrcInfo]) -> None:
    (k1, m), (k2, n) = srcs[0][0], srcs[1][0]
    if any(mem is not Memory.SBUF and mem is not None for _, _, mem in srcs):
        raise _fail(inst.line, f"%{inst.name} (MatMultOp) reads its operands from SBUF")
    if inst.dst is None or f.tensor(inst.dst.tensor).memory is not Memory.PSUM or inst.dtype is not NDType.FP32:
        raise _fail(inst.line, f"%{inst.name} (MatMultOp) writes an fp32 PSUM tensor (dst=...:fp32)")
    if k1 != k2 or inst.dst.shape != (m, n) or n > MATMUL_MAX_FREE:
        raise _fail(inst.line, f"%{inst.name} (MatMultOp): [K,M] x [K,N] -> [M,N] with N <= {MATMUL_MAX_FREE}; "
                               f"got [{k1},{m}] x [{k2},{n}] -> {list(inst.dst.shape)}")


def _check_dma(f: Function, inst: Inst, srcs: list[SrcInfo]) -> None:
    if inst.dst is None:
        raise _fail(inst.line, f"%{inst.name} (DMACopy) needs dst=")
    dst_mem = f.tensor(inst.dst.tensor).memory
    shape, dtype, src_mem = srcs[0]
    if (dst_mem is Memory.HBM) == (src_mem is Memory.HBM) or Memory.PSUM in (dst_mem, src_mem):
        raise _fail(inst.line, f"%{inst.name} (DMACopy) moves data between HBM and SBUF")
    if not dtype is inst.dtype is inst.dst.dtype or shape != inst.dst.shape:
        raise _fail(inst.line, f"%{inst.name} (DMACopy) copies bytes: dtype mismatch or shape mismatch "
                               f"({dtype.value} {list(shape)} -> {inst.dst.dtype.value} {list(inst.dst.shape)})")


def _check_dst(f: Function, inst: Inst, srcs: list[SrcInfo]) -> None:
    if inst.dst is None:
        return
    t = _check_ap(f, inst, inst.dst)
    if t.isInput:
        raise _fail(inst.line, f"%{inst.name} stores into graph input {t.name}")
    if inst.dst.dtype is not inst.dtype:
        raise _fail(inst.line, f"%{inst.name}: dtype mismatch: dtype={inst.dtype.value}, dst is {inst.dst.dtype.value}")
    if inst.kind in _ELEMENTWISE and (t.memory is Memory.HBM or inst.dst.shape != srcs[0][0]):
        raise _fail(inst.line, f"%{inst.name}: an engine writes an SBUF/PSUM tile of its source's shape {list(srcs[0][0])}")


_ELEMENTWISE = frozenset({Kind.ActivationOp, Kind.TensorScalarPtrOp, Kind.TensorCopyOp, Kind.TensorTensorOp})
_KIND_CHECK: Mapping[Kind, Callable[[Function, Inst, list[SrcInfo]], None]] = \
    MappingProxyType({Kind.MatMultOp: _check_matmul, Kind.DMACopy: _check_dma,
                      **{k: (lambda f, i, s: _check_elementwise(i, s)) for k in _ELEMENTWISE}})


def verify(f: Function) -> Function:
    """``f`` if well formed, else :class:`VerifyError` (the first problem, with its line)."""
    for t in f.tensors:
        _check_tensor(t)
    defined: dict[str, Inst] = {}
    for inst in f.insts:
        _check_attrs(inst)
        srcs = _check_operands(f, inst, defined)
        _KIND_CHECK[inst.kind](f, inst, srcs)
        _check_dst(f, inst, srcs)
        defined[inst.name] = inst
    return f


__all__ = ["VerifyError", "verify"]
