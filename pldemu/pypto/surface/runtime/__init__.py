"""``pypto.runtime``: the execution edges pypto's conftest patches, and the names tests import."""

from __future__ import annotations

from pldemu.pypto.prepared import RegistrationHandle
from pldemu.pypto.surface.runtime.build import compile_program
from pldemu.pypto.surface.runtime.device_tensor import DeviceTensor, StackedDeviceTensor
from pldemu.pypto.surface.runtime.distributed_runner import DistributedRunHandle, DistributedWorker
from pldemu.pypto.surface.runtime.runner import PLATFORMS, RING_DEPTH, RING_RULES, RunConfig, execute_compiled

__all__ = ["PLATFORMS", "RING_DEPTH", "RING_RULES", "DeviceTensor", "DistributedRunHandle", "DistributedWorker",
           "RegistrationHandle", "RunConfig", "StackedDeviceTensor", "compile_program", "execute_compiled"]
