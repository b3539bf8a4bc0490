"""``pypto.backend``: the code-generation backends pypto selects by platform (named, never used here)."""

from __future__ import annotations

import enum


class BackendType(enum.Enum):
    """pypto's ``BackendType``: Ascend 910B (``a2a3`` / ``a2a3sim``) and Ascend 950 (``a5`` / ``a5sim``)."""

    Ascend910B = "Ascend910B"
    Ascend950 = "Ascend950"


def backend_for(platform: str) -> BackendType:
    """The backend pypto's ``RunConfig`` derives from a platform."""
    return BackendType.Ascend950 if platform.startswith("a5") else BackendType.Ascend910B


def set_backend_type(backend_type: BackendType) -> None:
    """pypto's process-wide backend choice: checked, without effect here (pldemu computes what both devices
    compute; a program's platform still comes from its ``RunConfig``)."""
    if not isinstance(backend_type, BackendType):
        raise TypeError(f"set_backend_type: backend_type must be a pypto.backend.BackendType, got {backend_type!r}")


def reset_for_testing() -> None:
    """pypto's reset of its process-wide backend choice between tests: nothing to reset here."""


__all__ = ["BackendType", "backend_for", "reset_for_testing", "set_backend_type"]
