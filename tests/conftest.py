"""Project-wide pytest configuration.

* Tests marked ``launcher`` start ``mpiexec`` themselves (see
  ``tests/mpi_launch.py``).  They are skipped inside an MPI job -- under
  ``--with-mpi`` or when this process is a rank -- so a job never launches
  jobs recursively.
* Tests marked ``mpi`` are run by pytest-mpi under ``--with-mpi`` and skipped
  by it otherwise; a plain ``pytest`` runs them through the launcher tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Make ``import mpi_launch`` work from any test directory and any rootdir.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from mpi_launch import in_mpi_job  # noqa: E402  (needs the path above)


def _inside_mpi(config: pytest.Config) -> bool:
    with_mpi = bool(config.getoption("--with-mpi", default=False))
    only_mpi = bool(config.getoption("--only-mpi", default=False))
    return with_mpi or only_mpi or in_mpi_job()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``launcher`` tests inside an MPI job (no recursive mpiexec)."""
    if not _inside_mpi(config):
        return
    skip = pytest.mark.skip(reason="launcher tests do not run inside an MPI job")
    for item in items:
        if item.get_closest_marker("launcher") is not None:
            item.add_marker(skip)
