"""``pldemu run``'s data flags: ``--inputs DIR``, ``--expect DIR``, ``--expect-buffer ACTUAL=EXPECTED``,
``--rtol/--atol``, ``--reload-inputs`` and the machine-readable ``--report FILE.json``.

``--expect-buffer`` is for a program that computes its own reference: every rank compares its final
buffer ACTUAL with its final buffer EXPECTED (the same judge and tolerance as ``--expect``, the same
``#wrong`` rows, exit 1 on a mismatch); the names, dtypes and shapes are checked before the job.

One definition each: :func:`add_io_arguments` adds them to the parser, :func:`io_argv` forwards them
to the spawned job, :func:`job_io` checks both directories against the program at the job's rank
count (before any MPI traffic: the launcher calls it, and so does every rank) and returns the
:class:`JobIO` the run applies: :meth:`JobIO.load` before the first call (and before every call with
``--reload-inputs``), :meth:`JobIO.expected` after the last one. The file layout and the comparison
are :mod:`pldemu.job.buffer_io`'s.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pldemu.job.buffer_io import (
    EXACT,
    BufferFileError,
    BufferFiles,
    Mismatch,
    Tolerance,
    compare,
    compare_all,
    mismatch_report,
    scan,
)
from pldemu.job.outputs import output_file
from pldemu.job.precheck import StaticBuffer, static_buffers

if TYPE_CHECKING:
    import numpy as np

    from pldemu.ir import Program


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _buffer_pair(text: str) -> tuple[str, str]:
    actual, sep, expected = text.partition("=")
    if not sep or not actual.isidentifier() or not expected.isidentifier():
        raise argparse.ArgumentTypeError(f"expected ACTUAL=EXPECTED (two buffer names), got {text!r}")
    return actual, expected


def add_io_arguments(parser: argparse.ArgumentParser) -> None:
    """The data flags of ``pldemu run`` (see the module docstring)."""
    g = parser.add_argument_group("inputs and expected outputs")
    g.add_argument("--inputs", metavar="DIR", default=None,
                   help="load DIR/rankR/NAME.npy (or DIR/NAME.npy for every rank) into buffer NAME before the "
                        "run; dtype and shape must match the declaration")
    g.add_argument("--reload-inputs", action="store_true",
                   help="with --iters: fence (MPI barrier) and reload the inputs before every call, not only "
                        "the first")
    g.add_argument("--expect", metavar="DIR", default=None,
                   help="compare the final buffers with DIR/rankR/NAME.npy (or DIR/NAME.npy); #wrong per buffer "
                        "and rank, exit 1 on a mismatch")
    g.add_argument("--expect-buffer", type=_buffer_pair, action="append", default=[], metavar="ACTUAL=EXPECTED",
                   help="on every rank, compare final buffer ACTUAL with final buffer EXPECTED (a reference the "
                        "program computed); #wrong per pair and rank, exit 1 on a mismatch; repeatable")
    g.add_argument("--rtol", type=_tolerance, default=0.0, metavar="R",
                   help="relative tolerance of --expect / --expect-buffer (default 0: exact; NaN equals NaN)")
    g.add_argument("--atol", type=_tolerance, default=0.0, metavar="A",
                   help="absolute tolerance of --expect / --expect-buffer")
    g.add_argument("--report", metavar="FILE.json", default=None,
                   help="write the run's result as JSON (ranks, time, ops, races, invariants, mismatches, exit "
                        "code); a failing rank writes its message to FILE.rankR.txt")


@dataclass(frozen=True)
class DataFlags:
    """The data flags of one run as values: what the parser gave, or what :func:`pldemu.launch` was
    given. :meth:`argv` is the one spelling of them for a spawned job."""

    inputs: str | os.PathLike[str] | None = None
    expect: str | os.PathLike[str] | None = None
    report: str | os.PathLike[str] | None = None
    expect_buffer: tuple[tuple[str, str], ...] = ()
    reload_inputs: bool = False
    rtol: float = 0.0
    atol: float = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DataFlags:
        return cls(args.inputs, args.expect, args.report, tuple(args.expect_buffer), args.reload_inputs,
                   args.rtol, args.atol)

    def argv(self) -> list[str]:
        """The flags as the spawned job gets them (absolute paths)."""
        argv: list[str] = []
        for flag, value in (("--inputs", self.inputs), ("--expect", self.expect), ("--report", self.report)):
            if value is not None:
                argv += [flag, str(Path(value).resolve())]
        for actual, expected in self.expect_buffer:
            argv += ["--expect-buffer", f"{actual}={expected}"]
        if self.reload_inputs:
            argv.append("--reload-inputs")
        if self.rtol:
            argv += ["--rtol", repr(self.rtol)]
        if self.atol:
            argv += ["--atol", repr(self.atol)]
        return argv


def io_argv(args: argparse.Namespace) -> list[str]:
    """The data flags as the spawned job gets them (absolute paths)."""
    return DataFlags.from_args(args).argv()


@dataclass(frozen=True)
class JobIO:
    """The checked data flags of one run."""

    inputs: BufferFiles | None = None
    expect: BufferFiles | None = None
    tolerance: Tolerance = EXACT
    reload: bool = False
    report: Path | None = None
    pairs: tuple[tuple[str, str], ...] = ()
    """``--expect-buffer``: (actual, expected) buffer names, compared on every rank."""

    @property
    def checks(self) -> bool:
        """True when the run compares any final buffer (``--expect`` or ``--expect-buffer``)."""
        return self.expect is not None or bool(self.pairs)

    def load(self, rank: int, local: Callable[[str], np.ndarray]) -> None:
        """Copy rank ``rank``'s input arrays into its buffers (``local(name)`` is the buffer)."""
        if self.inputs is not None:
            for name, arr in self.inputs.load(rank).items():
                local(name)[...] = arr

    def expected(self, rank: int, local: Callable[[str], np.ndarray]) -> tuple[int, list[Mismatch]]:
        """(buffers checked, mismatches) of rank ``rank``'s final buffers against ``--expect`` and
        ``--expect-buffer``."""
        want = {} if self.expect is None else self.expect.load(rank)
        found = compare_all(rank, {name: local(name) for name in want}, want, self.tolerance)
        for actual, expected in self.pairs:
            m = compare(rank, f"{actual} (vs {expected})", local(actual), local(expected), self.tolerance)
            found += [] if m is None else [m]
        return len(want) + len(self.pairs), found

    def failure_file(self, rank: int) -> Path | None:
        """Where a failing rank writes its message (``--report``'s sibling), or None."""
        return None if self.report is None else self.report.with_suffix(f".rank{rank}.txt")


