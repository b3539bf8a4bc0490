"""The program factory every tool uses: one call of one collective, with its buffers, as a Program.

``collective_program(CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=17))`` builds (does
not lower) a program whose ``main`` makes one call. Shapes use the symbol NR unless the spec pins
``nranks``, so one program runs on any rank count.

Buffer names are the roles: ``target``, ``signal``, ``local_data``, ``input``, ``send_counts``,
``recv_counts`` (recv_counts is declared as an INT32 ``signal`` buffer: it is only ever changed
by atomic notifies, and starts at zero).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pldemu.ir.builder import ProgramBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import AllreduceMode, ReduceOp
from pldemu.ir.nodes import NR, BinOpKind, Expr, Program, Var, binop

NAMES_BY_ROLE = ("target", "signal", "local_data", "input", "send_counts", "recv_counts")


@dataclass(frozen=True)
class CollectiveSpec:
    """What to build. Structural mistakes raise ValueError here; protocol contracts (dtypes, stage
    widths, root range) are checked when the program is lowered (``LoweringError``)."""

    name: str
    """allreduce, allgather, reduce_scatter, broadcast, barrier, all_to_all or all_to_all_v."""
    mode: AllreduceMode = AllreduceMode.mesh
    dtype: DType = DType.FP32
    size: int = 1024
    """SIZE: elements per row."""
    shape: tuple[int, ...] | None = None
    """Target shape override (allreduce, broadcast); default [1, SIZE]."""
    valid_shape: tuple[int, ...] | None = None
    """Partial-valid target (allreduce)."""
    reduce: ReduceOp = ReduceOp.Sum
    root: int = 0
    max_recv: int = 4
    """all_to_all_v rows per sender (MAX_RECV)."""
    nranks: int | None = None
    """Pins NR in the program (``pldemu lower --ranks``)."""

    def __post_init__(self) -> None:
        if self.name not in _BUILDERS:
            raise ValueError(f"unknown collective {self.name!r}; expected one of {', '.join(COLLECTIVE_NAMES)}")
        for field, kind in (("mode", AllreduceMode), ("dtype", DType), ("reduce", ReduceOp)):
            if not isinstance(getattr(self, field), kind):
                raise ValueError(f"{field} must be a {kind.__name__}, got {getattr(self, field)!r}")
        for field in ("size", "root", "max_recv"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{field} must be an integer, got {value!r}")
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")
        if self.max_recv < 1:
            raise ValueError(f"max_recv must be >= 1, got {self.max_recv}")
        if self.nranks is not None and (not isinstance(self.nranks, int) or self.nranks < 1):
            raise ValueError(f"nranks must be >= 1 (or None), got {self.nranks!r}")
        if self.shape is not None:
            if self.name not in ("allreduce", "broadcast"):
                raise ValueError(f"shape applies to allreduce and broadcast, not {self.name}")
            if not self.shape or any(not isinstance(d, int) or d < 1 for d in self.shape):
                raise ValueError(f"shape must be a non-empty tuple of positive integers, got {self.shape!r}")
        if self.valid_shape is not None:
            if self.name != "allreduce":
                raise ValueError(f"valid_shape applies to allreduce only, not {self.name}")
            base = self.target_shape
            if len(self.valid_shape) != len(base) or any(
                    not isinstance(v, int) or v < 1 or v > d for v, d in zip(self.valid_shape, base, strict=True)):
                raise ValueError(f"valid_shape {self.valid_shape!r} must have positive extents within the "
                                 f"target shape {base!r}")

    @property
    def target_shape(self) -> tuple[int, ...]:
        """The allreduce / broadcast target shape: ``shape`` or [1, SIZE]."""
        return self.shape if self.shape is not None else (1, self.size)


@dataclass(frozen=True)
class CollectiveProgram:
    """A built (NOT lowered) program plus the name of the buffer playing each role."""

    spec: CollectiveSpec
    program: Program
    target: str | None
    """The target window; None for barrier, which has only a signal."""
    signal: str
    local_data: str | None = None
    input: str | None = None
    send_counts: str | None = None
    recv_counts: str | None = None


def collective_program(spec: CollectiveSpec) -> CollectiveProgram:
    """Build the program of ``spec``: its buffers and ``func main`` with one call of the collective."""
    return _BUILDERS[spec.name](spec)


# ----------------------------------------------------------------------------------------------
# One builder per collective
# ----------------------------------------------------------------------------------------------


def _nr(spec: CollectiveSpec) -> Expr:
    """NR as used in buffer shapes: always the symbol, so the program text does not change with the
    rank count; a pinned count only fixes the value NR takes."""
    return NR


def _times_nr(spec: CollectiveSpec, k: int) -> Expr:
    return binop(BinOpKind.MUL, k, _nr(spec))


def _signal(pb: ProgramBuilder, spec: CollectiveSpec) -> Var:
    """The collective's signal buffer: one barrier cell per peer, ``[NR, 1]``."""
    return pb.signal("signal", [_nr(spec), 1])


