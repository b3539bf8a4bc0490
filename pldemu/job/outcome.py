"""The result of a stress job, as the job writes it and the launcher reads it (MPI-free).

The launcher of ``pldemu stress`` must not initialise MPI itself (it would be an MPI singleton with a
``/dev/shm`` segment of its own, left behind if it is killed), so what it reads lives here, apart
from the harness in :mod:`pldemu.harness.stress`: the :class:`StressOutcome` JSON, and the progress
file rank 0 keeps up to date, from which a job killed by its timeout is reported as a timeout with
the iterations it completed, not as a deadlock.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PRIORITY = ("invariant", "race", "wrong-data")
"""The kind reported when a block showed several (root cause first; see the module docstring)."""

KIND_ORDER = (*PRIORITY, "deadlock", "error", "timeout")
"""Every kind an outcome can have."""

@dataclass(frozen=True)
class StressOutcome:
    """What a stress run found (the JSON result of a job)."""

    kind: str | None
    """None: no failure in ``iterations`` iterations; else one of :data:`KIND_ORDER`."""
    iteration: int | None
    """0-based iteration of the first failure (None: no failure, or not known)."""
    iterations: int
    """Iterations run (for a deadlock: the one that hung, plus one)."""
    rank: int
    """The rank whose report this is (-1: every rank)."""
    detail: str
    seconds: float
    replay: str = ""
    primary: bool = True
    """False for a deadlocked rank that did not print the wait-for report."""
    first_iteration: int | None = None
    """The first iteration in which anything failed (None: as ``iteration``)."""
    seen: tuple[str, ...] = ()
    """Every kind seen, as ``kind@iteration``, in :data:`KIND_ORDER`."""
    notes: tuple[str, ...] = ()
    """The race detector's notes on fences and cacheinvalids (``--visibility fenced``), not failures."""

    @property
    def caught(self) -> bool:
        """A failure was found (a job that only ran out of time found none)."""
        return self.kind not in (None, "timeout")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StressOutcome:
        data: dict[str, Any] = json.loads(text)
        data["seen"] = tuple(data.get("seen", ()))
        data["notes"] = tuple(data.get("notes", ()))
        return cls(**data)

    @property
    def caught_at(self) -> int | None:
        """The first iteration anything failed in (0-based), or None."""
        if self.first_iteration is not None and self.first_iteration >= 0:
            return self.first_iteration
        return self.iteration if self.iteration is not None and self.iteration >= 0 else None

    def describe(self) -> str:
        """The lines printed for this outcome (kind, iteration, detail, then the notes), without the
        replay line."""
        return self._verdict() + "".join(f"\n# {note}" for note in self.notes)

    def _verdict(self) -> str:
        if self.kind is None:
            return f"# no failure in {self.iterations} iterations ({self.seconds:.1f} s)"
        if self.kind == "timeout":
            return f"# TIMEOUT after {self.seconds:.1f} s: {self.detail}"
        at = f"iteration {self.iteration}" if self.iteration is not None and self.iteration >= 0 else "unknown iteration"
        who = f" (rank {self.rank})" if self.rank >= 0 else ""
        head = f"# FAILED: {self.kind} at {at}{who}"
        first = self.caught_at
        if first is not None and first != self.iteration:
            # Something failed before the root cause named first: say when the run first went wrong.
            earliest = [s.split("@")[0] for s in self.seen if s.endswith(f"@{first}")]
            head += f", first failure at iteration {first}" + (f" ({', '.join(earliest)})" if earliest else "")
        head += f", after {self.seconds:.1f} s"
        if len(self.seen) > 1:
            head += f" (kinds seen: {', '.join(self.seen)})"
        # Only a leading "# " goes: the wait-for graph keeps its indentation.
        body = (line[2:] if line.startswith("# ") else line for line in self.detail.splitlines() if line.strip())
        return head + "\n" + "\n".join("#   " + line for line in body)


def write_outcome(path: str | os.PathLike[str], outcome: StressOutcome) -> None:
    """Write ``outcome`` atomically (a reader never sees half a file)."""
    p = Path(path)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}")
    tmp.write_text(outcome.to_json())
    os.replace(tmp, p)


def read_outcome(path: str | os.PathLike[str]) -> StressOutcome | None:
    """The job's outcome: ``path`` (normal end), else the reporting rank's ``path.rank<R>`` file
    (deadlock or crash: the primary reporter first, then the lowest rank); None if there is none."""
    p = Path(path)
    if p.is_file():
        return StressOutcome.from_json(p.read_text())
    found = []
    for f in sorted(p.parent.glob(p.name + ".rank*")):
        try:
            found.append(StressOutcome.from_json(f.read_text()))
        except (ValueError, TypeError):
            continue
    if not found:
        return None
    found.sort(key=lambda o: (not o.primary, o.rank))
    return found[0]


def progress_path(result_path: str | os.PathLike[str]) -> Path:
    """Where rank 0 records the iterations completed so far, next to the result file."""
    return Path(str(result_path) + ".progress")


def write_progress(result_path: str | os.PathLike[str], iterations: int) -> None:
    """Record that ``iterations`` calls have completed (atomically; best effort)."""
    p = progress_path(result_path)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}")
    try:
        tmp.write_text(str(iterations))
        os.replace(tmp, p)
    except OSError:
        pass


def read_progress(result_path: str | os.PathLike[str]) -> int:
    """The iterations recorded by :func:`write_progress` (0 when none were)."""
    try:
        return int(progress_path(result_path).read_text())
    except (OSError, ValueError):
        return 0


__all__ = ["KIND_ORDER", "PRIORITY", "StressOutcome", "progress_path", "read_outcome", "read_progress",
           "write_outcome", "write_progress"]