NO_IO = JobIO()
"""No data flags given."""


def job_io(args: argparse.Namespace, program: Program, nranks: int) -> JobIO:
    """Check the data flags against ``program`` at ``nranks`` ranks; :class:`BufferFileError` if unusable."""
    if args.reload_inputs and (args.inputs is None or args.iters == 1):
        raise BufferFileError("--reload-inputs needs --inputs DIR and --iters K with K > 1")
    if (args.rtol or args.atol) and args.expect is None and not args.expect_buffer:
        raise BufferFileError("--rtol/--atol apply to --expect DIR or --expect-buffer ACTUAL=EXPECTED: give one")
    specs = static_buffers(program, nranks)
    pairs = tuple(args.expect_buffer)
    for pair in pairs:
        check_pair(pair, specs)
    inputs = None if args.inputs is None else scan(args.inputs, specs, nranks, what="--inputs")
    expect = None if args.expect is None else scan(args.expect, specs, nranks, what="--expect")
    report = None if args.report is None else output_file(args.report, "--report")
    return JobIO(inputs, expect, Tolerance(args.rtol, args.atol), args.reload_inputs, report, pairs)


def check_pair(pair: tuple[str, str], specs: Mapping[str, StaticBuffer]) -> None:
    """Refuse (:class:`BufferFileError`) an ``--expect-buffer ACTUAL=EXPECTED`` pair that cannot be
    compared: an unknown name, a dtype or shape that differs, a buffer with itself."""
    flag = f"--expect-buffer {pair[0]}={pair[1]}"
    for name in pair:
        if name not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise BufferFileError(f"{flag}: the program has no buffer {name!r} (buffers: {known})")
    a, b = specs[pair[0]], specs[pair[1]]
    da, db = a.element.numpy_name, b.element.numpy_name
    if a.shape != b.shape or da != db:
        raise BufferFileError(f"{flag}: {pair[0]} is {da}{list(a.shape)} but {pair[1]} is {db}{list(b.shape)} "
                              "(the same dtype and shape are compared)")
    if pair[0] == pair[1]:
        raise BufferFileError(f"{flag}: a buffer compared with itself always matches")


def expectation_summary(io: JobIO, checked: int, mismatches: Sequence[Mismatch]) -> str:
    """The ``--expect`` verdict as printed under the run's report."""
    return mismatch_report(mismatches, checked, io.tolerance)


def write_report(path: Path, data: Mapping[str, Any]) -> None:
    """Write the ``--report`` JSON atomically (a reader never sees half a file)."""
    import json

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


__all__ = ["NO_IO", "DataFlags", "JobIO", "add_io_arguments", "check_pair", "expectation_summary", "io_argv", "job_io", "write_report"]
