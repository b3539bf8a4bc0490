"""Input data for the checking harness: per-rank, per-position, per-iteration, and exact.

Two properties make the oracle cheap and the comparison exact:

* **Recomputable.** Every value is a pure function of ``(seed, rank, iteration, flat position)``
  (a 64-bit integer mix, no generator state), so any rank can compute any other rank's input for
  any iteration without communicating.  The all_to_all_v send counts come from a NumPy generator
  seeded with ``(seed, sender, iteration)``, which is just as recomputable.
* **Exact in every order.** The values are chosen per :class:`~pldemu.ir.ReduceOp` so that every
  partial result of a reduction over up to :func:`max_exact_ranks` ranks is exactly representable in
  FP16 (and hence FP32).  Then the reduction is the same bit pattern whatever order the mesh pull,
  the ring's rotating segments or MPI's own algorithm use, and results can be compared with ``==``:

  ======  ===========================================  ==============================================
  op      values                                       why exact
  ======  ===========================================  ==============================================
  Sum     halves ``k/2``, ``|k| <= 15``                every partial sum is a multiple of 1/2 with
                                                       magnitude <= 7.5 * NR < 1024, where the FP16
                                                       spacing is <= 1/2
  Max     halves in ``[-512, 512)``                    max/min never round; the spacing is <= 1/4
  Min     (same)                                       below 512
  Prod    ``+-1``, ``+-2``, ``+-1/2``; ranks >= 15     every partial product is +-2**k, |k| <= 14,
          contribute only ``+-1``                      inside FP16's normal range [2**-14, 2**15]
  data    halves in ``[-512, 512)``                    moved, never combined (allgather, broadcast,
                                                       all_to_all[_v])
  ======  ===========================================  ==============================================

  Zero is never produced for Prod (it would absorb the whole product and hide wrong operands) and
  negative zero is never produced at all, so signed-zero order effects cannot arise.

Values vary with position, rank *and* iteration, so a stale result of an earlier call, a row from the
wrong peer or an untouched poison value never matches by accident (except at isolated positions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from pldemu.ir import ReduceOp

# 64-bit odd multipliers (from splitmix64 / golden ratio); any odd constants with good bit mixing do.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_SHIFT1, _SHIFT2, _SHIFT3 = np.uint64(30), np.uint64(27), np.uint64(31)
_RANK_KEY = 0xD6E8FEB86659FD93
_ITER_KEY = 0xA0761D6478BD642F
_SEED_KEY = 0xE7037ED1A0B428DB
_MASK64 = (1 << 64) - 1

PROD_SCALING_RANKS = 15
"""Ranks ``>= PROD_SCALING_RANKS`` contribute only +-1 to a product, which bounds every partial
product's exponent by 14 and keeps it inside FP16's normal range for any number of ranks."""

SUM_MAX_MAGNITUDE = 7.5
"""Largest ``|value|`` of Sum data; partial sums stay below ``SUM_MAX_MAGNITUDE * nranks``."""

DATA_MAX_HALVES = 1024
"""Max/Min/data values are ``k/2`` with ``-DATA_MAX_HALVES <= k < DATA_MAX_HALVES``."""

SEND_COUNT_LOW = -1
"""Smallest all_to_all_v send count drawn: negative counts clamp to 0 like zero ones."""

SEND_COUNT_EXTRA = 2
"""Send counts are drawn up to ``max_recv + SEND_COUNT_EXTRA`` so clamping to MAX_RECV is exercised."""


def _key(seed: int, rank: int, iteration: int, stream: int) -> np.uint64:
    """A 64-bit key for one (seed, rank, iteration, stream); the streams keep op families apart."""
    k = (seed * _SEED_KEY + rank * _RANK_KEY + iteration * _ITER_KEY + stream * 0x2545F4914F6CDD1D) & _MASK64
    return np.uint64(k)


def _mix(key: np.uint64, start: int, count: int) -> np.ndarray:
    """splitmix64 of ``key + position * golden`` for positions ``start .. start+count``: uint64[count].

    In place, one scratch array: at the harness's larger sizes (64K elements and more) each fresh
    temporary costs more than the arithmetic on it. NumPy's integer arrays wrap without a warning."""
    z = np.arange(start, start + count, dtype=np.uint64)
    t = np.empty_like(z)
    z *= _GOLDEN
    z += key
    for shift, mul in ((_SHIFT1, _MUL1), (_SHIFT2, _MUL2)):
        np.right_shift(z, shift, out=t)
        z ^= t
        z *= mul
    np.right_shift(z, _SHIFT3, out=t)
    z ^= t
    return z


def _mod(h: np.ndarray, m: int) -> np.ndarray:
    """``h % m`` (uint64 ``h``, small ``m > 0``) as int64, in ``h``'s place: NumPy divides an integer
    array by a scalar many times faster than it takes the remainder (measured: 14 against 169 us for
    64K elements), so this is ``h - (h // m) * m``."""
    q = h // np.uint64(m)
    q *= np.uint64(m)
    np.subtract(h, q, out=h)
    return h.view(np.int64)


