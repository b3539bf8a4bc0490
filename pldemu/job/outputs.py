"""Output paths checked before a job starts: a result that cannot be written is refused at once
(exit 2), not discovered after the whole run by every rank at the same time."""

from __future__ import annotations

import os
from pathlib import Path


class OutputPathError(ValueError):
    """An output path that cannot be written; the message names the flag and the reason."""


def _writable_ancestor(path: Path, flag: str) -> None:
    """The nearest existing ancestor of ``path`` must be a writable directory."""
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{flag} {path}: {parent} is a file, not a directory")
    _probe(parent, flag, path)


def _probe(folder: Path, flag: str, path: Path) -> None:
    """Create and remove a file in ``folder``: permission bits do not tell (root, read-only mounts)."""
    probe = folder / f".pldemu-probe-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise OutputPathError(f"{flag} {path}: cannot write in {folder} ({err.strerror})") from None


def output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` resolved, if a file can be written there (its directory must exist)."""
    target = Path(path).resolve()
    if target.is_dir():
        raise OutputPathError(f"{flag} {path}: is a directory; give a file name")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"{flag} {path}: the file exists and is not writable")
    _writable_ancestor(target, flag)
    if not target.parent.is_dir():  # the writers do not create directories for a file
        raise OutputPathError(f"{flag} {path}: no directory {target.parent}")
    return target


def output_dir(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` resolved, if it is (or can be made) a writable directory."""
    target = Path(path).resolve()
    if target.exists():
        if not target.is_dir():
            raise OutputPathError(f"{flag} {path}: exists and is not a directory")
        _probe(target, flag, target)
        return target
    _writable_ancestor(target, flag)
    return target


__all__ = ["OutputPathError", "output_dir", "output_file"]
