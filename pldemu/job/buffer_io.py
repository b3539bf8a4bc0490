"""Buffers in and out of a run as ``.npy`` files: inputs before it, expectations after it.

A directory of arrays names buffers by file name: ``DIR/rankR/NAME.npy`` holds rank R's buffer NAME,
``DIR/NAME.npy`` the same array for every rank (a per-rank file wins over the shared one). Both
``pldemu run --inputs/--expect`` and :func:`pldemu.launch` use this one layout, and every check of a
directory happens before any MPI traffic: :func:`scan` reads only the ``.npy`` headers and checks each
file's buffer name, dtype and shape against the program's declarations at the job's rank count.

**Every dtype both ways.** ``.npy`` has no descriptor for the ``ml_dtypes`` types (BF16, FP8-E4M3FN,
FP8-E8M0): ``np.save`` of such an array writes a void ``|V2`` / ``|V1`` descriptor. A void file (no
fields) whose item size is the buffer's is read as the buffer's declared dtype (:func:`as_declared`),
and so is ``NAME.DTYPE.npy`` holding the bit patterns as unsigned integers of that size
(``x.bf16.npy``: uint16; the form older ``--dump`` runs wrote); a byte-swapped file of the buffer's own
dtype is converted. ``--dump`` writes ``NAME.npy`` with ``np.save`` of the buffer as it is, so a dump
is accepted back unchanged by ``--inputs`` and ``--expect``.

:func:`compare` is the one judge of "final buffer versus expected array" (exact, or within
``rtol``/``atol`` like ``numpy.isclose``; NaN equals NaN): the CLI prints its verdict as
``#wrong`` rows, the Python API raises it as an assertion with the same text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pldemu.ir import DType
from pldemu.job.precheck import StaticBuffer
from pldemu.mismatch import EXACT, Mismatch, Tolerance
from pldemu.mismatch import compare as compare_buffers

if TYPE_CHECKING:
    import numpy as np

RANK_DIR = "rank{rank}"
"""Sub-directory of a per-rank file (``DIR/rank3/x.npy``), also the layout of ``--dump``."""


class BufferFileError(ValueError):
    """A directory of buffer files does not fit the program (reported as a usage error, exit 2)."""


@dataclass(frozen=True)
class BufferFiles:
    """The files of one directory, checked: ``files[rank][name]`` is the path holding that buffer."""

    root: Path
    files: tuple[Mapping[str, Path], ...]
    dtypes: Mapping[str, np.dtype] = field(default_factory=dict)
    """The declared dtype of every buffer with a file: what :meth:`load` gives each array."""

    def names(self) -> set[str]:
        """Every buffer some rank has a file for."""
        return {name for per_rank in self.files for name in per_rank}

    def load(self, rank: int) -> dict[str, np.ndarray]:
        """Rank ``rank``'s arrays (read now; the caller copies them into its buffers)."""
        import numpy as np

        return {name: as_declared(np.load(path, allow_pickle=False), self.dtypes[name], file_tag(path))
                for name, path in self.files[rank].items()}


def scan(root: str | os.PathLike[str], specs: Mapping[str, StaticBuffer], nranks: int, *, what: str) -> BufferFiles:
    """Check the directory ``root`` against ``specs`` for a job of ``nranks`` ranks.

    ``what`` names the option in messages (``--inputs``). Raises :class:`BufferFileError` with one line
    naming the file and the problem: a missing directory, a file for no declared buffer, a rank
    directory beyond the job, an unreadable file, a dtype or shape that differs from the declaration.
    """
    base = Path(root)
    if not base.is_dir():
        raise BufferFileError(f"{what} {root}: no such directory")
    shared = _npy_files(base, what)
    ranks = _rank_dirs(base, nranks, what)
    files: list[dict[str, Path]] = []
    for rank in range(nranks):
        mine = dict(shared)
        mine.update(_npy_files(ranks[rank], what) if rank in ranks else {})
        for name, path in mine.items():
            _check_file(path, name, specs, what)
        files.append(mine)
    result = BufferFiles(base, tuple(files), {name: specs[name].dtype for per_rank in files for name in per_rank})
    if not result.names():
        raise BufferFileError(f"{what} {root}: no NAME.npy or rankR/NAME.npy file in it")
    for rank, mine in enumerate(files):
        missing = sorted(result.names() - set(mine))
        if missing:
            raise BufferFileError(f"{what} {base / RANK_DIR.format(rank=rank) / (missing[0] + '.npy')}: missing "
                                  f"(another rank has {missing[0]}.npy; give every rank its file, or "
                                  f"{base / (missing[0] + '.npy')} for all)")
    return result


def _npy_files(folder: Path, what: str) -> dict[str, Path]:
    """Buffer name -> file: ``NAME.npy``, or ``NAME.DTYPE.npy`` (bit patterns of a declared dtype)."""
    out: dict[str, Path] = {}
    for p in sorted(folder.glob("*.npy")):
        if not p.is_file():
            continue
        name = buffer_name(p)
        if name in out:
            raise BufferFileError(f"{what} {p}: {out[name].name} holds buffer {name} too; keep one of them")
        out[name] = p
    return out


def buffer_name(path: Path) -> str:
    """The buffer a file is for: ``x.npy`` and ``x.bf16.npy`` are both buffer ``x``."""
    name, dot, tag = path.stem.rpartition(".")
    return name if dot and tag in _TAGS else path.stem


