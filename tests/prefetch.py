"""Long ``pldemu`` commands that tests need, started when collection ends and run in the background.

A plain ``pytest`` keeps one core busy on average: its tests mostly wait for jobs, timeouts and each
other, and the MPI suites' jobs (``tests/mpi_background.py``) end well before the rest. A test that
runs one long, self-contained command (a whole ``pldemu pytest`` session, a stress catalogue) declares
it with ``@pytest.mark.prefetch(KEY, *ARGV)``: when collection ends, :class:`Prefetcher` starts the
selected tests' commands one after the other in a thread of its own, and the test gets its command's
result with :func:`prefetched` (waiting for it if it still runs), exactly as if it had run it then.
Outside a plain session (``--collect-only``, an MPI job, a test run on its own with the plugin off)
:func:`prefetched` runs the command itself.

``ARGV`` is ``python -m pldemu ARGV`` run as a user would (:func:`helpers.pldemu`, writing no
bytecode next to the files it runs); ``{tmp}`` in it
is a folder of the command's own, which :attr:`Prefetched.tmp` names. However the session ends, no
command outlives it (:meth:`Prefetcher.close` kills the one in flight, process tree and all).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from mpi_launch import IN_JOB_ENV, REPO_ROOT, LiveJobs, MpiResult, job_env, run_tracked

PREFETCH = "prefetch"
"""The marker: ``@pytest.mark.prefetch(KEY, *ARGV)``."""

COMMAND_TIMEOUT = 900.0
"""Seconds a prefetched command may take before it is killed (its test then fails)."""


@dataclass(frozen=True)
class Prefetched:
    """A command's outcome (``returncode``, ``stdout``, ``stderr``, ``timed_out``) and the folder
    ``{tmp}`` named (its files are there until the session ends)."""

    result: MpiResult
    tmp: Path


def commands(items: Sequence[pytest.Item]) -> dict[str, tuple[str, ...]]:
    """KEY -> ARGV of every prefetch marker of ``items``, in collection order (one entry per KEY)."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        marker = item.get_closest_marker(PREFETCH)
        if marker is not None:
            key, *argv = marker.args
            out.setdefault(str(key), tuple(str(a) for a in argv))
    return out


def run(argv: Sequence[str], tmp: Path, jobs: LiveJobs | None = None) -> Prefetched:
    """``python -m pldemu ARGV`` (``{tmp}`` replaced by ``tmp``) as a user runs it, killed with its
    whole tree after :data:`COMMAND_TIMEOUT` or when ``jobs`` is closed (:func:`mpi_launch.run_tracked`)."""
    env = job_env({"PYTHONDONTWRITEBYTECODE": "1"})  # pldemu is byte-compiled; the tests' own files stay clean
    env.pop(IN_JOB_ENV, None)
    env["PYPTO_PROG_BUILD_DIR"] = str(tmp / "build_output")  # pl.jit programs' compiled.output_dir
    cmd = [sys.executable, "-m", "pldemu", *(a.replace("{tmp}", str(tmp)) for a in argv)]
    return Prefetched(run_tracked(cmd, COMMAND_TIMEOUT, env, REPO_ROOT, jobs), tmp)


class Prefetcher:
    """Runs ``plan`` (KEY -> ARGV) in this order, one command at a time, in a background thread;
    :meth:`get` waits for one; :meth:`close` kills the one in flight and drops the rest."""

    def __init__(self, plan: Mapping[str, Sequence[str]]) -> None:
        self._jobs = LiveJobs()
        self._root = Path(tempfile.mkdtemp(prefix="pldemu-prefetch-"))
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._runs: dict[str, Future[Prefetched]] = {}
        for i, (key, argv) in enumerate(plan.items()):
            tmp = self._root / str(i)
            tmp.mkdir()
            self._runs[key] = self._pool.submit(run, argv, tmp, self._jobs)

    def __contains__(self, key: str) -> bool:
        return key in self._runs

    def get(self, key: str) -> Prefetched:
        """KEY's outcome, once its command has ended."""
        return self._runs[key].result()

    def close(self) -> None:
        """Kill the command in flight, cancel the rest, drop the folders; returns once the thread is idle."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._jobs.close()
        self._pool.shutdown(wait=True)
        shutil.rmtree(self._root, ignore_errors=True)


Outcome = tuple[str, str]
"""(passed | failed | skipped, the failure or skip text) of one test of a prefetched pytest session."""


def session_outcomes(done: Prefetched, report: str = "report.xml") -> dict[str, Outcome]:
    """test name -> outcome of a prefetched ``pldemu pytest`` session, read from its junit ``report``
    (written to ``{tmp}/report.xml``), which must have failed (exit 1) without a traceback of pldemu's."""
    res = done.result
    assert res.returncode == 1, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stdout + res.stderr, res.stdout
    return {case.get("name", ""): _outcome(case) for case in ET.parse(done.tmp / report).getroot().iter("testcase")}


def _outcome(case: ET.Element) -> Outcome:
    for kind in ("failure", "error", "skipped"):
        found = case.find(kind)
        if found is not None:
            return ("failed" if kind != "skipped" else kind), (found.text or "") + found.get("message", "")
    return "passed", ""


def line_in(folder: Path, name: str, text: str) -> str:
    """``name:N`` of the first line of ``folder/name`` holding ``text``."""
    lines = (folder / name).read_text().splitlines()
    return f"{name}:{next(i for i, line in enumerate(lines, 1) if text in line)}"


PREFETCHER = pytest.StashKey[Prefetcher]()
"""Where a session keeps its :class:`Prefetcher` (``tests/conftest.py`` starts it)."""


def prefetched(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Prefetched:
    """The outcome of the command the requesting test's prefetch marker names: the background run's,
    or (nothing started it) a run of its own now."""
    marker = request.node.get_closest_marker(PREFETCH)
    assert marker is not None, f"{request.node.nodeid} has no {PREFETCH} marker"
    key, *argv = (str(a) for a in marker.args)
    runner = request.session.stash.get(PREFETCHER, None)
    if runner is not None and key in runner:
        return runner.get(key)
    return run(argv, tmp_path_factory.mktemp("prefetch"))
