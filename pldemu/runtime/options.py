"""Every runtime knob in one frozen dataclass.

The runtime never reads the environment: commands build a ``RuntimeOptions`` from their arguments and
pass it down, so a run is fully described by its program, its communicator and this object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_BACKENDS = ("auto", "shared", "rma")
"""Accepted values of ``RuntimeOptions.windows`` (see ``pldemu.windows.choose_backend``)."""


@dataclass(frozen=True)
class RuntimeOptions:
    """How a program instance runs.

    ``timeout``: seconds one ``pld.system.wait`` may block before the deadlock report is printed and
    ``DeadlockError`` raised. ``windows``: RMA window back end (``auto`` picks ``shared`` when every
    rank is on one node). ``seed``: seed for the randomised knobs to come (jitter, stragglers); it is
    recorded in reports so a run can be repeated. ``poison``: fill data windows, local tensors and fresh
    tiles with poison (NaN for floats, the dtype minimum for signed integers) rather than zero, so reads
    of never-written data stand out. ``stage_pieces``: move every put/get through its stage tile one
    stage-sized piece at a time (one window operation per piece, so a concurrent reader can see a
    partly landed transfer, as on the hardware); off, each transfer is a single window operation.
    """

    timeout: float = 30.0
    windows: str = "auto"
    seed: int = 0
    poison: bool = True
    stage_pieces: bool = False

    def __post_init__(self) -> None:
        t = self.timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"RuntimeOptions.timeout must be a positive number of seconds, got {t!r}")
        if self.windows not in WINDOW_BACKENDS:
            raise ValueError(
                f"RuntimeOptions.windows must be one of {', '.join(WINDOW_BACKENDS)}, got {self.windows!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"RuntimeOptions.seed must be an integer, got {self.seed!r}")
        for name in ("poison", "stage_pieces"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"RuntimeOptions.{name} must be True or False, got {value!r}")


DEFAULT_OPTIONS = RuntimeOptions()
"""The defaults (immutable, so one shared instance is safe as a default argument)."""

__all__ = ["DEFAULT_OPTIONS", "WINDOW_BACKENDS", "RuntimeOptions"]