def file_tag(path: Path) -> str | None:
    """The dtype a ``NAME.DTYPE.npy`` file names (``bf16``), or None."""
    name = buffer_name(path)
    return path.stem[len(name) + 1:] if path.stem != name else None


_TAGS = frozenset(d.value for d in DType)
"""The ``NAME.DTYPE.npy`` tags: the IR's dtype names (``bf16``, ``fp8e4m3fn``, ``fp8e8m0``, ...)."""


def as_declared(arr: np.ndarray, dtype: np.dtype, tag: str | None = None) -> np.ndarray:
    """``arr`` (as ``np.load`` gave it) as an array of the declared ``dtype``, or a ``ValueError``.

    The same dtype passes; a byte-swapped one is converted; a void array without fields whose item
    size is ``dtype``'s (``np.save`` of an ``ml_dtypes`` array) is viewed as ``dtype``; with ``tag``
    (the file said ``NAME.DTYPE.npy`` and DTYPE is the buffer's) unsigned bit patterns of that size too."""
    if arr.dtype == dtype:
        return arr
    same_size = arr.dtype.itemsize == dtype.itemsize
    if same_size and arr.dtype.kind == "V" and arr.dtype.names is None and arr.dtype.subdtype is None:
        return arr.view(dtype)
    if tag is not None and same_size and arr.dtype.kind == "u":
        return arr.astype(arr.dtype.newbyteorder("="), copy=False).view(dtype)
    if arr.dtype.byteorder not in "=|" and arr.dtype.newbyteorder("=") == dtype:
        return arr.astype(dtype)
    hint = ""
    if same_size and arr.dtype.kind in "ui" and dtype.kind == "V":
        hint = (f" (bit patterns? name the file NAME.{_tag_of(dtype)}.npy, or save the values: "
                f"np.save(path, values.astype(ml_dtypes.{dtype.name}))")
    raise ValueError(f"dtype {arr.dtype} but the buffer is {dtype}{hint}")


def _tag_of(dtype: np.dtype) -> str:
    return next(d.value for d in DType if d.np == dtype)


def _rank_dirs(base: Path, nranks: int, what: str) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for sub in sorted(base.glob("rank*")):
        suffix = sub.name[len("rank"):]
        if not sub.is_dir() or not suffix.isdigit():
            continue
        rank = int(suffix)
        if rank >= nranks:
            raise BufferFileError(f"{what} {sub}: the job has {nranks} ranks (0..{nranks - 1}), no rank {rank}")
        out[rank] = sub
    return out


def _check_file(path: Path, name: str, specs: Mapping[str, StaticBuffer], what: str) -> None:
    spec = specs.get(name)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        raise BufferFileError(f"{what} {path}: the program has no buffer {name!r} (buffers: {known})")
    import numpy as np  # a file to read: the program's data needs numpy from here on

    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)  # the header only: no data read
    except (OSError, ValueError) as err:
        raise BufferFileError(f"{what} {path}: not a readable .npy array ({err})") from None
    tag = file_tag(path)
    if tag is not None and DType(tag).np != spec.dtype:
        raise BufferFileError(f"{what} {path}: the file name says {tag} but buffer {name} is {spec.dtype}")
    try:
        as_declared(arr[:0] if arr.ndim else arr, spec.dtype, tag)
    except ValueError as err:
        raise BufferFileError(f"{what} {path}: {str(err).replace('the buffer', f'buffer {name}')}") from None
    if tuple(arr.shape) != spec.shape:
        raise BufferFileError(f"{what} {path}: shape {list(arr.shape)} but buffer {name} is {list(spec.shape)}")


def compare(rank: int, name: str, got: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT) -> Mismatch | None:
    """``None`` when ``got`` equals ``expected`` within ``tol``, else the :class:`Mismatch`.

    A shape difference counts every element wrong. Floats compare in float64 (bf16 / fp8 included);
    NaN equals NaN, so a poisoned element that the expectation also leaves NaN is not wrong."""
    m = compare_buffers(expected, got, what=name, tol=tol, nan_equal=True, flat_same_size=False, rank=rank)
    return None if m.ok else m


def compare_all(rank: int, buffers: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                tol: Tolerance = EXACT) -> list[Mismatch]:
    """Every expected buffer of one rank compared with its final contents."""
    found = (compare(rank, name, buffers[name], want, tol) for name, want in sorted(expected.items()))
    return [m for m in found if m is not None]


def mismatch_report(mismatches: Sequence[Mismatch], checked: int, tol: Tolerance) -> str:
    """The verdict of an expectation check as printed by ``pldemu run --expect`` (one line per wrong
    buffer and rank, then a total)."""
    if not mismatches:
        return f"  expected buffers: all {checked} match ({tol.describe()})"
    lines = [f"  expected buffers: {len(mismatches)} of {checked} differ ({tol.describe()}):"]
    lines += [f"    {m.describe()}" for m in mismatches]
    return "\n".join(lines)


__all__ = [
    "EXACT",
    "RANK_DIR",
    "BufferFileError",
    "BufferFiles",
    "Mismatch",
    "Tolerance",
    "as_declared",
    "buffer_name",
    "compare",
    "compare_all",
    "mismatch_report",
    "scan",
]
