"""The one comparison of a buffer with its expectation, and the one record of how they differ.

Two judges use it with different semantics, each spelled as an explicit parameter of :func:`compare`:

* the check harness's oracle (``pldemu.harness.oracle``): exact, over a mask, a NaN never equals
  anything (the poison fill never passes), an array of the same size but another shape compared flat;
* a run's expected buffers (``pldemu.job.buffer_io``): exact or within a :class:`Tolerance`, NaN
  equals NaN (a poisoned element the expectation also leaves NaN is not wrong), any shape difference
  counts every element wrong.

Plain NumPy (no MPI), so the launcher side and the harnesses in a job can both import it; numpy is
imported where an array is compared, so that the launcher of ``pldemu run`` can hold a
:class:`Tolerance` without it (tests/launcher/test_launcher_imports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """How close is equal: exact when both are 0 (``numpy.isclose`` semantics otherwise)."""

    rtol: float = 0.0
    atol: float = 0.0

    def describe(self) -> str:
        return "exact" if self.rtol == 0 and self.atol == 0 else f"rtol={self.rtol:g} atol={self.atol:g}"


EXACT = Tolerance()


@dataclass(frozen=True)
class Mismatch:
    """How one buffer differs from its expectation: how many elements, and the first one (row-major)."""

    count: int = 0
    index: tuple[int, ...] | None = None
    """The first differing element (None: nothing differed, or the shapes did)."""
    want: object = None
    """The expected element at :attr:`index` (a NumPy scalar of the expectation's dtype)."""
    seen: object = None
    """The element seen at :attr:`index`."""
    what: str = "target"
    """The buffer's name."""
    rank: int | None = None
    """The rank whose buffer this is, when the judge names one."""
    total: int = 0
    """Elements compared."""
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """(seen, expected) shapes when they differ (then every element counts wrong)."""

    @property
    def ok(self) -> bool:
        """True when nothing differed."""
        return self.count == 0

    @property
    def wrong(self) -> int:
        """How many elements differ (the expected-buffer report's name for :attr:`count`)."""
        return self.count

    @property
    def got(self) -> str:
        """The seen element as printed (or the seen shape)."""
        return f"shape {list(self.shapes[0])}" if self.shapes is not None else _show(self.seen)

    @property
    def expected(self) -> str:
        """The expected element as printed (or the expected shape)."""
        return f"shape {list(self.shapes[1])}" if self.shapes is not None else _show(self.want)

    def as_tuple(self) -> tuple[int, tuple[int, ...] | None, object, object]:
        """The documented comparison tuple ``(#wrong, first differing index, expected, seen)``."""
        return (self.count, self.index, self.want, self.seen)

    def describe(self) -> str:
        """``3 wrong in target, first at (0, 5): expected 1.5, seen nan``; a record naming its rank
        prints as the expected-buffer report's row (:meth:`_rank_line`)."""
        if self.rank is not None:
            return self._rank_line()
        if self.ok:
            return f"{self.what}: ok"
        what = self.what if self.shapes is None else f"{self.what} (shape {self.shapes[0]} != {self.shapes[1]})"
        return (
            f"{self.count} wrong in {what}, first at {self.index}: "
            f"expected {_scalar(self.want)!r}, seen {_scalar(self.seen)!r}"
        )

    def _rank_line(self) -> str:
        """``rank 1 y: #wrong 1/3, first at [2]: got 3, expected 4`` (the expected-buffer report)."""
        at = "[" + ", ".join(map(str, self.index or ())) + "]"
        return (f"rank {self.rank} {self.what}: #wrong {self.count}/{self.total}, first at {at}: "
                f"got {self.got}, expected {self.expected}")


def compare(expected: np.ndarray, seen: np.ndarray, *, what: str, mask: np.ndarray | None = None,
            tol: Tolerance = EXACT, nan_equal: bool, flat_same_size: bool, rank: int | None = None) -> Mismatch:
    """Element-wise ``seen`` against ``expected`` over ``mask`` (all elements if None), within ``tol``.

    ``nan_equal``: a NaN seen where NaN is expected is right (else a NaN never equals anything).
    ``flat_same_size``: an array of the expected size but another shape is compared flat (else any
    shape difference counts every element wrong). Floats within a tolerance compare in float64."""
    import numpy as np

    exp, got = np.asarray(expected), np.asarray(seen)
    if exp.shape != got.shape:
        if not flat_same_size or exp.size != got.size:
            n = max(exp.size, got.size)
            return Mismatch(n, what=what, rank=rank, total=n, shapes=(got.shape, exp.shape))
        got = got.reshape(exp.shape)
    bad = ~_close(got, exp, tol, nan_equal)
    if mask is not None:
        bad &= mask
    count = int(np.count_nonzero(bad))
    if not count:
        return Mismatch(what=what, rank=rank, total=int(got.size))
    index = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), exp.shape))
    return Mismatch(count, index, exp[index], got[index], what, rank, int(got.size))


def _close(got: np.ndarray, expected: np.ndarray, tol: Tolerance, nan_equal: bool) -> np.ndarray:
    import numpy as np

    numeric = got.dtype.kind in "fc" or expected.dtype.kind in "fc" or got.dtype.kind == "V"
    if tol == EXACT and not (numeric and nan_equal):
        return np.asarray(got == expected)
    a, b = got.astype(np.float64), expected.astype(np.float64)
    if tol == EXACT:
        return np.asarray((a == b) | (np.isnan(a) & np.isnan(b)))
    return np.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=nan_equal)


def _show(value: object) -> str:
    import numpy as np

    return repr(value.item()) if isinstance(value, np.generic) else repr(value)


def _scalar(x: object) -> object:
    """A NumPy scalar as the Python number it prints as (anything else unchanged)."""
    import numpy as np

    if not isinstance(x, np.generic):
        return x
    return int(x) if np.issubdtype(x.dtype, np.integer) else float(x)


__all__ = ["EXACT", "Mismatch", "Tolerance", "compare"]
