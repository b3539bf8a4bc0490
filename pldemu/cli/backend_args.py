"""The one definition of ``--backend`` (pldemu lower, pldemu check sin|cos|select)."""

from __future__ import annotations

import argparse

from pldemu.lowering.backend import BACKENDS, Backend


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """``--backend a2a3|a5|none``: the target planning tile.select's scratch (default none)."""
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="none",
                        help="target of the tile.select lowering: a2a3 (Ascend910B), a5 (Ascend950) or "
                             "none (standalone: A5 scratch geometry, no dtype gates); default none")


def backend_of(args: argparse.Namespace) -> Backend:
    """The Backend the parsed ``--backend`` names."""
    return BACKENDS[getattr(args, "backend", "none")]


__all__ = ["add_backend_argument", "backend_of"]
