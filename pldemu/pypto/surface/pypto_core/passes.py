"""``pypto.pypto_core.passes``: the memory planner choice (a compiler option pldemu accepts without effect)."""

from __future__ import annotations

import enum


class MemoryPlanner(enum.Enum):
    """Who plans on-chip buffer memory in pypto's compiler."""

    PYPTO = "PYPTO"
    DSA_RP = "DSA_RP"
    PTOAS = "PTOAS"


__all__ = ["MemoryPlanner"]
