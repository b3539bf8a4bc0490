"""Will the job fit in this machine? An estimate of its memory, checked before launch.

A job whose windows cannot be allocated does not fail cleanly: the ranks grow until the kernel's
out-of-memory killer picks one, or an allocation fails somewhere inside MPI. So every launcher
estimates the job first (:func:`job_memory`) and refuses it with the estimate (exit 2) when it does
not fit in the memory available now (:func:`check_fits`), unless the user forces it.

The estimate per rank: the interpreter's own footprint (:data:`RANK_OVERHEAD`: Python, NumPy,
mpi4py and MPICH, measured as a rank's resident size), plus every buffer ``copies`` times, plus what
the checkers keep per signal cell: the race detector's INT64 snapshot of every cell (each rank's own,
and rank 0's copy of every rank's at a checkpoint, :data:`RACE_CELL_BYTES`) and the invariant
checker's two INT32 shadow windows (``NAME.writers``, ``NAME.posters``: :data:`INVARIANT_CELL_BYTES`).
The race detector's logs grow with the accesses of a checkpoint, not with the buffers, and are not
counted; it keeps no per-cell release history (the shadow-clock window is gone). ``pldemu run`` keeps each buffer about
twice (the window segment, and the tiles and transfers a run makes of it: :data:`RUN_COPIES`);
``pldemu check`` also holds every rank's inputs and the oracle's results (:func:`check_copies`,
measured: a 64 MiB allreduce at 4 ranks peaks at 1.1 GiB per rank), plus the program's tile variables
(:func:`tile_bytes`). A refusal names the biggest buffers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pldemu.ir.nodes import Assign, Call, For, Program, Stmt, Task, TensorType, TileType, While, eval_nr
from pldemu.ir.ops import Op
from pldemu.ir.walk import stmt_bodies, walk_stmts
from pldemu.job.precheck import StaticBuffer

MIB = 1 << 20
GIB = 1 << 30

RANK_OVERHEAD = 120 * MIB
"""Resident memory of one rank before its buffers (measured: 77-150 MiB on this kind of machine)."""

RUN_COPIES = 2
"""Copies of each buffer a ``pldemu run`` rank holds (its window segment and the tiles of a run)."""


def check_copies(nranks: int) -> int:
    """Copies of the target a ``pldemu check`` rank holds: its windows and tiles, every rank's inputs
    and the oracle's float64 results (measured 16 at 4 ranks)."""
    return 4 + 3 * nranks


RACE_CELL_BYTES = 2 * 8
"""Race detector bytes per signal cell and rank: its INT64 snapshot, and its share of rank 0's gathered
snapshots at a checkpoint (``RaceDetector._resolve``)."""

INVARIANT_CELL_BYTES = 2 * 4
"""Invariant checker bytes per signal cell and rank: the INT32 ``writers`` and ``posters`` shadows."""

FIT_FRACTION = 0.9
"""Share of the available memory a job may be estimated to use before it is refused."""


class ResourceError(ValueError):
    """The job would not fit; the message gives the estimate and what is available."""


@dataclass(frozen=True)
class MemoryEstimate:
    """What a job of ``nranks`` ranks needs, in bytes."""

    nranks: int
    buffers: int
    """One rank's declared buffers."""
    shadow: int
    """What one rank's checkers keep per signal cell (race snapshots, invariant shadows)."""
    copies: int = RUN_COPIES
    """How many times a rank holds its buffers."""
    tiles: int = 0
    """One rank's tile variables, each holding its latest tile (:func:`tile_bytes`)."""
    biggest: tuple[tuple[str, int], ...] = ()
    """The largest buffers (name, bytes), largest first: what a refusal names."""
    unsized: tuple[str, ...] = ()
    """The ``tensor.create`` tensors of run-time extents: allocated when their statement runs, not counted."""
    repeated: tuple[str, ...] = ()
    """The counted ``tensor.create`` tensors made again each time a loop's body or a task's block runs: counted
    once, as one execution's storage is released once no value reaches it (:func:`repeated_creates`)."""

    @property
    def per_rank(self) -> int:
        return RANK_OVERHEAD + self.copies * self.buffers + self.shadow + self.tiles

    @property
    def total(self) -> int:
        return self.nranks * self.per_rank

    @property
    def beyond_processes(self) -> int:
        """What the job needs beyond its ranks' own footprint: a running job's next dispatch (a prepared
        worker's), whose processes hold their overhead already."""
        return self.total - self.nranks * RANK_OVERHEAD

    def describe(self) -> str:
        return (f"about {size_text(self.total)} ({self.nranks} ranks x ({size_text(self.buffers)} of buffers x {self.copies}"
                + (f" + {size_text(self.shadow)} checker shadows" if self.shadow else "")
                + (f" + {size_text(self.tiles)} of tiles" if self.tiles else "")
                + f" + {size_text(RANK_OVERHEAD)} per process))"
                + ("; biggest buffers: " + ", ".join(f"{n} {size_text(b)}" for n, b in self.biggest) if self.biggest
                   else "")
                + ("; not counted, sized at run time: " + ", ".join(self.unsized) if self.unsized else "")
                + ("; made per iteration or block, counted once (more are live while tasks using them are pending): "
                   + ", ".join(self.repeated) if self.repeated else ""))


