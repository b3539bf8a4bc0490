"""Handles to tensors resident on a prepared worker's devices (pypto's ``pypto.runtime.device_tensor``).

A :class:`DeviceTensor` names memory that lives in the resident job's rank of its worker (pldemu's
stand-in for a device allocation: ``data_ptr`` is an opaque positive handle, not an address). A
:class:`StackedDeviceTensor` is ``[B, *tail]`` split along its leading dim, shard ``i`` resident on worker
``worker_ids[i]``. Both are checked as pypto checks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, init=False)
class DeviceTensor:
    """A buffer resident on one worker (made by ``DistributedWorker.alloc_tensor``)."""

    data_ptr: int
    shape: tuple[int, ...]
    dtype: Any
    buffer: Any = None

    def __init__(self, data_ptr: int, shape: Sequence[int], dtype: Any, *, buffer: Any = None) -> None:
        if isinstance(data_ptr, bool) or not isinstance(data_ptr, int) or data_ptr <= 0:
            raise ValueError(f"DeviceTensor.data_ptr must be a positive int, got {data_ptr!r}")
        dims = tuple(shape)
        if any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            raise TypeError(f"DeviceTensor.shape must contain ints, got {dims!r}")
        if not dims:
            raise ValueError("DeviceTensor.shape must be non-empty")
        if any(d <= 0 for d in dims):
            raise ValueError(f"DeviceTensor.shape must be all positive, got {dims}")
        object.__setattr__(self, "data_ptr", data_ptr)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "buffer", buffer)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor holds."""
        from pldemu.pypto.execute import np_dtype

        n = np_dtype(self.dtype).itemsize
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"DeviceTensor(data_ptr=0x{self.data_ptr:x}, shape={self.shape}, dtype={self.dtype})"


@dataclass(frozen=True, init=False)
class StackedDeviceTensor:
    """``[B, *tail]`` as ``B`` resident shards: ``shards[i]`` on worker ``worker_ids[i]``, which must be the
    device the program dispatches ``x[i]`` to."""

    shards: tuple[DeviceTensor, ...]
    full_shape: tuple[int, ...]
    worker_ids: tuple[int, ...]

    def __init__(self, shards: Sequence[DeviceTensor], full_shape: Sequence[int], worker_ids: Sequence[int]) -> None:
        shards_t, full, workers = tuple(shards), tuple(full_shape), tuple(worker_ids)
        if len(full) < 2:
            raise ValueError(f"StackedDeviceTensor.full_shape must have rank >= 2, got {full}")
        if full[0] < 1:
            raise ValueError(f"StackedDeviceTensor needs at least one shard in the leading dim, got full_shape {full}")
        if len(shards_t) != full[0]:
            raise ValueError(f"StackedDeviceTensor expects {full[0]} shards (leading dim of {full}); got "
                             f"{len(shards_t)}")
        if len(workers) != full[0]:
            raise ValueError(f"StackedDeviceTensor expects {full[0]} worker_ids (one per shard); got {len(workers)}")
        if len(set(workers)) != len(workers):
            raise ValueError(f"StackedDeviceTensor.worker_ids must be distinct, got {workers}")
        for i, shard in enumerate(shards_t):
            if not isinstance(shard, DeviceTensor):
                raise TypeError(f"shard {i} must be a DeviceTensor, got {type(shard).__name__}")
            if shard.shape != full[1:]:
                raise ValueError(f"shard {i} has shape {shard.shape}; expected per-shard shape {full[1:]} "
                                 f"(leading dim dropped from {full})")
            if shard.dtype != shards_t[0].dtype:
                raise ValueError(f"shard {i} dtype {shard.dtype} differs from shard 0 dtype {shards_t[0].dtype}")
        object.__setattr__(self, "shards", shards_t)
        object.__setattr__(self, "full_shape", full)
        object.__setattr__(self, "worker_ids", workers)

    @property
    def dtype(self) -> Any:
        """The shards' element type."""
        return self.shards[0].dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """``full_shape``."""
        return self.full_shape

    def __getitem__(self, idx: Any) -> DeviceTensor:
        """Shard ``i`` for ``x[i]``, ``x[i, ...]`` or ``x[i, <whole-dim slices>]``."""
        rank, rest = (idx[0], idx[1:]) if isinstance(idx, tuple) and idx else (idx, ())
        if isinstance(idx, tuple) and not idx:
            raise IndexError("StackedDeviceTensor requires a leading-dim index")
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise TypeError(f"StackedDeviceTensor leading index must be int, got {type(rank).__name__}")
        if not 0 <= rank < len(self.shards):
            raise IndexError(f"shard index {rank} out of range [0, {len(self.shards)})")
        tail = self.full_shape[1:]
        if any(s is Ellipsis for s in rest):
            rest = tuple(s for s in rest if s is not Ellipsis)
            rest += (slice(None),) * (len(tail) - len(rest))
        for axis, s in enumerate(rest):
            whole = isinstance(s, slice) and s.step in (None, 1) and (s.start or 0) == 0 and s.stop in (None, tail[axis])
            if not whole:
                raise IndexError(f"StackedDeviceTensor supports only whole-shard slicing; axis {axis + 1} got {s!r}")
        return self.shards[rank]


__all__ = ["DeviceTensor", "StackedDeviceTensor"]
