"""Run every MPI test directory under ``mpiexec`` at several sizes.

This is how a plain ``pytest`` exercises the tests marked ``mpi``: each
(size, directory) pair is one ``mpiexec -n N python -m mpi4py -m pytest
--with-mpi DIR`` job.  Add directories to ``mpi_launch.MPI_TEST_DIRS``.
"""

from __future__ import annotations

import pytest
from mpi_launch import (
    JOB_TIMEOUT,
    MPI_SIZES,
    MPI_TEST_DIRS,
    REPO_ROOT,
    pytest_mpi_argv,
    run_mpi,
)

pytestmark = pytest.mark.launcher


@pytest.mark.parametrize("test_dir", MPI_TEST_DIRS)
@pytest.mark.parametrize("n", MPI_SIZES)
def test_mpi_suite(n: int, test_dir: str) -> None:
    """All mpi tests of ``test_dir`` pass on ``n`` ranks."""
    if not (REPO_ROOT / test_dir).is_dir():
        pytest.skip(f"{test_dir} does not exist in this checkout")
    result = run_mpi(n, pytest_mpi_argv([test_dir]), timeout=JOB_TIMEOUT)
    assert not result.timed_out, result.report()
    assert result.returncode == 0, result.report()
