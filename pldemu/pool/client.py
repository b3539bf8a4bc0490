"""The launcher side of warm jobs (never imports MPI): :class:`JobPool` and the pool in effect.

:func:`pldemu.launch` hands its run to :func:`current_pool` when one is in effect (``with
use_pool(pool):``) and the ranks run on this machine; ``pldemu pytest`` puts one around every test of
a session. What the caller gets is what a job of its own gives: the exit code, the ranks' output
(grouped by rank, stdout then stderr), the files the run wrote. A run that does not end cleanly on
every rank ends its job. When the job ended the way pldemu ends a failed job (a deadlock, a refused
access: the ranks left their failures and MPI_Abort gave one of the documented codes), the caller
gets that run's output, the failures once each, and the code, as from a job of its own; anything
else (a crash, a refusal on the ranks, codes that differ) is run again in a job of its own
(:func:`pldemu.job.launch.run_job`). The pool starts a new job for the next run.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pldemu.job.launch import (
    DOCUMENTED_EXITS,
    LOCAL,
    MPI_ABORT_CHATTER,
    PID_DIR_VAR,
    POOL_VAR,
    TIMED_OUT,
    job_env,
    kill_group,
    mpiexec_command,
    pldemu_argv,
    read_failures,
    report_failures,
    report_timeout,
    run_job,
)

CLEAN_EXITS = (0, 1, 4)
"""Exit codes after which every rank is still in step and MPI still initialised: the job serves on."""

REPLY = "PLDEMU-POOL-CODES"
"""The word that starts rank 0's answer to a request (then the JSON list of every rank's code)."""

MAX_RANKS = 32
"""Ranks the pool keeps alive at once, over all its jobs (one job per rank count; the least recently
used is retired first). A test suite visits its rank counts in turn (1-5 for each program, say), so
every count it uses should fit: an idle rank sleeps and costs only its memory."""

CLOSE_GRACE = 10.0
"""Seconds a pool job may take to end after its input closed before it is killed."""


@dataclass
class PoolStats:
    """What a pool did: runs served warm, jobs started, runs that went to a job of their own."""

    served: int = 0
    started: int = 0
    alone: int = 0


@dataclass
class _Job:
    n: int
    proc: subprocess.Popen[bytes]
    folder: Path
    pending: bytes = b""
    runs: Iterator[int] = field(default_factory=itertools.count)


class JobPool:
    """One warm ``mpiexec`` job per rank count on this machine, each serving runs in turn.

    :meth:`run` has :func:`~pldemu.job.launch.run_job`'s contract for ``pldemu ARGS`` on this machine.
    Thread-safe (one run at a time); :meth:`close` ends every job (also on leaving ``with``).
    """

    def __init__(self, max_ranks: int = MAX_RANKS) -> None:
        self.max_ranks = max_ranks
        self.stats = PoolStats()
        self._jobs: OrderedDict[int, _Job] = OrderedDict()
        self._lock = threading.Lock()
        self._folder = Path(tempfile.mkdtemp(prefix="pldemu-pool-"))
        self._closed = False

    def __enter__(self) -> JobPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, n: int, args: Sequence[str], timeout: float | None, *, stdout: IO[Any],
            stderr: IO[Any]) -> int:
        """``pldemu ARGS`` on ``n`` ranks in the warm job of ``n`` (started if need be), its output to
        ``stdout`` / ``stderr``; the exit code as :func:`~pldemu.job.launch.run_job` returns it."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job pool is closed")
            job = self._job(n)
            folder = job.folder / f"run{next(job.runs)}"
            folder.mkdir()
            start = time.monotonic()
            deadline = None if timeout is None else start + timeout
            try:
                codes = self._ask(job, {"argv": list(args), "folder": str(folder), "cwd": os.getcwd()}, deadline)
            except BaseException:
                self._retire(n)
                raise
            if codes == TIMED_OUT:
                self._retire(n)
                _copy_output(folder, n, stdout, stderr)
                report_timeout(n, timeout, time.monotonic() - start, stderr)
                return TIMED_OUT
            if isinstance(codes, list) and len(set(codes)) == 1 and codes[0] in CLEAN_EXITS:
                self.stats.served += 1
                _copy_output(folder, n, stdout, stderr)
                shutil.rmtree(folder, ignore_errors=True)
                return codes[0]
            failed = self._failed_job(job, folder, stdout, stderr) if codes is None else None
            self._retire(n)
            if failed is not None:
                self.stats.served += 1
                return failed
        self.stats.alone += 1
        return run_job(n, pldemu_argv(args), timeout, stdout=stdout, stderr=stderr)

    def _failed_job(self, job: _Job, folder: Path, stdout: IO[Any], stderr: IO[Any]) -> int | None:
        """The exit code of a job that pldemu's abort ended during this run, with the run's output and
        the ranks' failures written out; None when the job ended some other way (run it alone)."""
        try:
            rc = job.proc.wait(timeout=CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            return None
        kill_group(job.proc, grace=5.0, marker=str(job.folder / "pids"))  # ranks mpiexec left behind: their notes are final
        if rc == 0 or rc not in DOCUMENTED_EXITS or not read_failures(job.folder / "pids"):
            return None
        _copy_output(folder, n=job.n, stdout=stdout, stderr=stderr)
        report_failures(job.folder / "pids", stderr)
        return rc

    def cpu_seconds(self) -> float:
        """User + system seconds the processes of the live jobs (``mpiexec`` and the ranks) have used so
        far (Linux ``/proc``; 0 elsewhere): a warm run's CPU is the difference across it."""
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = 0
        for pid in (*(job.proc.pid for job in self._jobs.values()), *self.rank_pids()):
            with suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return total / ticks

    def rank_pids(self) -> list[int]:
        """The processes of the live jobs' ranks, as their pid files say."""
        out: list[int] = []
        for job in self._jobs.values():
            texts = [p.read_text() for p in (job.folder / "pids").glob("rank*.pid")]
            out += [int(text) for text in texts if text.isdigit()]
        return out

    def close(self) -> None:
        """End every pool job (its input closes; killed after :data:`CLOSE_GRACE`); idempotent."""
        with self._lock:
            self._closed = True
            for n in list(self._jobs):
                self._retire(n, CLOSE_GRACE)
            shutil.rmtree(self._folder, ignore_errors=True)

    def _job(self, n: int) -> _Job:
        job = self._jobs.get(n)
        if job is not None and job.proc.poll() is None:
            self._jobs.move_to_end(n)
            return job
        if job is not None:
            self._retire(n)
        while self._jobs and sum(self._jobs) + n > self.max_ranks:
            self._retire(next(iter(self._jobs)))
        folder = Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=self._folder))
        (folder / "pids").mkdir()
        argv = [sys.executable, "-m", "mpi4py", "-m", "pldemu.pool.server"]
        with open(folder / "job.err", "wb") as err:
            proc = subprocess.Popen(mpiexec_command(n, argv, LOCAL), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err, start_new_session=True,
                                    env=job_env({PID_DIR_VAR: str(folder / "pids"), POOL_VAR: "1"},
                                                local_ranks=LOCAL.local_ranks(n)))
        self._jobs[n] = job = _Job(n, proc, folder)
        self.stats.started += 1
        return job

    def _ask(self, job: _Job, request: dict[str, Any], deadline: float | None) -> list[int] | int | None:
        """Send ``request``; every rank's exit code, :data:`TIMED_OUT` after ``deadline``, or None
        when the job ended without an answer."""
        assert job.proc.stdin is not None and job.proc.stdout is not None
        try:
            job.proc.stdin.write(json.dumps(request).encode() + b"\n")
            job.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return _answer(job, deadline)

    def _retire(self, n: int, grace: float = 0.0) -> None:
        job = self._jobs.pop(n, None)
        if job is None:
            return
        if grace > 0 and job.proc.stdin is not None:
            with suppress(OSError):
                job.proc.stdin.close()  # end of input: the ranks leave their loop and finalise MPI
            with suppress(subprocess.TimeoutExpired):
                job.proc.wait(timeout=grace)
        kill_group(job.proc, grace=5.0, marker=str(job.folder / "pids"))
        for pipe in (job.proc.stdin, job.proc.stdout):
            with suppress(OSError):
                if pipe is not None:
                    pipe.close()
        with suppress(subprocess.TimeoutExpired):
            job.proc.wait(timeout=5.0)
        shutil.rmtree(job.folder, ignore_errors=True)


