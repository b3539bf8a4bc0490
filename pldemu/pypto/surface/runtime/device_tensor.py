"""``pypto.runtime.device_tensor``: the handles of worker-resident tensors (:mod:`pldemu.pypto.device_tensors`)."""

from pldemu.pypto.device_tensors import DeviceTensor, StackedDeviceTensor

__all__ = ["DeviceTensor", "StackedDeviceTensor"]
