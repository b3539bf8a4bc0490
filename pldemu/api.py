"""pldemu as a library: run a program on N ranks from Python and get every rank's buffers back.

    import numpy as np
    import pldemu

    result = pldemu.launch("my.pld", 4, inputs={"x": lambda rank: np.full((2, 64), rank, np.float32)},
                           options=pldemu.RuntimeOptions(jitter_us=50, race_detect=True), timeout=60)
    result.expect({"x": np.full((2, 64), 6, np.float32)})   # AssertionError with #wrong rows

Arrays of every dtype travel both ways, ``ml_dtypes.bfloat16`` and the FP8 types included: inputs are
given as arrays of the buffer's dtype, and ``result.buffers`` holds arrays of the declared dtypes.
``expect_buffers={"y": "want"}`` is ``pldemu run --expect-buffer y=want``: every rank compares its
final buffer ``y`` with its final buffer ``want`` (a reference the program computed).

:func:`launch` spawns an isolated ``mpiexec`` job (``pldemu run`` under it, in its own session, killed
as a whole after ``timeout``) and never imports MPI in the calling process, so it is safe inside a
test runner or a notebook. Inputs go to the job and final buffers come back as ``.npy`` files in a
temporary directory (the layout of :mod:`pldemu.job.buffer_io`), the verdict as a JSON report:
nothing travels through argv but paths and flags.

A job that does not end cleanly raises :class:`JobError` (exit code, meaning, every rank's output),
unless ``check=False``, which returns the :class:`RunResult` whatever happened.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from pldemu.ir import Program, format_program
from pldemu.job.buffer_io import (
    RANK_DIR,
    BufferFileError,
    Mismatch,
    Tolerance,
    as_declared,
    buffer_name,
    compare,
)
from pldemu.job.flags import options_argv
from pldemu.job.launch import LOCAL, Placement
from pldemu.job.precheck import StaticBuffer, static_buffers
from pldemu.job.run_io import DataFlags, check_pair
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.truncation import Truncation

ArrayLike: TypeAlias = Any
PerRank: TypeAlias = ArrayLike | Sequence[ArrayLike] | Callable[[int], ArrayLike]
"""One buffer's input: the same array for every rank, a list indexed by rank, or ``f(rank)``."""
Inputs: TypeAlias = (Mapping[str, PerRank] | Sequence[Mapping[str, ArrayLike]]
                     | Callable[[int], Mapping[str, ArrayLike]])
"""Buffer name -> :data:`PerRank`; a list of ``{name: array}``, one per rank; or ``f(rank) -> {name: array}``."""

EXIT_MEANING = {
    0: "ok",
    1: "a check failed (wrong results, signal cells not 0 at rest, invariant violations, a truncating division "
       "or remainder whose value differs from floor semantics)",
    2: "bad input (refused before the job started)",
    3: "the job failed (deadlock, refused access, a rank crashed)",
    4: "races found",
    124: "the job ran longer than its timeout and was killed",
}
"""What ``RunResult.exit_code`` means (the README's exit-code table)."""

DEFAULT_TIMEOUT = 600.0
"""Seconds a job may take when ``launch`` is given no ``timeout``."""


