"""The mutant tests reuse the lowering suite's simulator and helpers (tests/lowering/lowering_sim.py,
lowering_helpers.py): put that directory on sys.path, as pytest does for the lowering tests themselves."""

from __future__ import annotations

import sys
from pathlib import Path

_LOWERING = str(Path(__file__).resolve().parent.parent / "lowering")
if _LOWERING not in sys.path:
    sys.path.insert(0, _LOWERING)