def job_memory(buffers: Iterable[StaticBuffer], nranks: int, races: bool, copies: int = RUN_COPIES, *,
               invariants: bool = False, tiles: int = 0, program: Program | None = None) -> MemoryEstimate:
    """The estimate for ``buffers`` (one rank's, at ``nranks`` ranks, each held ``copies`` times); with
    ``races`` :data:`RACE_CELL_BYTES` and with ``invariants`` :data:`INVARIANT_CELL_BYTES` per signal
    cell; ``tiles``: the bytes of one rank's tile variables (:func:`tile_bytes`); ``program``: its
    ``tensor.create`` tensors too (:func:`created_tensors`)."""
    created, unsized = created_tensors(program, nranks) if program is not None else ([], ())
    repeated = repeated_creates(program, {b.name for b in created}) if program is not None else ()
    buffers = list(buffers) + created
    sizes = sorted(((b.name, math.prod(b.shape) * b.element.itemsize) for b in buffers), key=lambda nb: -nb[1])
    signal_cells = sum(math.prod(b.shape) for b in buffers if b.signal)
    per_cell = (RACE_CELL_BYTES if races else 0) + (INVARIANT_CELL_BYTES if invariants else 0)
    return MemoryEstimate(nranks, sum(n for _, n in sizes), signal_cells * per_cell, copies, tiles,
                          tuple(sizes[:BIGGEST]), unsized, repeated)


def created_tensors(program: Program, nranks: int) -> tuple[list[StaticBuffer], tuple[str, ...]]:
    """The tensors a program's ``tensor.create`` statements allocate as it runs: those of static extents
    (at ``nranks``), counted once each like a declared buffer, and the names of those sized at run time,
    which no estimate made before the run can count (each execution allocates its own). A statement that runs
    again (:func:`repeated_creates`) is counted once too: see there."""
    counted: dict[str, StaticBuffer] = {}
    unsized: dict[str, None] = {}
    for f in program.functions:
        for s, _ in _creates(f.body.stmts, False):
            assert isinstance(s.var.type, TensorType)
            dims = [eval_nr(d, nranks) for d in s.var.type.shape]
            if any(d is None for d in dims):
                unsized[s.var.name] = None
            else:
                counted[s.var.name] = StaticBuffer(s.var.name, s.var.type.dtype, tuple(d or 0 for d in dims))
    return list(counted.values()), tuple(unsized)