class JobError(Exception):
    """A job that did not end with exit 0; ``result`` holds everything it left (output, buffers)."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        super().__init__(result.describe_failure())


@dataclass(frozen=True)
class RunResult:
    """What one :func:`launch` left behind.

    ``buffers[rank][name]``: every rank's final buffers (empty when the job failed before the end);
    ``ops``: op counts over all ranks; ``seconds``: each rank's run time; ``races`` /
    ``invariants`` / ``mismatches``: the reports, one line each; ``failures[rank]``: the message a
    failing rank wrote (a deadlock's wait-for report included); ``truncations``: every site where the
    device's truncating division or remainder (``tdiv`` / ``trem``) gave another value than floor
    semantics, once per site (:mod:`pldemu.runtime.truncation`; a failure, exit 1, unless
    ``RuntimeOptions.truncation_warn``); ``output``: everything the job
    printed (every rank, interleaved as it came); ``program_text``: the executed (lowered) program,
    whose ``FUNC:LINE`` locations the reports use.
    """

    ranks: int
    exit_code: int
    output: str
    wall_seconds: float
    buffers: tuple[Mapping[str, np.ndarray], ...] = ()
    ops: Mapping[str, int] = field(default_factory=dict)
    seconds: tuple[float, ...] = ()
    races: tuple[str, ...] = ()
    invariants: tuple[str, ...] = ()
    mismatches: tuple[str, ...] = ()
    failures: Mapping[int, str] = field(default_factory=dict)
    program_text: str = ""
    truncations: tuple[Truncation, ...] = ()

    @property
    def ok(self) -> bool:
        """The job exited 0."""
        return self.exit_code == 0

    @property
    def deadlock(self) -> str | None:
        """The first wait-for report a rank wrote, if the job ended in a deadlock."""
        return next((text for _, text in sorted(self.failures.items()) if "deadlock" in text.lower()), None)

    def expect(self, expected: Mapping[str, PerRank], *, rtol: float = 0.0, atol: float = 0.0) -> None:
        """Assert that every named buffer equals its expectation on every rank (exact, or within
        ``rtol``/``atol``; NaN equals NaN). Raises ``AssertionError`` with one ``#wrong`` line per
        buffer and rank (count, first differing index, both values)."""
        if not self.buffers:
            raise AssertionError(f"the job left no buffers to compare:\n{self.describe_failure()}")
        tol = Tolerance(rtol, atol)
        found: list[Mismatch] = []
        for rank, mine in enumerate(self.buffers):
            for name, want in expected.items():
                if name not in mine:
                    raise AssertionError(f"no buffer {name!r} (buffers: {', '.join(sorted(mine))})")
                m = compare(rank, name, mine[name], np.asarray(_for_rank(want, rank)), tol)
                if m is not None:
                    found.append(m)
        if found:
            rows = "\n".join(f"  {m.describe()}" for m in found)
            raise AssertionError(f"{len(found)} buffer(s) differ ({tol.describe()}):\n{rows}")

    def describe_failure(self) -> str:
        """Exit code, its meaning, the reports and the job's output (what a failing test shows)."""
        meaning = EXIT_MEANING.get(self.exit_code, "unexpected exit code")
        parts = [f"pldemu job on {self.ranks} ranks exited {self.exit_code}: {meaning}"]
        truncated = tuple(t.describe() for t in self.truncations)
        for title, lines in (("mismatches", self.mismatches), ("races", self.races),
                             ("invariant violations", self.invariants),
                             ("truncating division (the device's C truncation differs from floor semantics)",
                              truncated)):
            if lines:
                parts.append(f"{title}:\n" + "\n".join(f"  {line}" for line in lines))
        parts += [f"rank {r} failed:\n{text.rstrip()}" for r, text in sorted(self.failures.items())]
        parts.append("output of every rank:\n" + (self.output.rstrip() or "(none)"))
        return "\n".join(parts)


def launch(program: Program | str | os.PathLike[str], ranks: int, *, inputs: Inputs | None = None,
           options: RuntimeOptions | None = None, timeout: float | None = None, check: bool = True,
           iters: int = 1, lower: bool = True, placement: Placement | None = None,
           expect_buffers: Mapping[str, str] | Sequence[tuple[str, str]] = (), rtol: float = 0.0,
           atol: float = 0.0) -> RunResult:
    """Run ``program`` on ``ranks`` MPI ranks in an isolated ``mpiexec`` job and collect the result.

    ``program``: a :class:`~pldemu.ir.Program` or the path of a ``.pld`` / Python builder file (lowered
    unless ``lower=False``). ``inputs``: see :data:`Inputs`; each array must have its buffer's dtype and
    shape (checked here, before the job starts: ``ValueError``). ``options``: the runtime knobs (wait
    timeout, windows, schedules, races, invariants); without them the wait timeout is a third of
    ``timeout``, so a deadlock is reported before the job is killed. ``timeout``: seconds the whole job
    may take (default :data:`DEFAULT_TIMEOUT`). ``iters``: calls of the entry function back to back
    (``pldemu run --iters``). ``check``: raise :class:`JobError` unless the job exits 0.
    ``placement``: where the ranks run (:class:`pldemu.job.launch.Placement`, e.g.
    ``Placement(sim_hosts=(2, 2))``; default this machine); it must hold ``ranks`` ranks.
    ``expect_buffers``: ``{actual: expected}`` (or pairs), ``pldemu run --expect-buffer``: every rank
    compares its final buffer ``actual`` with its final buffer ``expected``, within ``rtol`` / ``atol``
    (exact by default; NaN equals NaN); a mismatch is exit 1, its rows in ``RunResult.mismatches``.
    Names, dtypes and shapes are checked here (``ValueError``).
    """
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive integer, got {ranks!r}")
    where = placement or LOCAL
    if where.ranks is not None and where.ranks != ranks:
        raise ValueError(f"{where.describe()} run {where.ranks} ranks, not {ranks}")
    limit = DEFAULT_TIMEOUT if timeout is None else float(timeout)
    opts = options if options is not None else RuntimeOptions(timeout=max(1.0, min(30.0, limit / 3)))
    pairs = tuple(expect_buffers.items() if isinstance(expect_buffers, Mapping) else expect_buffers)
    if (rtol or atol) and not pairs:
        raise ValueError("rtol / atol apply to expect_buffers (RunResult.expect takes its own)")
    with tempfile.TemporaryDirectory(prefix="pldemu-launch-") as tmp:
        work = Path(tmp)
        source, loaded = _program_file(program, work)
        # Lowered here only when needed (inputs, pairs, a bf16 / fp8 buffer to return): it costs an import.
        specs = functools.cache(functools.partial(_specs, loaded, lower, ranks))
        for pair in pairs:
            check_pair(pair, specs())
        data = DataFlags(inputs=None if inputs is None else work / "inputs", report=work / "report.json",
                         expect_buffer=pairs, rtol=rtol, atol=atol)
        argv = ["run", str(source), "-n", str(ranks), "--dump", str(work / "out"), *data.argv(),
                "--job-timeout", repr(limit), *options_argv(opts, "run")]
        if not lower:
            argv.append("--no-lower")
        if iters != 1:
            argv += ["--iters", str(iters)]
        if inputs is not None:
            _write_inputs(inputs, specs(), ranks, work / "inputs")
        result = _run(ranks, argv, limit, work, where, specs)
    if check and not result.ok:
        raise JobError(result)
    return result


def _program_file(program: Program | str | os.PathLike[str], work: Path) -> tuple[Path, Program]:
    from pldemu.ir.source import SourceError, load_source

    if isinstance(program, Program):
        path = work / f"{program.name}.pld"
        path.write_text(format_program(program))
        return path, program
    path = Path(program).resolve()
    try:
        return path, load_source(path)
    except SourceError as err:
        raise ValueError(str(err)) from None


def _specs(program: Program, lower: bool, ranks: int) -> dict[str, StaticBuffer]:
    if lower:
        from pldemu.lowering import lower_composite_ops

        program = lower_composite_ops(program)
    return static_buffers(program, ranks)


def _for_rank(value: PerRank, rank: int) -> ArrayLike:
    if callable(value):
        return value(rank)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return value[rank]
    return value


def _write_inputs(inputs: Inputs, specs: Mapping[str, StaticBuffer], ranks: int, root: Path) -> None:
    for rank in range(ranks):
        per_rank = _rank_inputs(inputs, rank)
        folder = root / RANK_DIR.format(rank=rank)
        folder.mkdir(parents=True)
        for name, value in per_rank.items():
            np.save(folder / f"{name}.npy", _input_array(name, value, specs, rank))


def _rank_inputs(inputs: Inputs, rank: int) -> Mapping[str, ArrayLike]:
    if callable(inputs):
        return inputs(rank)
    if isinstance(inputs, Mapping):
        return {name: _for_rank(value, rank) for name, value in inputs.items()}
    return inputs[rank]


def _input_array(name: str, value: ArrayLike, specs: Mapping[str, StaticBuffer], rank: int) -> np.ndarray:
    spec = specs.get(name)
    if spec is None:
        raise ValueError(f"inputs: the program has no buffer {name!r} (buffers: {', '.join(sorted(specs))})")
    # A plain Python value takes the buffer's dtype; an array must already have it (no silent cast).
    arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=spec.dtype)
    if arr.dtype != spec.dtype:
        raise ValueError(f"inputs: {name} for rank {rank} has dtype {arr.dtype}, the buffer is {spec.dtype}")
    if arr.shape != spec.shape:
        raise ValueError(f"inputs: {name} for rank {rank} has shape {list(arr.shape)}, the buffer is "
                         f"{list(spec.shape)}")
    return arr


