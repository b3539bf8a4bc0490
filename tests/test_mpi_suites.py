"""Run every MPI test directory under ``mpiexec`` at several sizes.

This is how a plain ``pytest`` exercises the tests marked ``mpi``: each (size, directory) pair is one
test, ``mpiexec -n N python -m mpi4py -m pytest --with-mpi DIR``. The directories selected at one size
share one job (:func:`mpi_launch.run_units`: one start-up of N pytest processes instead of one per
directory), and each pair is judged by its own directory's tests alone. In a plain session those jobs
run in the background from the end of collection (``tests/mpi_background.py``, started by
``tests/conftest.py``), and these tests, run last, collect the verdicts. Add directories to
``mpi_launch.MPI_TEST_DIRS``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from job_outcomes import UnitVerdict
from mpi_background import SUITE_RUNNER, suite_plan
from mpi_launch import MPI_SIZES, MPI_TEST_DIRS, REPO_ROOT, run_units

pytestmark = pytest.mark.launcher

SuiteVerdict = Callable[[int, str], UnitVerdict]


@pytest.fixture(scope="session")
def suite_verdict(request: pytest.FixtureRequest) -> SuiteVerdict:
    """``verdict(n, dir)``: from the session's background runner, which runs every selected pair;
    without one (pytest-xdist workers) the first call at size ``n`` runs every selected directory in
    one job."""
    by_size: dict[int, dict[str, UnitVerdict]] = {}
    runner = request.session.stash.get(SUITE_RUNNER, None)

    def verdict(n: int, test_dir: str) -> UnitVerdict:
        if runner is not None:
            return runner.verdict(n, test_dir)
        done = by_size.setdefault(n, {})
        if test_dir not in done:
            selected = suite_plan(request.session.items).get(n, [])
            done.update(run_units(n, [d for d in selected if d not in done] or [test_dir]))
        return done[test_dir]

    return verdict


@pytest.mark.parametrize("test_dir", MPI_TEST_DIRS)
@pytest.mark.parametrize("n", MPI_SIZES)
def test_mpi_suite(n: int, test_dir: str, suite_verdict: SuiteVerdict) -> None:
    """All mpi tests of ``test_dir`` pass on ``n`` ranks."""
    if not (REPO_ROOT / test_dir).is_dir():
        pytest.skip(f"{test_dir} does not exist in this checkout")
    result = suite_verdict(n, test_dir)
    assert result.passed, result.detail
