"""``pypto.runtime``: the execution edges pypto's conftest patches, and the names tests import."""

from __future__ import annotations

import dataclasses

from pldemu.pypto.surface.runtime.distributed_runner import DistributedWorker


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Accepted for imports; pldemu's run options come from ``pldemu.pypto.session``."""

    platform: str = "a2a3sim"


__all__ = ["DistributedWorker", "RunConfig"]
