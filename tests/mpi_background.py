"""The MPI suites of a plain ``pytest`` run beside the rest of the session.

The suites' jobs (``tests/test_mpi_suites.py``: every MPI test directory at every size) are about
half of the suite's wall time, and neither they nor the rest keep both cores of a 2-core machine busy
(the rest waits on timeouts and on its own small jobs). :class:`SuiteRunner` starts them when
collection ends, one job at a time in a thread of its own, while the main thread runs everything
else; each ``test_mpi_suite[N-DIR]`` (moved to the end of the session) then only collects its
verdict. One job at a time, never two oversubscribed MPI jobs of the suites at once: those spend the
cores polling ("Item 4, fourth pass" in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from job_outcomes import UnitVerdict
from mpi_launch import JOB_TIMEOUT, MPI_TEST_DIRS, REPO_ROOT, LiveJobs, run_units

MPI_SUITE_TEST = "test_mpi_suite"
"""The name of ``tests/test_mpi_suites.py``'s test, parametrised over ``n`` and ``test_dir``."""


def suite_plan(items: Sequence[pytest.Item]) -> dict[int, list[str]]:
    """Size -> the existing MPI suite directories selected at that size (in :data:`MPI_TEST_DIRS`
    order; a ``-k`` selection runs only what it selected), by increasing size."""
    chosen: dict[int, set[str]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", "") == MPI_SUITE_TEST and callspec is not None:
            chosen.setdefault(callspec.params["n"], set()).add(callspec.params["test_dir"])
    plan = {n: [d for d in MPI_TEST_DIRS if d in dirs and (REPO_ROOT / d).is_dir()]
            for n, dirs in sorted(chosen.items())}
    return {n: dirs for n, dirs in plan.items() if dirs}


class SuiteRunner:
    """Runs ``plan`` (size -> the directories selected at that size), in this order, one job at a
    time, in a background thread; :meth:`verdict` waits for a size's job. :meth:`close` kills the job
    in flight and drops the rest (the session ended early: ``-x``, Ctrl-C). ``wrap``: the command prefix its
    jobs run under (:func:`mpi_launch.run_mpi`)."""

    def __init__(self, plan: Mapping[int, Sequence[str]], timeout_per_unit: float = JOB_TIMEOUT,
                 wrap: Sequence[str] = ()) -> None:
        self._jobs = LiveJobs()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mpi-suites")
        self._sizes: dict[int, Future[dict[str, UnitVerdict]]] = {
            n: self._pool.submit(run_units, n, tuple(dirs), timeout_per_unit, self._jobs, wrap)
            for n, dirs in plan.items()}

    def verdict(self, n: int, test_dir: str) -> UnitVerdict:
        """``test_dir``'s verdict at ``n`` ranks, once that size's job has ended."""
        return self._sizes[n].result()[test_dir]

    def close(self) -> None:
        """Kill the job in flight, cancel the sizes not started; returns once the thread is idle."""
        self._pool.shutdown(wait=False, cancel_futures=True)  # first: no size starts after the kill
        self._jobs.close()
        self._pool.shutdown(wait=True)


SUITE_RUNNER = pytest.StashKey[SuiteRunner]()
"""Where a session keeps its :class:`SuiteRunner` (``tests/conftest.py`` starts it)."""
