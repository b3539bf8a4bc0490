"""What can be known about a run before it starts: the program checked at the job's rank count.

A launcher calls :func:`precheck` after reading and lowering the program and before starting
``mpiexec``, and every rank calls it again before any MPI traffic, so a mistake a static look can see
is one line and exit 2 instead of a job that starts, fails on every rank and aborts. Checked at
``nranks`` ranks (``NR`` bound):

* every buffer shape evaluates to non-negative integers (``fp32[1, -4]``, ``NR - 2`` at one rank,
  ``16 // (NR - NR)``);
* the lowering pinned to the rank count accepts it (a static broadcast root out of range);
* a literal peer of ``notify`` / ``put`` / ``get`` / ``remote_load`` is a rank of the job;
* every region an op accesses (its signature's ``regions``: ``tile.load`` / ``tile.store``, ``put`` /
  ``get`` / ``remote_load``, ``notify`` / ``wait`` cells, ``tensor.read`` / ``write``, the valid shape
  of a view, a load or ``tile.full``) whose offsets and extent are known at ``nranks`` stays inside
  the buffer, view or tile it accesses (a view: the view's own shape);
* a ``for`` with a literal step does not step by 0;
* an atomic put does not add into an fp16 / bf16 window (MPI has no sum for them);
* the straggler rank of ``RuntimeOptions`` is a rank of the job.

Only what is certain is refused: an expression that depends on run-time values is left to the run,
whose own checks report it precisely. MPI-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pldemu.ir import BufferKind, DType, Op, Program, TensorType, format_expr
from pldemu.ir.enums import AtomicType
from pldemu.ir.nodes import (
    Arg,
    Assign,
    Call,
    Const,
    Eval,
    FoldError,
    For,
    ListExpr,
    NotStatic,
    TileType,
    Var,
    evaluate,
)
from pldemu.ir.signatures import SIGNATURES, Region, Signature
from pldemu.ir.walk import stmt_calls, walk_stmts
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    import numpy as np


class PrecheckError(ValueError):
    """The program cannot run at this rank count; the message has one line per problem."""


@dataclass(frozen=True)
class StaticBuffer:
    """A declared buffer at a given rank count: its name, element type and shape."""

    name: str
    element: DType
    shape: tuple[int, ...]
    signal: bool = False

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of its elements (imports numpy: the launcher's checks use :attr:`element`)."""
        return self.element.np


def static_buffers(program: Program, nranks: int) -> dict[str, StaticBuffer]:
    """Every declared buffer at ``nranks`` ranks; :class:`PrecheckError` if a shape does not evaluate
    to non-negative integers (the message names the buffer, the entry and the rank count)."""
    out: dict[str, StaticBuffer] = {}
    for decl in program.buffers:
        t = decl.var.type
        if not isinstance(t, TensorType):
            continue
        name = decl.var.name
        dims = []
        for d in t.shape:
            try:
                value = int(evaluate(d, nranks, integer=True))
            except (NotStatic, FoldError) as err:
                raise PrecheckError(f"buffer {name}: shape entry {format_expr(d)} at NR={nranks}: {err}") from None
            if value < 0:
                raise PrecheckError(f"buffer {name}: shape entry {format_expr(d)} is {value} with NR={nranks}; "
                                    "extents must not be negative")
            dims.append(value)
        out[name] = StaticBuffer(name, t.dtype, tuple(dims), decl.kind is BufferKind.SIGNAL)
    return out


def precheck(program: Program, nranks: int, options: RuntimeOptions | None = None, *,
             source: Program | None = None) -> None:
    """Raise :class:`PrecheckError` listing every certain problem of ``program`` (lowered) at
    ``nranks`` ranks; ``source`` is the program before lowering, which the lowering pinned to the
    rank count must accept. See the module docstring."""
    buffers = static_buffers(program, nranks)
    problems = list(_option_problems(options, nranks))
    problems += _pinned_lowering_problems(source if source is not None else program, nranks)
    if problems:  # a refused collective would be reported again, less clearly, in its lowered form
        raise PrecheckError("\n".join(problems))
    for f in program.functions:
        for s in walk_stmts(f.body.stmts):
            # the user's line, where the statement came from one (a pypto program, a builder file)
            origin = s.origin if isinstance(s, (Assign, Eval)) else None
            at = f" [{origin}]" if origin is not None else ""
            if isinstance(s, For) and isinstance(s.step, Const) and s.step.value == 0:
                problems.append(f"{f.name}: for {s.var.name} in range({format_expr(s.start)}, "
                                f"{format_expr(s.stop)}, 0){at}: the step must not be 0")
            problems += [f"{f.name}: {format_expr(c)}{at}: {why}" for c in stmt_calls(s)
                         for why in _call_problems(c, nranks, buffers)]
    if problems:
        raise PrecheckError("\n".join(dict.fromkeys(problems)))


def _option_problems(options: RuntimeOptions | None, nranks: int) -> Iterator[str]:
    if options is not None and options.straggler is not None and options.straggler[0] >= nranks:
        yield (f"--straggler {options.straggler[0]}:...: the job has {nranks} ranks (0..{nranks - 1}), "
               f"no rank {options.straggler[0]}")


