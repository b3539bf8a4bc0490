"""``pypto.runtime.device_runner``: only ``compile_and_assemble``, the step of pypto's test harness that
turns a build folder into a callable (pldemu's: the program it compiled there). The rest of the module is
simpler's device boundary (ChipCallable, execute_on_device, ...), out of scope."""

from __future__ import annotations

from pldemu.pypto.harness_build import compile_and_assemble

__all__ = ["compile_and_assemble"]
