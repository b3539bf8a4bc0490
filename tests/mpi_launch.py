"""Launch MPI jobs from a plain (non-MPI) pytest run.

Shared by the whole test suite: ``tests/test_mpi_suites.py`` uses
:func:`run_units` to run every directory of :data:`MPI_TEST_DIRS` under
``mpiexec -n N python -m mpi4py -m pytest --with-mpi``, the directories of one
size in one job, each judged by its own tests.  To add a directory of
pytest-mpi tests, append it to :data:`MPI_TEST_DIRS`.

The job runs in its own session/process group so that a hung job (all ranks
and the process manager) can be killed as a whole on timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from job_outcomes import OUTCOMES_ENV, UnitVerdict, judge, rank_log_path, read_rank_log

from pldemu.job import launch

REPO_ROOT = Path(__file__).resolve().parent.parent

MPI_TEST_DIRS: tuple[str, ...] = ("tests/windows", "tests/runtime_mpi", "tests/check_mpi", "tests/races_mpi",
                                   "tests/stress_mpi")
"""Directories (relative to the repo root) of tests marked ``mpi`` that the
launcher runs at every size of :data:`MPI_SIZES`.  Extend it, e.g. with
``tests/runtime_mpi``; directories that do not exist are skipped."""

MPI_SIZES: tuple[int, ...] = (1, 2, 3, 4, 5, 8)
"""Numbers of ranks every MPI test directory is run with."""

JOB_TIMEOUT = 600.0
"""Seconds one ``mpiexec`` job (one directory at one size) may take."""

PER_TEST_TIMEOUT = 240.0
"""pytest-timeout limit for one test inside a job.  The thread method is used
because a rank stuck inside a blocking MPI call never runs Python signal
handlers; it dumps all stacks and exits the rank, which ends the job."""

IN_JOB_ENV = "PLDEMU_IN_MPI_JOB"
"""Set to ``1`` in the environment of launched jobs (recursion guard)."""



@dataclass
class MpiResult:
    """Outcome of :func:`run_mpi`; quacks like ``subprocess.CompletedProcess``."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float

    def report(self, tail: int = 200_000) -> str:
        """Human-readable summary with the (tail of the) captured output."""
        status = f"TIMED OUT after {self.duration:.0f}s" if self.timed_out else f"exit {self.returncode}"
        return (
            f"$ {' '.join(self.args)}\n{status} ({self.duration:.1f}s)\n"
            f"----- stdout -----\n{self.stdout[-tail:]}\n----- stderr -----\n{self.stderr[-tail:]}"
        )

    def check_returncode(self) -> None:
        """Raise ``AssertionError`` with :meth:`report` unless the job passed."""
        if self.timed_out or self.returncode != 0:
            raise AssertionError(self.report())


class Cancelled(Exception):
    """The :class:`LiveJobs` a job would have started under was closed."""