_STREAM: Mapping[ReduceOp | None, int] = MappingProxyType(
    {
        None: 0,
        ReduceOp.Sum: 1,
        ReduceOp.Max: 2,
        ReduceOp.Min: 3,
        ReduceOp.Prod: 4,
    }
)


_SUM_LEVELS = 31
"""Sum data are the halves ``k/2`` for ``k`` in ``-15 .. 15``: 31 levels."""


def _levels(op: ReduceOp | None, dt: np.dtype) -> np.ndarray:
    """Every value :func:`values` can produce for ``op``, in ``dt``, indexed as :func:`values` draws:
    the position's hash picks a level, and a lookup in ``dt`` is many times cheaper than computing
    the value in FP32 and converting it (FP16 conversion is slow in NumPy). Read-only."""
    if op is ReduceOp.Sum:
        k = np.arange(_SUM_LEVELS, dtype=np.float32) - np.float32(_SUM_LEVELS // 2)
        table = k * np.float32(0.5)
    elif op is ReduceOp.Prod:  # index = 3 * sign bit + (exponent + 1)
        sign = np.repeat(np.array([1.0, -1.0], dtype=np.float32), 3)
        table = sign * np.ldexp(np.float32(1.0), np.tile(np.arange(-1, 2), 2)).astype(np.float32)
    else:
        k = np.arange(2 * DATA_MAX_HALVES, dtype=np.float32) - np.float32(DATA_MAX_HALVES)
        table = k * np.float32(0.5)
    out = table.astype(dt)
    out.flags.writeable = False
    return out


_LEVELS: Mapping[tuple[ReduceOp | None, np.dtype], np.ndarray] = MappingProxyType(
    {(op, np.dtype(dt)): _levels(op, np.dtype(dt)) for op in _STREAM for dt in (np.float16, np.float32)}
)


def values(
    dtype: np.dtype | type,
    op: ReduceOp | None,
    seed: int,
    rank: int,
    iteration: int,
    count: int,
    start: int = 0,
) -> np.ndarray:
    """Flat positions ``start .. start+count`` of ``rank``'s input at ``iteration``.

    ``op`` picks the value family (see the module docstring); ``None`` is plain data that is moved
    but never combined.  The result has ``dtype`` (float16 or float32) and is exact in it.
    """
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float16), np.dtype(np.float32)):
        raise ValueError(f"check data is FP16 or FP32, not {dt}")
    if count < 0 or start < 0:
        raise ValueError(f"bad range start={start} count={count}")
    h = _mix(_key(seed, rank, iteration, _STREAM[op]), start, count)
    if op is ReduceOp.Sum:
        index = _mod(h, _SUM_LEVELS)
    elif op is ReduceOp.Prod:
        sign = (h >> np.uint64(40)) & np.uint64(1)
        if rank >= PROD_SCALING_RANKS:
            index = (sign * np.uint64(3) + np.uint64(1)).view(np.int64)  # exponent 0: +-1
        else:
            index = _mod(h, 3)
            index += (sign * np.uint64(3)).view(np.int64)
    else:  # Max, Min, data: 2 * DATA_MAX_HALVES is a power of two
        h &= np.uint64(2 * DATA_MAX_HALVES - 1)
        index = h.view(np.int64)
    return _LEVELS[op, dt].take(index)


def max_exact_ranks(op: ReduceOp | None, dtype: np.dtype | type) -> int | None:
    """Largest rank count for which :func:`values` reductions are exact in ``dtype`` (None: any)."""
    dt = np.dtype(dtype)
    if op is ReduceOp.Sum:
        # FP16 spacing is 1/2 below 1024, FP32's below 2**23; a partial sum is < 7.5 * NR.
        limit = 1024 if dt == np.dtype(np.float16) else 1 << 23
        return int(limit / SUM_MAX_MAGNITUDE) - 1
    return None


def send_counts(seed: int, sender: int, iteration: int, nranks: int, max_recv: int) -> np.ndarray:
    """``sender``'s all_to_all_v send_counts (int32[nranks]) at ``iteration``.

    Drawn uniformly from ``[-1, max_recv + 2]``: negatives and 0 send nothing, values above MAX_RECV
    are clamped by the collective.  Seeded by (seed, sender, iteration) only, so every rank can
    recompute every sender's counts.
    """
    if max_recv < 1:
        raise ValueError(f"max_recv must be >= 1, got {max_recv}")
    rng = np.random.default_rng([seed & _MASK64, sender, iteration, 0xA2A5])
    hi = max_recv + SEND_COUNT_EXTRA
    return rng.integers(SEND_COUNT_LOW, hi + 1, size=nranks, dtype=np.int64).astype(np.int32)


def clamp_rows(counts: np.ndarray | int, max_recv: int) -> np.ndarray:
    """Rows actually moved for each send count: ``clamp(count, 0, max_recv)``."""
    return np.clip(np.asarray(counts, dtype=np.int64), 0, max_recv)


# ----------------------------------------------------------------------------------------------
# The geometry of one checked collective, and each rank's inputs
# ----------------------------------------------------------------------------------------------

