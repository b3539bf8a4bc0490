"""Argument types shared by every ``pldemu`` subcommand.

argparse calls these on the raw text; an ``ArgumentTypeError`` becomes ``error: argument --x: ...``
with exit status 2, before any MPI job starts. One definition each, so every command accepts and
refuses the same spellings.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _int_at_least(text: str, low: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def _number_in(text: str, ok: Callable[[float], bool], expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not (ok(value) and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def any_int(text: str) -> int:
    """Any integer (range checks belong to the command, which can say what the value is for)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds, mostly)."""
    return _number_in(text, lambda v: v > 0, "a positive number")


def microseconds(text: str) -> float:
    """A finite number of microseconds >= 0."""
    return _number_in(text, lambda v: v >= 0, "microseconds >= 0")


def straggler(text: str) -> tuple[int, float]:
    """``R:US``: rank R sleeps US microseconds more before every primitive."""
    try:
        rank, us = text.split(":")
        r, u = int(rank), float(us)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected R:US (rank:microseconds), got {text!r}") from None
    if r < 0 or not (u > 0 and math.isfinite(u)):
        raise argparse.ArgumentTypeError(f"expected R:US with R >= 0 and US > 0, got {text!r}")
    return r, u


def dims(text: str) -> tuple[int, ...]:
    """``RxC`` (or ``N``, or ``AxBxC``): positive integers."""
    try:
        values = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RxC with positive integers, got {text!r}") from None
    if not values or any(d < 1 for d in values):
        raise argparse.ArgumentTypeError(f"expected RxC with positive integers, got {text!r}")
    return values


def host_shape(text: str) -> tuple[int, int]:
    """``HxR``: H simulated hosts of R ranks each (both >= 1, H <= 32)."""
    values = dims(text)
    if len(values) != 2 or values[0] > 32:
        raise argparse.ArgumentTypeError(f"expected HxR (hosts x ranks per host, at most 32 hosts), got {text!r}")
    return values[0], values[1]


def host_list(text: str) -> tuple[tuple[str, int], ...]:
    """``a:2,b:2``: host names with their rank counts (``a`` alone means one rank)."""
    out = []
    for item in text.split(","):
        name, _, count = item.partition(":")
        try:
            n = int(count) if count else 1
        except ValueError:
            n = 0
        if not name or n < 1:
            raise argparse.ArgumentTypeError(f"expected HOST:N,HOST:N (N >= 1), got {text!r}")
        out.append((name, n))
    return tuple(out)


def format_number(value: float) -> str:
    """``value`` as short as it reads back exactly (``50.0`` -> ``50``, ``0.1`` -> ``0.1``): for command
    lines a user will read and re-run."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def format_dims(values: tuple[int, ...]) -> str:
    """The inverse of :func:`dims`."""
    return "x".join(map(str, values))


__all__ = ["any_int", "dims", "format_dims", "format_number", "host_list", "host_shape", "microseconds", "nonneg_int", "positive_float", "positive_int",
           "straggler"]