@dataclass
class LiveJobs:
    """The jobs a thread has in flight (:func:`run_mpi`'s ``jobs``), so that another thread (the
    session, when it ends) can kill them: :meth:`close` kills each one's whole process tree, and no
    job starts under it afterwards."""

    _procs: set[subprocess.Popen[str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def add(self, proc: subprocess.Popen[str]) -> None:
        """Track ``proc``; killed at once (and :class:`Cancelled` raised) if already closed."""
        with self._lock:
            if not self.closed:
                self._procs.add(proc)
                return
        launch.kill_group(proc, grace=1.0)
        raise Cancelled("the jobs were closed")

    def discard(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def close(self) -> None:
        """Kill every tracked job; refuse new ones."""
        with self._lock:
            self.closed, procs = True, list(self._procs)
        for proc in procs:
            launch.kill_group(proc, grace=1.0)


def mpiexec_command(n: int) -> list[str]:
    """``mpiexec -n N`` with the flags this MPI needs to oversubscribe (pldemu's own launcher decides)."""
    return launch.mpiexec_command(n, [])


OWNER_VAR = "PLDEMU_TEST_OWNER"
"""Set in every job this module starts to the pid of the process that started it: a test that looks for
its jobs' processes finds its own (``helpers.own_processes_with``), never another session's."""


def job_env(extra: Mapping[str, str] | None = None, *, local_ranks: int | None = None) -> dict[str, str]:
    """pldemu's job environment (an enclosing job's process-manager variables removed, unbuffered
    output, MPICH's gentle waits for ``local_ranks`` above the cores) plus the recursion guard
    :data:`IN_JOB_ENV` and the owner mark :data:`OWNER_VAR`."""
    return launch.job_env({IN_JOB_ENV: "1", OWNER_VAR: str(os.getpid()), **(extra or {})}, local_ranks=local_ranks)


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def run_mpi(
    n: int,
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    jobs: LiveJobs | None = None,
    wrap: Sequence[str] = (),
) -> MpiResult:
    """Run ``mpiexec -n N argv...`` in a new session and capture its output (:func:`run_tracked`).
    ``env`` entries are added to the current environment; ``PYTHONUNBUFFERED=1`` is always set.
    ``wrap``: a command prefix mpiexec runs under (e.g. ``helpers.private_shm``)."""
    return run_tracked([*wrap, *mpiexec_command(n), *argv], timeout, job_env(env, local_ranks=n), cwd, jobs)


def run_tracked(
    args: Sequence[str],
    timeout: float,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    jobs: LiveJobs | None = None,
) -> MpiResult:
    """Run ``args`` (a job, or a command that launches jobs) in a new session with environment ``env``
    and capture its output.

    On timeout its whole process tree gets killed (:func:`pldemu.job.launch.kill_group`), and the
    result has ``timed_out=True`` together with whatever output was captured. Under ``jobs`` it can be
    killed from another thread (:class:`LiveJobs`), and :class:`Cancelled` is raised then.
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=dict(env),
        cwd=cwd if cwd is not None else REPO_ROOT,
        start_new_session=True,
    )
    timed_out = False
    if jobs is not None:
        jobs.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        launch.kill_group(proc)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired as exc:
            # Something outside the group still holds the pipes; report what we have.
            stdout = _text(exc.stdout)
            stderr = _text(exc.stderr) + "\n[run_tracked: output pipes still open after killing the group]"
    except BaseException:
        # e.g. Ctrl-C in the outer pytest: never leave ranks behind.
        launch.kill_group(proc, grace=1.0)
        raise
    finally:
        if jobs is not None:
            jobs.discard(proc)
    if jobs is not None and jobs.closed:
        raise Cancelled("the jobs were closed")
    return MpiResult(
        args=list(args),
        returncode=proc.returncode if proc.returncode is not None else -1,
        stdout=stdout or "",
        stderr=stderr or "",
        timed_out=timed_out,
        duration=time.monotonic() - start,
    )


def pytest_mpi_argv(paths: Sequence[str], *extra: str) -> list[str]:
    """Python argv running pytest-mpi on ``paths`` inside each rank."""
    return [
        sys.executable,
        "-m",
        "mpi4py",
        "-m",
        "pytest",
        "--with-mpi",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--timeout={PER_TEST_TIMEOUT:g}",
        "--timeout-method=thread",
        # hypothesis's plugin costs ~0.9 s of CPU per rank to import (docs/benchmarks.md, test suite), and
        # no MPI test uses hypothesis: its @given would still run without the plugin.
        "-p",
        "no:hypothesispytest",
        *extra,
        *paths,
    ]


def run_units(n: int, units: Sequence[str], timeout_per_unit: float = JOB_TIMEOUT,
              jobs: LiveJobs | None = None, wrap: Sequence[str] = ()) -> dict[str, UnitVerdict]:
    """Run the pytest-mpi ``units`` (paths, in this order) on ``n`` ranks, sharing jobs, and judge each alone.

    One ``mpiexec`` runs them all in turn (one start-up of ``n`` pytest processes instead of one per
    unit); every rank logs its outcomes (:mod:`job_outcomes`), so a unit fails only for its own tests.
    If the job dies in a unit (crash, abort, timeout), that unit fails with the job's report and a new
    job runs the units it never reached; a job that fails without naming a unit reruns each alone.
    Its jobs run under ``jobs`` and ``wrap`` (:func:`run_mpi`).
    """
    verdicts: dict[str, UnitVerdict] = {}
    pending = tuple(units)
    while pending:
        with tempfile.TemporaryDirectory(prefix="pldemu-units-") as folder:
            result = run_mpi(n, pytest_mpi_argv(pending, "--continue-on-collection-errors"),
                             timeout=timeout_per_unit * len(pending), env={OUTCOMES_ENV: folder}, jobs=jobs,
                             wrap=wrap)
            logs = [read_rank_log(rank_log_path(Path(folder), r)) for r in range(n)]
        ok = not result.timed_out and result.returncode == 0
        settled = judge(pending, logs, ok, result.report())
        verdicts.update(settled.verdicts)
        if settled.rerun == pending:  # nothing settled: no unit to blame, so each runs alone
            for unit in pending:
                verdicts.update(run_units(n, [unit], timeout_per_unit, jobs, wrap))
            break
        pending = settled.rerun
    return verdicts


def existing_mpi_test_dirs() -> list[str]:
    """The entries of :data:`MPI_TEST_DIRS` that exist in this checkout."""
    return [d for d in MPI_TEST_DIRS if (REPO_ROOT / d).is_dir()]


def in_mpi_job() -> bool:
    """True when this process is itself a rank of an MPI job (or was started by this launcher)."""
    return os.environ.get(IN_JOB_ENV) == "1" or launch.in_mpi_job()
