"""A small statistics registry, after Penguin's ``register_stats(**{name: Unit})``.

A pass registers the statistics it keeps, with their unit, and adds to them; the CLI prints them. The
registry is an explicit object rather than module or class state: one registry shared by several runs
accumulates across them, which is how the class-level counter of the spec behaves.
"""

from __future__ import annotations

import enum


class Unit(enum.Enum):
    """The unit a statistic counts in."""

    Bytes = "bytes"
    Count = "count"


class Statistics:
    """Registered statistics and their running totals, in registration order."""

    def __init__(self) -> None:
        self._units: dict[str, Unit] = {}
        self._values: dict[str, int] = {}

    def register_stats(self, **stats: Unit) -> None:
        """Declare statistics (again is fine if the unit agrees)."""
        for name, unit in stats.items():
            if self._units.setdefault(name, unit) is not unit:
                raise ValueError(f"statistic {name!r} is already registered in {self._units[name].value}")
            self._values.setdefault(name, 0)

    def add(self, name: str, amount: int) -> None:
        if name not in self._units:
            raise KeyError(f"statistic {name!r} is not registered")
        self._values[name] += amount

    def value(self, name: str) -> int:
        return self._values[name]

    def rows(self) -> list[tuple[str, int, Unit]]:
        """(name, value, unit) of every statistic."""
        return [(name, self._values[name], unit) for name, unit in self._units.items()]

    def format(self) -> str:
        return "\n".join(f"{name}: {value} {unit.value}" for name, value, unit in self.rows())


__all__ = ["Statistics", "Unit"]
