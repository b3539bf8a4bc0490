"""``torch.manual_seed`` / ``rand`` / ``randn`` / ``randint`` of the stand-in, as pypto's tests make inputs.

The numbers come from numpy's global generator (``numpy.random``), seeded by ``manual_seed`` (``rand`` /
``randn`` draw one seed from it for a fast float32 ``numpy.random.Generator``): the same seed gives the same
inputs run after run, but not torch's numbers. A test's golden is computed from
the inputs it made, so it does not care which numbers they are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from pldemu.torchlite import dtypes as dt
from pldemu.torchlite.tensor import Tensor, _shape_args


def manual_seed(seed: int) -> None:
    """Seed the generator the stand-in's random factories draw from."""
    np.random.seed(int(seed) % 2**32)


class Generator:
    """``torch.Generator()``: a random stream of its own (numpy's ``RandomState``), seeded by
    :meth:`manual_seed`; factories given ``generator=`` draw from it, not from the global stream."""

    def __init__(self, device: Any = "cpu") -> None:
        self._state = np.random.RandomState()
        self.device = device

    def manual_seed(self, seed: int) -> Generator:
        """Re-seed the stream; returns the generator itself, as torch's does."""
        self._state.seed(int(seed) % 2**32)
        return self

    def seed(self) -> int:
        """A fresh nondeterministic seed, set and returned."""
        value = int(np.random.SeedSequence().entropy % 2**32)  # type: ignore[operator]
        self._state.seed(value)
        return value


def _stream(generator: Generator | None) -> Any:
    return np.random if generator is None else generator._state


def randperm(n: int, *, generator: Generator | None = None, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 by default), from ``generator`` or the global stream."""
    if int(n) < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    return Tensor(_stream(generator).permutation(int(n)).astype((dtype or dt.DEFAULT_INT).numpy))


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, **_: Any) -> Iterator[None]:
    """``torch.random.fork_rng()``: the global stream's state is restored when the block ends, so draws
    inside it do not change what the program draws after it."""
    if not enabled:
        yield
        return
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def _fast(stream: Any) -> np.random.Generator:
    """A one-draw numpy ``Generator`` seeded from ``stream``: its ziggurat normals and float32 draws are
    several times faster than the legacy stream's float64 ones (model-scale inputs are billions of
    elements), and the seed still comes from ``manual_seed``'s stream, so inputs stay reproducible."""
    return np.random.default_rng(int(stream.randint(0, 2**63 - 1, dtype=np.int64)))


def _draw(stream: Any, size: tuple[int, ...], dtype: dt.dtype | None, normal: bool) -> Tensor:
    """``size`` uniform [0, 1) or standard normal numbers, drawn in float32 (float64 when asked for)."""
    want = (dtype or dt.DEFAULT_FLOAT).numpy
    wide = np.float64 if want == np.float64 else np.float32
    gen = _fast(stream)
    values = gen.standard_normal(size, dtype=wide) if normal else gen.random(size, dtype=wide)
    return Tensor(values.astype(want, copy=False))


def rand(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """Uniform on [0, 1); float32 by default."""
    return _draw(_stream(_.get("generator")), _shape_args(size), dtype, normal=False)


def randn(*size: Any, dtype: dt.dtype | None = None, **_: Any) -> Tensor:
    """Standard normal; float32 by default."""
    return _draw(_stream(_.get("generator")), _shape_args(size), dtype, normal=True)


def randint(low: int, high: int | None = None, size: Any = (), *, dtype: dt.dtype | None = None,
            **_: Any) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high); int64 by default."""
    if high is None or isinstance(high, (tuple, list)):
        low, high, size = 0, low, high if high is not None else size
    values = _stream(_.get("generator")).randint(int(low), int(high), size=_shape_args((size,)))
    return Tensor(values.astype((dtype or dt.DEFAULT_INT).numpy))


__all__ = ["Generator", "fork_rng", "manual_seed", "rand", "randint", "randn", "randperm"]
