"""The argument helpers the ``pldemu`` subcommands share (value parsers are :mod:`pldemu.job.argtypes`).

The flags that describe one collective call, shared by ``lower``, ``check`` and ``stress``: one definition of ``--mode``, ``--dtype``, ``--size``, ``--shape``, ``--valid-shape``, ``--reduce``,
``--root`` and ``--max-recv`` (how they parse and what they mean), and of which collective each applies
to, so that every command accepts the same call and refuses a flag that does not apply with the same
message.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

from pldemu.harness.plan import CallRequest
from pldemu.ir import DType
from pldemu.ir.enums import AllreduceMode, ReduceOp
from pldemu.job.argtypes import dims, format_dims, nonneg_int, positive_int
from pldemu.lowering.backend import BACKENDS, Backend

REDUCES: MappingProxyType[str, ReduceOp] = MappingProxyType({op.name.lower(): op for op in ReduceOp})
"""``--reduce`` spellings."""

APPLIES_TO: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    "mode": ("allreduce",),
    "reduce": ("allreduce", "reduce_scatter"),
    "root": ("broadcast",),
    "max_recv": ("all_to_all_v",),
    "shape": ("allreduce", "broadcast"),
    "valid_shape": ("allreduce",),
})
"""The collectives each call flag (by its argparse dest) applies to."""

FLAGS: tuple[str, ...] = ("mode", "size", "shape", "valid_shape", "reduce", "root", "max_recv")
"""Every call flag's argparse dest (``--dtype`` has a default, so it is not among them)."""


def flag(dest: str) -> str:
    """``max_recv`` -> ``--max-recv``."""
    return "--" + dest.replace("_", "-")


def add_collective_arguments(
    parser: argparse.ArgumentParser,
    *,
    default_size: int,
    dtypes: Sequence[str] = ("fp16", "fp32"),
    shapes: bool = True,
    root_type: Callable[[str], object] | None = None,
    root_help: str = "broadcast root (default 0)",
    dtype_default: str | None = "fp32",
    dtype_action: type[argparse.Action] | None = None,
) -> None:
    """Add the call flags; every one defaults to None ("the collective's default") except ``--dtype``
    (``dtype_default``: None lets a command tell an explicit ``--dtype fp32`` from no flag).

    ``dtype_action`` (check: bf16 only for tquant_mx) is the argparse action storing ``--dtype``.
    ``shapes=False`` leaves out ``--shape``/``--valid-shape``; ``root_type`` replaces the parser of
    ``--root`` (``check`` also takes ``all``)."""
    parser.add_argument("--mode", choices=[m.name for m in AllreduceMode], default=None,
                        help="allreduce algorithm (default mesh)")
    extra = {"action": dtype_action} if dtype_action is not None else {}
    parser.add_argument("--dtype", choices=list(dtypes), default=dtype_default, help="element type (default fp32)",
                        **extra)  # type: ignore[arg-type]
    geometry = parser.add_mutually_exclusive_group() if shapes else parser
    geometry.add_argument("--size", type=positive_int, default=None,
                          help=f"elements per row, SIZE (default {default_size})")
    if shapes:
        geometry.add_argument("--shape", type=dims, default=None, metavar="RxC",
                              help="allreduce/broadcast target shape instead of [1, SIZE]")
        parser.add_argument("--valid-shape", type=dims, default=None, metavar="RxC",
                            help="allreduce partial-valid target: mesh reduces the top-left rectangle, ring the "
                                 "flattened prefix of that many elements")
    parser.add_argument("--reduce", choices=list(REDUCES), default=None,
                        help="ReduceOp of allreduce/reduce_scatter (default sum)")
    parser.add_argument("--root", type=root_type or nonneg_int, default=None,
                        metavar="R|all" if root_type is not None else "R", help=root_help)
    parser.add_argument("--max-recv", type=positive_int, default=None, metavar="M",
                        help="all_to_all_v MAX_RECV rows per sender (default 4)")


def given(args: argparse.Namespace) -> list[str]:
    """The call flags (dests) the command line set."""
    return [dest for dest in FLAGS if getattr(args, dest, None) is not None]


def collective_argv(args: argparse.Namespace) -> list[str]:
    """The call flags the command line set (not ``--dtype``), spelled again for a spawned job."""
    argv: list[str] = []
    for dest in given(args):
        value = getattr(args, dest)
        argv += [flag(dest), format_dims(value) if dest in ("shape", "valid_shape") else str(value)]
    return argv


def call_request(args: argparse.Namespace) -> CallRequest:
    """The collective call the parsed call flags describe (a flag a command lacks is its default)."""
    def get(dest: str) -> Any:
        return getattr(args, dest, None)

    return CallRequest(args.collective, DType.parse(get("dtype") or "fp32"), get("mode"), get("size"), get("shape"),
                       get("valid_shape"), REDUCES[get("reduce") or "sum"], get("root"), get("max_recv"))


def check_applies(name: str, args: argparse.Namespace) -> None:
    """Raise ValueError naming the first flag given that does not apply to collective ``name``."""
    for dest, allowed in APPLIES_TO.items():
        if getattr(args, dest, None) is not None and name not in allowed:
            raise ValueError(f"{flag(dest)} applies to {' and '.join(allowed)}, not {name}")


# ``--backend``: the one definition (pldemu lower, pldemu check sin|cos|select).
def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """``--backend a2a3|a5|none``: the target planning tile.select's scratch (default none)."""
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="none",
                        help="target of the tile.select lowering: a2a3 (Ascend910B), a5 (Ascend950) or "
                             "none (standalone: A5 scratch geometry, no dtype gates); default none")


def backend_of(args: argparse.Namespace) -> Backend:
    """The Backend the parsed ``--backend`` names."""
    return BACKENDS[getattr(args, "backend", "none")]


__all__ = [
    "APPLIES_TO",
    "FLAGS",
    "REDUCES",
    "add_backend_argument",
    "add_collective_arguments",
    "backend_of",
    "call_request",
    "check_applies",
    "collective_argv",
    "flag",
    "given",
]
