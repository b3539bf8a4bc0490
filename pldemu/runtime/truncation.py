"""Truncating division and remainder whose value differs from the floor operators': the findings.

pypto's IR names ``//`` FloorDiv and ``%`` FloorMod and folds constants with floor semantics, but its code
generators emit C's signed division and remainder (``arith.divsi`` / ``arith.remsi``, C ``/`` / ``%``),
which truncate toward zero: on the device ``-1 % 4`` is -1, in the IR 3. pldemu's IR has both: the
floor operators (``//``, ``%``) and C's (``tdiv``, ``trem``, :attr:`pldemu.ir.BinOpKind.is_truncating`),
and runs what the device runs. A program that works only because ``%`` floors must not pass, so every
evaluation of ``tdiv`` / ``trem`` whose value differs from the floor operator's (dividend and divisor of
different signs, a non-zero remainder) is a :class:`Truncation` finding: this rank keeps the first one
per site (:class:`TruncationLog`), the job gathers every rank's (:func:`merge`: once per site, with the
ranks that saw it), and the run fails with exit 1 unless ``RuntimeOptions.truncation_warn`` makes the
findings warnings.

Cost: the compiler evaluates ``trem(a, b)`` inline as ``a % b`` when ``a >= 0 < b`` (where both agree)
and calls the site's :meth:`TruncationLog.site` function only otherwise; a program without truncating
operators compiles exactly as before. No MPI here: the launcher side reads the records.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pldemu.ir.nodes import BinOpKind, trunc_div, trunc_rem

_EXACT: Mapping[BinOpKind, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any], str]] = {
    BinOpKind.TDIV: (trunc_div, operator.floordiv, "//"),
    BinOpKind.TREM: (trunc_rem, operator.mod, "%"),
}
"""Truncating operator -> (its value, the floor operator's value, the source spelling of the floor operator)."""


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python number it is (findings travel as JSON)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


@dataclass(frozen=True)
class Truncation:
    """One site where the device's truncating division or remainder gave another value than floor
    semantics: the values are those of the first evaluation seen (lowest call, then lowest rank)."""

    op: str
    """``tdiv`` or ``trem``."""
    expr: str
    """The operator's expression as the executed program prints it (``trem(me - 1, nr)``)."""
    origin: str
    """The user's file:line of the statement (``prog.py:57``), or empty when the program has none."""
    where: str
    """The statement's location (``FUNC:LINE TEXT [FILE:LINE]``)."""
    lhs: Any
    rhs: Any
    device: Any
    """What the device computes (C truncation)."""
    floor: Any
    """What floor semantics give (pypto's IR, Python)."""
    rank: int
    """The rank whose values these are."""
    call: int
    """1-based call number on that rank when it was first seen."""
    ranks: tuple[int, ...] = ()
    """Every rank that saw the site differ (empty: only :attr:`rank`)."""
    source: str = ""
    """The user's own text of the expression (``(my_rank - 1) % nranks``), when a front end knows it."""

    @property
    def key(self) -> tuple[str, str]:
        """What makes two records the same site: the user's line and text, else the printed location."""
        return (self.origin, self.source or self.expr) if self.origin else (self.where, self.expr)

    def describe(self) -> str:
        """``prog.py:57: `(my_rank - 1) % nranks` with a negative dividend (-1 % 3): the device computes -1
        (C truncation), pypto's IR and Python give 2 (floor); rank 0, first seen at call 1``."""
        symbol = _EXACT[BinOpKind(self.op)][2]
        negative = "dividend" if self.lhs < 0 else "divisor"
        ranks = self.ranks or (self.rank,)
        who = (f"rank {self.rank}" if len(ranks) == 1 else
               f"ranks {', '.join(map(str, ranks))} (the values of rank {self.rank})")
        return (f"{self.origin or self.where}: `{self.source or self.expr}` with a negative {negative} "
                f"({self.lhs} {symbol} {self.rhs}): the device computes {self.device} (C truncation), pypto's IR "
                f"and Python give {self.floor} (floor); {who}, first seen at call {self.call}")

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (``--report``); :meth:`from_json` reads it back."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Truncation:
        fields = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in fields}
        return cls(**{**known, "ranks": tuple(known.get("ranks", ()))})


def merge(found: Iterable[Truncation]) -> tuple[Truncation, ...]:
    """One record per site (:attr:`Truncation.key`) over every rank's: the values of the first seen (lowest
    call, then rank), with every rank that saw it; ordered as first seen."""
    first: dict[tuple[str, str], Truncation] = {}
    ranks: dict[tuple[str, str], set[int]] = {}
    for t in sorted(found, key=lambda t: (t.call, t.rank)):
        first.setdefault(t.key, t)
        ranks.setdefault(t.key, set()).update(t.ranks or (t.rank,))
    return tuple(dataclasses.replace(t, ranks=tuple(sorted(ranks[k]))) for k, t in first.items())


def summary(found: Iterable[Truncation], warn: bool) -> str:
    """The findings as ``pldemu run`` prints them under its report (one line each)."""
    items = list(found)
    what = "warning(s), --truncation-warn" if warn else "finding(s)"
    head = (f"  truncating division: {len(items)} site(s) where the device's C truncation differs from floor "
            f"semantics ({what}):")
    return "\n".join([head, *(f"    {t.describe()}" for t in items)])


class TruncationLog:
    """This rank's findings: the first per site (a site differs on every call of a loop; the first says
    it). ``call`` reads the current 1-based call number (only when a finding is made)."""

    def __init__(self, rank: int, call: Callable[[], int]) -> None:
        self.rank = rank
        self._call = call
        self._found: dict[tuple[str, str], Truncation] = {}

    @property
    def found(self) -> tuple[Truncation, ...]:
        """This rank's findings so far, in the order they were made."""
        return tuple(self._found.values())

    def site(self, op: BinOpKind, expr: str, where: str, origin: str) -> Callable[[Any, Any], Any]:
        """The function a compiled truncating operator calls when an operand is negative (or the divisor
        is 0, which raises as ``//`` does): it returns the device's value and records the first
        evaluation that differs from floor semantics."""
        exact, floor, _ = _EXACT[op]
        key = (where, expr)
        found = self._found

        def evaluate(a: Any, b: Any) -> Any:
            value = exact(a, b)
            if key not in found:
                other = floor(a, b)
                if other != value:
                    found[key] = Truncation(op.value, expr, origin, where, _plain(a), _plain(b), _plain(value),
                                            _plain(other), self.rank, self._call())
            return value

        return evaluate


__all__ = ["Truncation", "TruncationLog", "merge", "summary"]