def _pinned_lowering_problems(program: Program, nranks: int) -> list[str]:
    """Collectives whose static arguments the lowering refuses at this rank count (e.g. a root)."""
    if program.nranks is not None:
        return [] if program.nranks == nranks else [
            f"program {program.name} is pinned to nranks={program.nranks}, but the job has {nranks} ranks"]
    from pldemu.lowering import lower_composite_ops

    try:
        lower_composite_ops(dataclasses.replace(program, nranks=nranks))
    except ValueError as err:
        return [f"at {nranks} ranks: {err}"]
    return []


_NO_ATOMIC_ADD = (DType.FP16, DType.BF16)
"""Window dtypes an atomic put cannot add into (no MPI reduction type for them)."""

_PEER_ARG = {Op.NOTIFY: 1, Op.PUT: 1, Op.GET: 1, Op.REMOTE_LOAD: 1}
"""Ops with a destination / source rank, and its argument index."""


def _call_problems(c: Call, nranks: int, buffers: Mapping[str, StaticBuffer]) -> Iterator[str]:
    peer_at = _PEER_ARG.get(c.op)
    if peer_at is not None:
        peer = _literal(c.args[peer_at])
        if peer is not None and not 0 <= peer < nranks:
            yield f"peer {peer} is not a rank of a {nranks}-rank job (0..{nranks - 1})"
    if c.op is Op.PUT and c.attr("atomic") == AtomicType.Add:
        t = getattr(c.args[0], "type", None)
        if isinstance(t, TensorType) and t.dtype in _NO_ATOMIC_ADD:
            yield (f"atomic=Add on a {t.dtype.value} window: the windows' accumulate (MPI_Accumulate) has no "
                   f"{t.dtype.value} sum; use an fp32 or integer window")
    yield from _region_problems(c, nranks, buffers)


def _region_problems(c: Call, nranks: int, buffers: Mapping[str, StaticBuffer]) -> Iterator[str]:
    """Every region of the op's signature (``Signature.regions``) whose values are known at ``nranks``
    ranks and that leaves what it accesses (one problem per region, its first bad dim)."""
    sig = SIGNATURES[c.op]
    for r in sig.regions:
        found = _static_region(c, sig, r, nranks, buffers)
        if found is None:
            continue
        what, container, offsets, extent = found
        for dim, (o, n, size) in enumerate(zip(offsets, extent, container, strict=True)):
            if o < 0 or n < 0 or o + n > size:
                where = (f"valid shape {list(extent)} does not fit in" if r.offsets is None
                         else f"region offsets {list(offsets)} shape {list(extent)} leaves")
                yield f"{where} {what}: dim {dim} covers [{o}, {o + n}) outside [0, {size})"
                break


_Static = tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _static_region(c: Call, sig: Signature, r: Region, nranks: int,
                   buffers: Mapping[str, StaticBuffer]) -> _Static | None:
    """(what is accessed, its shape, offsets, extent) of region ``r`` of call ``c`` when all of it is
    known before the run at ``nranks`` ranks, else None (the run checks it)."""
    arg = {p.name: c.args[i] for i, p in enumerate(sig.params) if i < len(c.args)}
    if any(name not in arg for name in r.params() if name != r.valid):
        return None  # optional operands not given: this region is not accessed
    of = _container(arg[r.of], nranks, buffers)
    if of is None:
        return None
    what, container = of
    offsets = (0,) * len(container) if r.offsets is None else _values(arg[r.offsets], nranks)
    source = arg.get(r.valid) if r.valid is not None and r.valid in arg else (
        None if r.extent is None else arg[r.extent])
    extent = (1,) * len(container) if source is None else _extent(source, nranks)
    if offsets is None or extent is None or len(offsets) != len(container):
        return None
    fitted = Region.fit(extent, len(container))
    return None if fitted is None else (what, container, offsets, fitted)


def _container(a: Arg, nranks: int, buffers: Mapping[str, StaticBuffer]) -> tuple[str, tuple[int, ...]] | None:
    """How a refusal names what a region accesses, and its static shape (None: not known)."""
    if isinstance(a, ListExpr):
        shape = _values(a, nranks)
        return None if shape is None else (f"shape {list(shape)}", shape)
    t = a.type
    name = a.name if isinstance(a, Var) else format_expr(a)
    if isinstance(t, TileType):
        return f"tile {name} {list(t.shape)}", tuple(t.shape)
    if not isinstance(t, TensorType):
        return None
    shape = _values(ListExpr(t.shape), nranks)
    if shape is None:
        return None
    buf = buffers.get(name) if isinstance(a, Var) else None
    kind = "buffer" if buf is not None and buf.shape == shape else "view"
    return f"{kind} {name} {list(shape)}", shape


def _extent(a: Arg, nranks: int) -> tuple[int, ...] | None:
    """A region's extent: a list's values, or a tile's valid region (what a store writes)."""
    if isinstance(a, ListExpr):
        return _values(a, nranks)
    t = a.type
    if not isinstance(t, TileType):
        return None
    return tuple(t.shape) if t.valid_shape is None else _values(ListExpr(t.valid_shape), nranks)


def _values(e: Arg, nranks: int) -> tuple[int, ...] | None:
    """The integers of a list whose entries are known at ``nranks`` ranks (literals, NR arithmetic)."""
    if not isinstance(e, ListExpr):
        return None
    try:
        values = tuple(evaluate(item, nranks, integer=True) for item in e.items)
    except (NotStatic, FoldError):
        return None
    return values if all(isinstance(v, int) for v in values) else None


def _literal(e: object) -> int | None:
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


__all__ = ["PrecheckError", "StaticBuffer", "precheck", "static_buffers"]