def repeated_creates(program: Program, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The ``tensor.create`` tensors (of ``names``, default all) whose statement runs again, in a loop or a
    task's body (each block runs it). Each execution allocates its own, and the run releases that storage once
    no value reaches it (``runtime.values.BufferTable``): in program order one is live at a time, plus the
    previous one while the next is made (an estimate holds every buffer ``copies`` times), so one counts it.
    Tasks not yet complete keep theirs, which no static count bounds: simpler's ring heap bounds them on the
    device (its orchestrator blocks when the heap is full); pldemu does not, so a ``fifo`` order, whose
    Orchestration submits until it blocks, holds every pending iteration's."""
    wanted = None if names is None else set(names)
    out: dict[str, None] = {}
    for f in program.functions:
        out.update({s.var.name: None for s, again in _creates(f.body.stmts, False)
                    if again and (wanted is None or s.var.name in wanted)})
    return tuple(out)


def _creates(stmts: Iterable[Stmt], again: bool) -> Iterator[tuple[Assign, bool]]:
    """Each ``tensor.create`` assignment of ``stmts`` and whether it runs again (inside a loop or a task)."""
    for s in stmts:
        if (isinstance(s, Assign) and isinstance(s.value, Call) and s.value.op is Op.TENSOR_CREATE
                and isinstance(s.var.type, TensorType)):
            yield s, again
        inner = again or isinstance(s, (For, While, Task))
        for body in stmt_bodies(s):
            yield from _creates(body.stmts, inner)


BIGGEST = 3
"""How many of the largest buffers a refusal names."""


def tile_bytes(program: Program) -> int:
    """The bytes of every tile variable a program's functions bind, once each: pldemu's interpreter keeps each
    variable's latest value until its function returns, so this bounds what the tiles hold at once (a
    program of one block per rank counts every rank's block: an over-estimate by up to the rank count)."""
    seen: dict[str, int] = {}
    for f in program.functions:
        for s in walk_stmts(f.body.stmts):
            var = getattr(s, "var", None)
            t = getattr(var, "type", None)
            if isinstance(t, TileType) and var is not None:
                seen[var.name] = math.prod(t.shape) * t.dtype.itemsize
    return sum(seen.values())


def _meminfo(field: str) -> int | None:
    """A ``/proc/meminfo`` field in bytes, or None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _sysconf_bytes(pages: str) -> int | None:
    try:
        return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated now without swapping (``MemAvailable``), or None."""
    found = _meminfo("MemAvailable")
    return found if found is not None else _sysconf_bytes("SC_AVPHYS_PAGES")


def total_memory() -> int | None:
    """The machine's physical memory in bytes (``MemTotal``), or None."""
    found = _meminfo("MemTotal")
    return found if found is not None else _sysconf_bytes("SC_PHYS_PAGES")


def check_fits(estimate: MemoryEstimate, force: bool = False, available: int | None = None,
               total: int | None = None) -> None:
    """Raise :class:`ResourceError` when ``estimate`` exceeds :data:`FIT_FRACTION` of the available
    memory (unless ``force``): :func:`check_bytes`."""
    check_bytes(estimate.total, f"the job needs {estimate.describe()}", force, available, total)


def check_bytes(needed: int, what: str, force: bool = False, available: int | None = None,
                total: int | None = None) -> None:
    """Raise :class:`ResourceError` (``what``, then why) when ``needed`` bytes exceed :data:`FIT_FRACTION` of
    the available memory, unless ``force``. The message says whether it could never fit this machine or only
    not beside what other processes hold now: the user's next step differs."""
    free = available_memory() if available is None else available
    if force or free is None or needed <= FIT_FRACTION * free:
        return
    whole = total_memory() if total is None else total
    if whole is None or needed > FIT_FRACTION * whole:
        where = f"this machine has {size_text(free)} available" + (f" ({size_text(whole)} in all)" if whole else "")
        advice = "use fewer ranks or smaller buffers, or --force to start it anyway"
    else:
        where = (f"this machine has {size_text(free)} available now: other processes hold the rest of its "
                 f"{size_text(whole)}")
        advice = "it would fit alone: run it when they end, or --force to start it anyway"
    raise ResourceError(f"{what}, but {where}; {advice}")


def size_text(n: float) -> str:
    """``n`` bytes as people read them (``5.9 GiB``, ``320 MiB``, ``12 KiB``)."""
    if n >= GIB:
        return f"{n / GIB:.1f} GiB"
    return f"{n / MIB:.0f} MiB" if n >= MIB else f"{n / 1024:.0f} KiB"


__all__ = [
    "INVARIANT_CELL_BYTES",
    "RACE_CELL_BYTES",
    "RANK_OVERHEAD",
    "RUN_COPIES",
    "MemoryEstimate",
    "ResourceError",
    "available_memory",
    "check_bytes",
    "check_copies",
    "check_fits",
    "created_tensors",
    "job_memory",
    "repeated_creates",
    "size_text",
    "tile_bytes",
    "total_memory",
]
