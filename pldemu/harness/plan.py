"""Which collective calls a check or a stress run makes: the cases one request expands to, each built
and lowered once before any rank starts (``pldemu check`` and ``pldemu stress COLLECTIVE`` share it).

No MPI: the launcher plans, and every rank of the job plans again from the same arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveProgram, CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType, ReduceOp
from pldemu.job.argtypes import format_dims
from pldemu.job.exits import UsageError


@dataclass(frozen=True)
class CallRequest:
    """One collective call as the command line gives it, parsed; None: the collective's default.
    ``collective`` may be ``all``; ``root`` may be ``all`` (every root in turn)."""

    collective: str
    dtype: DType = DType.FP32
    mode: str | None = None
    size: int | None = None
    shape: tuple[int, ...] | None = None
    valid_shape: tuple[int, ...] | None = None
    reduce: ReduceOp = ReduceOp.Sum
    root: int | str | None = None
    max_recv: int | None = None


@dataclass(frozen=True)
class Planned:
    """One case of the plan: the spec's keyword arguments (``pldemu.collectives.CollectiveSpec``)."""

    fields: tuple[tuple[str, Any], ...]

    def kwargs(self) -> dict[str, Any]:
        """The CollectiveSpec keyword arguments."""
        return dict(self.fields)


def plan_calls(req: CallRequest, nranks: int, default_size: int) -> list[Planned]:
    """The cases ``req`` asks for on ``nranks`` ranks (``all``: every collective, allreduce in both
    modes, broadcast from its root); raises UsageError on a bad combination. Whether each given flag
    applies to the collective is the command's check (``pldemu.cli.args.check_applies``)."""
    name = req.collective
    names = list(COLLECTIVE_NAMES) if name == "all" else [name]
    single = name != "all"
    if isinstance(req.root, int) and req.root >= nranks:
        raise UsageError(f"--root {req.root} is not a rank of {nranks} (ranks are 0..{nranks - 1})")

    shape = req.shape
    if shape is not None and len(shape) != 2:
        raise UsageError(f"--shape must be RxC (2-D), got {format_dims(shape)}")
    size = req.size if req.size is not None else (shape[-1] if shape is not None else default_size)
    valid = req.valid_shape
    if valid is not None:
        base = shape if shape is not None else (1, size)
        if len(valid) != len(base) or any(v > b for v, b in zip(valid, base, strict=True)):
            raise UsageError(
                f"--valid-shape {format_dims(valid)} must fit the target shape {format_dims(base)}"
            )
    reduce = req.reduce

    out: list[Planned] = []
    for n in names:
        common: dict[str, Any] = {"name": n, "dtype": req.dtype, "size": size, "nranks": nranks}
        if n == "allreduce":
            modes = [req.mode] if req.mode else (["mesh", "ring"] if not single else ["mesh"])
            for mode in modes:
                out.append(
                    _planned(common, mode=AllreduceMode[mode], reduce=reduce, shape=shape, valid_shape=valid)
                )
        elif n == "reduce_scatter":
            out.append(_planned(common, reduce=reduce))
        elif n == "broadcast":
            roots = range(nranks) if req.root == "all" else [req.root or 0]
            for root in roots:
                out.append(_planned(common, root=root, shape=shape if single else None))
        elif n == "all_to_all_v":
            out.append(_planned(common, max_recv=req.max_recv))
        else:
            out.append(_planned(common))
    return out


def _planned(common: dict[str, Any], **extra: Any) -> Planned:
    fields = {**common, **{k: v for k, v in extra.items() if v is not None}}
    return Planned(tuple(fields.items()))


def build(planned: Planned) -> CollectiveProgram:
    """The CollectiveProgram of one planned case (``pldemu.collectives``)."""
    return collective_program(CollectiveSpec(**planned.kwargs()))


def validate_cases(cases: list[Planned], nranks: int) -> list[Planned]:
    """Build and lower every case once, so contract violations surface as usage errors (and the check
    data must be exact at ``nranks``); returns ``cases``."""
    from pldemu.harness.data import max_exact_ranks
    from pldemu.lowering import lower_composite_ops

    for p in cases:
        kw = p.kwargs()
        try:
            cp = build(p)
            lower_composite_ops(cp.program)
        except (ValueError, TypeError) as err:
            raise UsageError(f"{kw['name']}: {err}") from None
        op = kw.get("reduce") if kw["name"] in ("allreduce", "reduce_scatter") else None
        limit = max_exact_ranks(op, kw["dtype"].np)
        if limit is not None and nranks > limit:
            raise UsageError(f"{kw['name']}: the check data is exact for at most {limit} ranks, not {nranks}")
    return cases


__all__ = ["CallRequest", "Planned", "build", "plan_calls", "validate_cases"]
