"""The non-collective check kinds of ``pldemu check``, behind one table.

A :class:`CheckKind` is one family of checks that run a lowered tile composite on every rank against
an independent reference (tile: ``sin``, ``cos``, ``select``; MX: ``tquant_mx``): the names
``pldemu check`` accepts for it, its part of the help, its own flags (parsed, forwarded to the job),
its refusal of a bad command line (before any MPI traffic) and its in-job run. ``pldemu check``
reads only :data:`CHECK_KINDS`; a new family is one row here and one module beside it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from pldemu.cli.check_kinds import mx, tile

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.runtime.options import RuntimeOptions


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A kind without flags of its own."""


def _no_argv(args: argparse.Namespace) -> list[str]:
    return []


def _no_refusal(args: argparse.Namespace) -> str | None:
    return None


@dataclass(frozen=True)
class CheckKind:
    """One family of non-collective checks (see the module docstring)."""

    names: tuple[str, ...]
    epilog: str
    run: Callable[[MPI.Intracomm, argparse.Namespace, RuntimeOptions], bool]
    """Run the checks ``args.collective`` selects of this kind (all of them for ``all``, none when it
    names another); rank 0 prints the rows; False on any failure."""
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    argv: Callable[[argparse.Namespace], list[str]] = _no_argv
    refusal: Callable[[argparse.Namespace], str | None] = _no_refusal


CHECK_KINDS: Mapping[str, CheckKind] = MappingProxyType({
    "tile": CheckKind(tile.TILE_CHECKS, tile.EPILOG, tile.run_tile_checks),
    "mx": CheckKind(mx.MX_CHECKS, mx.EPILOG, mx.run_mx_checks, mx.add_mx_arguments, mx.mx_argv, mx.mx_usage_error),
})
"""Every check kind, in the order ``pldemu check all`` runs them (after the collectives)."""

KIND_NAMES: tuple[str, ...] = tuple(name for kind in CHECK_KINDS.values() for name in kind.names)
"""Every name a check kind answers to."""


__all__ = ["CHECK_KINDS", "KIND_NAMES", "CheckKind"]