COLLECTIVES = (
    "allreduce",
    "allgather",
    "reduce_scatter",
    "broadcast",
    "barrier",
    "all_to_all",
    "all_to_all_v",
)
"""Collective names the harness knows how to feed and check."""

REDUCING = frozenset({"allreduce", "reduce_scatter"})
"""Collectives whose result combines ranks with a ReduceOp (the rest only move data)."""


@dataclass(frozen=True)
class CheckCase:
    """What the harness needs to know about one collective, independent of how it is lowered.

    ``shape`` is the allreduce/broadcast target shape (``(1, size)`` unless ``--shape`` was given);
    ``valid_shape`` the allreduce target's valid rectangle (mesh) or flattened prefix (ring), ``None``
    for fully valid.  The buffer shapes of the other collectives follow from ``size``, ``nranks`` and
    ``max_recv`` as in the protocol digest.
    """

    name: str
    nranks: int
    dtype: np.dtype
    size: int
    shape: tuple[int, ...]
    valid_shape: tuple[int, ...] | None = None
    mode: str = "mesh"
    reduce: ReduceOp = ReduceOp.Sum
    root: int = 0
    max_recv: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.name not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.name!r}; expected one of {', '.join(COLLECTIVES)}")
        if self.nranks < 1:
            raise ValueError(f"nranks must be >= 1, got {self.nranks}")
        if not 0 <= self.root < self.nranks:
            raise ValueError(f"root {self.root} is not a rank of {self.nranks}")
        if self.max_recv < 1:
            raise ValueError(f"max_recv must be >= 1, got {self.max_recv}")
        if self.valid_shape is not None and len(self.valid_shape) != len(self.shape):
            raise ValueError(f"valid_shape {self.valid_shape} does not match shape {self.shape}")

    @property
    def reduces(self) -> bool:
        """True when the result combines ranks with :attr:`reduce`."""
        return self.name in REDUCING

    @property
    def value_op(self) -> ReduceOp | None:
        """The value family of the inputs: the ReduceOp for reducing collectives, else plain data."""
        return self.reduce if self.reduces else None

    @property
    def target_shape(self) -> tuple[int, ...] | None:
        """Shape of the result window (None for barrier)."""
        nr, m, size = self.nranks, self.max_recv, self.size
        return {
            "allreduce": self.shape,
            "broadcast": self.shape,
            "allgather": (nr, size),
            "reduce_scatter": (nr, size),
            "all_to_all": (nr, size),
            "all_to_all_v": (nr * m, size),
            "barrier": None,
        }[self.name]

    @property
    def target_bytes(self) -> int:
        """Bytes of the result window on each rank (0 for barrier)."""
        shape = self.target_shape
        return 0 if shape is None else math.prod(shape) * self.dtype.itemsize

    @property
    def label(self) -> str:
        """Short description for tables: ``allreduce ring fp16 sum``, ``broadcast root=2``..."""
        dt = "fp16" if self.dtype == np.dtype(np.float16) else "fp32"
        parts = [self.name]
        if self.name == "allreduce":
            parts.append(self.mode)
        if self.name != "barrier":
            parts.append(dt)
        if self.reduces:
            parts.append(self.reduce.name.lower())
        if self.name == "broadcast":
            parts.append(f"root={self.root}")
        if self.name == "all_to_all_v":
            parts.append(f"max_recv={self.max_recv}")
        return " ".join(parts)


@dataclass(frozen=True)
class RankInputs:
    """What one rank writes before one call; ``None`` for buffers the collective does not take."""

    target: np.ndarray | None = None
    local_data: np.ndarray | None = None
    input: np.ndarray | None = None
    send_counts: np.ndarray | None = None


def rank_inputs(case: CheckCase, rank: int, iteration: int) -> RankInputs:
    """``rank``'s inputs for call ``iteration`` of ``case`` (a pure function: any rank can ask)."""
    nr, size, dt, seed = case.nranks, case.size, case.dtype, case.seed

    def vals(count: int, op: ReduceOp | None) -> np.ndarray:
        return values(dt, op, seed, rank, iteration, count)

    name = case.name
    if name in ("allreduce", "broadcast", "reduce_scatter"):
        shape = case.target_shape
        assert shape is not None
        return RankInputs(target=vals(math.prod(shape), case.value_op).reshape(shape))
    if name == "allgather":
        return RankInputs(local_data=vals(size, None).reshape(1, size))
    if name == "all_to_all":
        return RankInputs(input=vals(nr * size, None).reshape(nr, size))
    if name == "all_to_all_v":
        m = case.max_recv
        return RankInputs(
            input=vals(nr * m * size, None).reshape(nr * m, size),
            send_counts=send_counts(seed, rank, iteration, nr, m),
        )
    return RankInputs()  # barrier


__all__ = [
    "COLLECTIVES",
    "DATA_MAX_HALVES",
    "PROD_SCALING_RANKS",
    "REDUCING",
    "SEND_COUNT_EXTRA",
    "SEND_COUNT_LOW",
    "SUM_MAX_MAGNITUDE",
    "CheckCase",
    "RankInputs",
    "clamp_rows",
    "max_exact_ranks",
    "rank_inputs",
    "send_counts",
    "values",
]
