"""Keep MPI's named shared-memory segments from outliving the job.

MPICH creates a named POSIX shared-memory segment per node at ``MPI_Init`` (``/dev/shm/mpich_shm_*``)
and unlinks it only in ``MPI_Finalize``: a job ended by ``MPI_Abort`` or a signal leaves it behind.
Once every local rank has mapped it, its name is no longer needed (MPICH never reopens it), so each
rank unlinks the names it maps; the memory stays mapped until the processes exit, however they exit.
"""

from __future__ import annotations

import os
from pathlib import Path

_MAPS = Path("/proc/self/maps")
_SHM_DIR = "/dev/shm/"
_PREFIXES = ("mpich_",)
"""Segment names we own through MPI. Window segments (``mpich_shar_tmp*``) are already unlinked."""


def mapped_segments(maps: Path = _MAPS) -> list[str]:
    """Paths of named /dev/shm segments this process (or the one whose ``/proc/<pid>/maps`` is
    ``maps``) maps that still have a name (Linux only)."""
    try:
        text = maps.read_text()
    except OSError:
        return []
    found: set[str] = set()
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and _named(path := parts[5].strip()):
            found.add(path)
    return sorted(found)


def _named(path: str) -> bool:
    """Whether ``path`` (a mapping's or an open file's, as /proc shows it) is a /dev/shm segment that
    still has a name."""
    return path.startswith(_SHM_DIR) and not path.endswith("(deleted)")


def held_segments(pid: int) -> list[str]:
    """Paths of named /dev/shm segments process ``pid`` maps (:func:`mapped_segments`) or holds open
    (created, not yet mapped), that still have a name (Linux only)."""
    found = set(mapped_segments(Path(f"/proc/{pid}/maps")))
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return sorted(found)
    for fd in fds:
        try:
            path = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if _named(path):
            found.add(path)
    return sorted(found)


def unlink_segment(path: str) -> bool:
    """Unlink one of MPI's named segments (by its /dev/shm path); False if it was already gone or is
    not ours to remove. Only ``mpich_*`` names under /dev/shm are touched."""
    if not path.startswith(_SHM_DIR) or not os.path.basename(path).startswith(_PREFIXES):
        return False
    try:
        os.unlink(path)
    except OSError:  # gone already (a rank won the race), or not ours (permissions)
        return False
    return True


def unlink_named_segments() -> list[str]:
    """Unlink MPI's named segments mapped by this process; returns the names it removed.

    Call only when every rank on the node has mapped them (after any collective following
    ``MPI_Init``). Ranks race to unlink the same name: losing the race is fine. Where /dev/shm holds
    no name of ours (the usual case: the first call unlinked them) the maps are not read at all:
    listing the folder costs microseconds, reading ``/proc/self/maps`` about half a millisecond, and
    every program instance asks twice.
    """
    try:
        names = os.listdir(_SHM_DIR)
    except OSError:
        return []
    if not any(name.startswith(_PREFIXES) for name in names):
        return []
    return [path for path in mapped_segments() if unlink_segment(path)]


__all__ = ["held_segments", "mapped_segments", "unlink_named_segments", "unlink_segment"]