def _run(ranks: int, argv: list[str], limit: float, work: Path, where: Placement,
         specs: Callable[[], Mapping[str, StaticBuffer]]) -> RunResult:
    from pldemu.job.launch import LOCAL, pldemu_argv, run_job
    from pldemu.pool.client import current_pool

    log = work / "output.txt"
    start = time.monotonic()
    pool = current_pool() if where == LOCAL else None
    with log.open("w") as out:
        # The job's own --job-timeout is not relied on: mpiexec is killed from here as a whole.
        if pool is not None:
            code = pool.run(ranks, argv, limit + 5.0, stdout=out, stderr=out)
        else:
            code = run_job(ranks, pldemu_argv(argv), limit + 5.0, stdout=out, stderr=out, placement=where)
    code = code if 0 <= code <= 255 else 3
    wall = time.monotonic() - start
    return _collect(ranks, code, log.read_text(errors="replace"), wall, work, specs)


def _declared(arr: np.ndarray, name: str, specs: Callable[[], Mapping[str, StaticBuffer]]) -> np.ndarray:
    """A dumped buffer in its declared dtype (``np.save`` wrote a bf16 / fp8 one as void bytes)."""
    if arr.dtype.kind != "V" or name not in specs():
        return arr
    return as_declared(arr, specs()[name].dtype)


