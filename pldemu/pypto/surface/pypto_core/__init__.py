"""``pypto.pypto_core``: the few names of pypto's C++ core that its test harness imports."""

from __future__ import annotations

import enum

from pldemu.pypto.surface.pypto_core import passes


class LogLevel(enum.IntEnum):
    """pypto's C++ log levels."""

    DEBUG = 0
    INFO = 1
    WARN = 2
    ERROR = 3
    FATAL = 4
    EVENT = 5
    NONE = 6


def _set_thread_log_level(level: LogLevel) -> None:
    """pypto's per-thread C++ log threshold: checked, without effect (pldemu has no C++ logger)."""
    if not isinstance(level, LogLevel):
        raise TypeError(f"_set_thread_log_level: expected a pypto.LogLevel, got {level!r}")


def _clear_thread_log_level() -> None:
    """Drops the per-thread threshold: nothing to drop here."""


__all__ = ["LogLevel", "_clear_thread_log_level", "_set_thread_log_level", "passes"]
