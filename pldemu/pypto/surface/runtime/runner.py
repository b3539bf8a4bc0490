"""``pypto.runtime.runner``: single-device execution (not used by distributed programs)."""

from __future__ import annotations

from typing import Any


def execute_compiled(*args: Any, **kwargs: Any) -> Any:
    """pypto's single-device runner: out of scope (distributed programs run through distributed_runner)."""
    raise NotImplementedError("single-device pypto execution is out of scope for pldemu's pypto layer")


__all__ = ["execute_compiled"]
