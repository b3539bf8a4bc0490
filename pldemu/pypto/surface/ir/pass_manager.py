"""``pypto.ir.pass_manager``: the optimisation strategy (a compiler option pldemu accepts without effect)."""

from __future__ import annotations

import enum


class OptimizationStrategy(enum.Enum):
    """pypto's pass-pipeline strategies."""

    Default = "Default"


__all__ = ["OptimizationStrategy"]