def _answer(job: _Job, deadline: float | None) -> list[int] | int | None:
    """Rank 0's :data:`REPLY` line from the job's stdout, waiting in ``select`` (no polling)."""
    assert job.proc.stdout is not None
    fd = job.proc.stdout.fileno()
    while True:
        line, sep, rest = job.pending.partition(b"\n")
        if sep:
            job.pending = rest
            word, _, codes = line.decode(errors="replace").partition(" ")
            if word == REPLY:
                return [int(c) for c in json.loads(codes)]
            continue  # anything else a rank printed between runs
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return TIMED_OUT
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return None  # the job ended
        job.pending += chunk


def _copy_output(folder: Path, n: int, stdout: IO[Any], stderr: IO[Any]) -> None:
    """The ranks' output of one run, rank by rank, to the caller's streams."""
    for suffix, sink in (("out", stdout), ("err", stderr)):
        for rank in range(n):
            path = folder / f"rank{rank}.{suffix}"
            with suppress(OSError):
                lines = path.read_bytes().decode(errors="replace").splitlines(keepends=True)
                sink.write("".join(line for line in lines if not MPI_ABORT_CHATTER.match(line)))
        sink.flush()


_CURRENT: contextvars.ContextVar[JobPool | None] = contextvars.ContextVar("pldemu_job_pool", default=None)


def current_pool() -> JobPool | None:
    """The pool :func:`pldemu.launch` uses (:func:`use_pool`), else None: a job per run."""
    return _CURRENT.get()


@contextmanager
def use_pool(pool: JobPool | None) -> Iterator[JobPool | None]:
    """Make ``pool`` the pool in effect inside the block (None: a job per run)."""
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)


__all__ = ["CLEAN_EXITS", "MAX_RANKS", "REPLY", "JobPool", "PoolStats", "current_pool", "use_pool"]