def _collect(ranks: int, code: int, output: str, wall: float, work: Path,
             specs: Callable[[], Mapping[str, StaticBuffer]]) -> RunResult:
    report_file = work / "report.json"
    report: dict[str, Any] = json.loads(report_file.read_text()) if report_file.is_file() else {}
    failures = {r: p.read_text(errors="replace") for r in range(ranks)
                if (p := report_file.with_suffix(f".rank{r}.txt")).is_file()}
    out = work / "out"
    buffers: tuple[dict[str, np.ndarray], ...] = ()
    if report:
        buffers = tuple({buffer_name(p): _declared(np.load(p), buffer_name(p), specs)
                         for p in sorted((out / RANK_DIR.format(rank=r)).glob("*.npy"))}
                        for r in range(ranks))
    text = (out / "program.pld").read_text() if (out / "program.pld").is_file() else ""
    return RunResult(ranks, code, output, wall, buffers, report.get("ops", {}), tuple(report.get("seconds", ())),
                     tuple(report.get("races", ())), tuple(report.get("invariants", ())),
                     tuple(report.get("mismatches", ())), failures, text,
                     tuple(Truncation.from_json(t) for t in report.get("truncations", ())))


__all__ = ["EXIT_MEANING", "BufferFileError", "Inputs", "JobError", "PerRank", "RunResult", "launch"]
