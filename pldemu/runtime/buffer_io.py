"""Buffers in and out of a run as ``.npy`` files: inputs before it, expectations after it.

A directory of arrays names buffers by file name: ``DIR/rankR/NAME.npy`` holds rank R's buffer NAME,
``DIR/NAME.npy`` the same array for every rank (a per-rank file wins over the shared one). Both
``pldemu run --inputs/--expect`` and :func:`pldemu.launch` use this one layout, and every check of a
directory happens before any MPI traffic: :func:`scan` reads only the ``.npy`` headers and checks each
file's buffer name, dtype and shape against the program's declarations at the job's rank count.

:func:`compare` is the one judge of "final buffer versus expected array" (exact, or within
``rtol``/``atol`` like ``numpy.isclose``; NaN equals NaN): the CLI prints its verdict as
``#wrong`` rows, the Python API raises it as an assertion with the same text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pldemu.npdtypes import BFLOAT16
from pldemu.runtime.precheck import StaticBuffer


def load_npy(path: Path, mmap: bool = False) -> np.ndarray:
    """``np.load`` of a buffer file. ``.npy`` spells ml_dtypes' bfloat16 as the raw ``|V2`` (numpy has
    no name for it): read back, that is BF16, the one 2-byte raw type pldemu holds."""
    arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2 and arr.dtype.names is None:
        return arr.view(BFLOAT16)
    return arr


BF16_DUMP = ".bf16"
"""A BF16 buffer's dump is ``NAME.bf16.npy`` holding its uint16 bit patterns (``pldemu run --dump``)."""


def read_dump(folder: Path) -> dict[str, np.ndarray]:
    """One rank's ``--dump`` folder: buffer name -> final array (BF16 dumps back as bfloat16)."""
    out: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*.npy")):
        name = path.stem
        if name.endswith(BF16_DUMP):
            out[name[: -len(BF16_DUMP)]] = np.load(path, allow_pickle=False).view(BFLOAT16)
        else:
            out[name] = load_npy(path)
    return out

RANK_DIR = "rank{rank}"
"""Sub-directory of a per-rank file (``DIR/rank3/x.npy``), also the layout of ``--dump``."""


class BufferFileError(ValueError):
    """A directory of buffer files does not fit the program (reported as a usage error, exit 2)."""


@dataclass(frozen=True)
class BufferFiles:
    """The files of one directory, checked: ``files[rank][name]`` is the path holding that buffer."""

    root: Path
    files: tuple[Mapping[str, Path], ...]

    def names(self) -> set[str]:
        """Every buffer some rank has a file for."""
        return {name for per_rank in self.files for name in per_rank}

    def load(self, rank: int) -> dict[str, np.ndarray]:
        """Rank ``rank``'s arrays (read now; the caller copies them into its buffers)."""
        return {name: load_npy(path) for name, path in self.files[rank].items()}


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
    result = BufferFiles(base, tuple(files))
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
    return {p.stem: p for p in sorted(folder.glob("*.npy")) if p.is_file()}


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
    try:
        arr = load_npy(path, mmap=True)  # the header only: no data read
    except (OSError, ValueError) as err:
        raise BufferFileError(f"{what} {path}: not a readable .npy array ({err})") from None
    if arr.dtype != spec.dtype:
        raise BufferFileError(f"{what} {path}: dtype {arr.dtype} but buffer {name} is {spec.dtype}")
    if tuple(arr.shape) != spec.shape:
        raise BufferFileError(f"{what} {path}: shape {list(arr.shape)} but buffer {name} is {list(spec.shape)}")


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
    """One buffer of one rank that differs from its expectation: how many elements, the first one."""

    rank: int
    name: str
    wrong: int
    total: int
    index: tuple[int, ...]
    got: str
    expected: str

    def describe(self) -> str:
        at = "[" + ", ".join(map(str, self.index)) + "]"
        return (f"rank {self.rank} {self.name}: #wrong {self.wrong}/{self.total}, first at {at}: "
                f"got {self.got}, expected {self.expected}")


def compare(rank: int, name: str, got: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT) -> Mismatch | None:
    """``None`` when ``got`` equals ``expected`` within ``tol``, else the :class:`Mismatch`.

    A shape difference counts every element wrong. Floats compare in float64 (bf16 / fp8 included);
    NaN equals NaN, so a poisoned element that the expectation also leaves NaN is not wrong."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return Mismatch(rank, name, max(got.size, expected.size), max(got.size, expected.size), (),
                        f"shape {list(got.shape)}", f"shape {list(expected.shape)}")
    bad = ~_close(got, expected, tol)
    wrong = int(bad.sum())
    if wrong == 0:
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return Mismatch(rank, name, wrong, int(got.size), index, _show(got[index]), _show(expected[index]))


def _close(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> np.ndarray:
    numeric = got.dtype.kind in "fc" or expected.dtype.kind in "fc" or got.dtype.kind == "V"
    if not numeric:
        if tol == EXACT:
            return np.asarray(got == expected)
        return np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol.rtol, atol=tol.atol)
    a, b = got.astype(np.float64), expected.astype(np.float64)
    if tol == EXACT:
        return np.asarray((a == b) | (np.isnan(a) & np.isnan(b)))
    return np.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True)


def _show(value: object) -> str:
    return repr(value.item()) if isinstance(value, np.generic) else repr(value)


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
    "BF16_DUMP",
    "EXACT",
    "RANK_DIR",
    "BufferFileError",
    "BufferFiles",
    "Mismatch",
    "Tolerance",
    "compare",
    "compare_all",
    "load_npy",
    "mismatch_report",
    "read_dump",
    "scan",
]