def _rows_target(pb: ProgramBuilder, spec: CollectiveSpec) -> Var:
    """A target of one ``[1, SIZE]`` row per rank, ``[NR, SIZE]``."""
    return pb.window("target", spec.dtype, [_nr(spec), spec.size])


def _name(spec: CollectiveSpec) -> str:
    return spec.name + ("_ring" if spec.name == "allreduce" and spec.mode is AllreduceMode.ring else "")


def _allreduce(spec: CollectiveSpec) -> CollectiveProgram:
    pb = ProgramBuilder(_name(spec), spec.nranks)
    target = pb.window("target", spec.dtype, list(spec.target_shape), spec.valid_shape)
    if spec.mode is AllreduceMode.ring:
        nr = _nr(spec)
        sig = pb.signal("signal", [binop(BinOpKind.MUL, 2, binop(BinOpKind.SUB, nr, 1)), nr])
    else:
        sig = _signal(pb, spec)
    fb = pb.function("main")
    fb.pld.tensor.allreduce(target, sig, op=spec.reduce, mode=spec.mode)
    return CollectiveProgram(spec, pb.build(), "target", "signal")


def _source_to_rows(spec: CollectiveSpec, role: str, rows: Expr | int,
                    emit: Callable[[Any, Var, Var, Var], object]) -> Program:
    """The program of a collective that sends a local source buffer ``role`` of ``rows`` rows into a
    ``[NR, SIZE]`` target: ``emit(pld.tensor, source, target, signal)`` writes the one call."""
    pb = ProgramBuilder(_name(spec), spec.nranks)
    src = pb.local(role, spec.dtype, [rows, spec.size])
    emit(pb.function("main").pld.tensor, src, _rows_target(pb, spec), _signal(pb, spec))
    return pb.build()


def _allgather(spec: CollectiveSpec) -> CollectiveProgram:
    program = _source_to_rows(spec, "local_data", 1, lambda tensor, src, target, sig: tensor.allgather(src, target, sig))
    return CollectiveProgram(spec, program, "target", "signal", local_data="local_data")


def _reduce_scatter(spec: CollectiveSpec) -> CollectiveProgram:
    pb = ProgramBuilder(_name(spec), spec.nranks)
    target = _rows_target(pb, spec)
    sig = _signal(pb, spec)
    pb.function("main").pld.tensor.reduce_scatter(target, sig, op=spec.reduce)
    return CollectiveProgram(spec, pb.build(), "target", "signal")


def _broadcast(spec: CollectiveSpec) -> CollectiveProgram:
    pb = ProgramBuilder(_name(spec), spec.nranks)
    target = pb.window("target", spec.dtype, list(spec.target_shape))
    sig = _signal(pb, spec)
    pb.function("main").pld.tensor.broadcast(target, sig, root=spec.root)
    return CollectiveProgram(spec, pb.build(), "target", "signal")


def _barrier(spec: CollectiveSpec) -> CollectiveProgram:
    pb = ProgramBuilder(_name(spec), spec.nranks)
    sig = _signal(pb, spec)
    pb.function("main").pld.tensor.barrier(sig)
    return CollectiveProgram(spec, pb.build(), None, "signal")


def _all_to_all(spec: CollectiveSpec) -> CollectiveProgram:
    program = _source_to_rows(spec, "input", _nr(spec), lambda tensor, src, target, sig: tensor.all_to_all(src, target, sig))
    return CollectiveProgram(spec, program, "target", "signal", input="input")


def _all_to_all_v(spec: CollectiveSpec) -> CollectiveProgram:
    pb = ProgramBuilder(_name(spec), spec.nranks)
    rows = _times_nr(spec, spec.max_recv)
    src = pb.local("input", spec.dtype, [rows, spec.size])
    target = pb.window("target", spec.dtype, [rows, spec.size])
    sig = _signal(pb, spec)
    send = pb.local("send_counts", DType.INT32, [_nr(spec)])
    recv = pb.signal("recv_counts", [_nr(spec), 1])
    pb.function("main").pld.tensor.all_to_all_v(src, target, sig, send, recv)
    return CollectiveProgram(spec, pb.build(), "target", "signal", input="input", send_counts="send_counts",
                             recv_counts="recv_counts")


_BUILDERS: MappingProxyType[str, Callable[[CollectiveSpec], CollectiveProgram]] = MappingProxyType(
    {
        "allreduce": _allreduce,
        "allgather": _allgather,
        "reduce_scatter": _reduce_scatter,
        "broadcast": _broadcast,
        "barrier": _barrier,
        "all_to_all": _all_to_all,
        "all_to_all_v": _all_to_all_v,
    }
)

COLLECTIVE_NAMES: tuple[str, ...] = tuple(_BUILDERS)
"""Every collective name a CollectiveSpec accepts, in protocol order."""

__all__ = ["COLLECTIVE_NAMES", "NAMES_BY_ROLE", "CollectiveProgram", "CollectiveSpec", "collective_program"]
