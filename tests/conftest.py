"""Project-wide pytest configuration.

* Tests marked ``launcher`` start ``mpiexec`` themselves (see
  ``tests/mpi_launch.py``).  They are skipped inside an MPI job -- under
  ``--with-mpi`` or when this process is a rank -- so a job never launches
  jobs recursively.
* Tests marked ``mpi`` are run by pytest-mpi under ``--with-mpi`` and skipped
  by it otherwise; a plain ``pytest`` runs them through the launcher tests.
* In a job that runs several units (``mpi_launch.run_units``), every rank logs its outcomes
  (``tests/job_outcomes.py``) so that each unit gets its own verdict.
* In a plain ``pytest``, the MPI suites' jobs (``tests/test_mpi_suites.py``) run in a background
  thread from the end of collection (``tests/mpi_background.py``) while the rest runs; their tests
  are moved to the end of the session, where they collect the verdicts.
* The ``comm`` fixture is COMM_WORLD, with a barrier after the test; the ``backend`` fixture runs a
  test on every window back end (``helpers.BACKENDS``).
* A test marked ``prefetch`` gets its long ``pldemu`` command started in the background from the end
  of collection too (``tests/prefetch.py``), and its result when it asks.
* A test marked ``self_and_world`` (and not ``mpi``) that takes ``comm`` runs its one body twice,
  as mpi4py's own suite does with its Self/World test classes: ``[self]`` on COMM_SELF in the plain
  pytest process, ``[world]`` (marked ``mpi``) on COMM_WORLD inside the launcher's jobs.  It must live
  in a directory of ``mpi_launch.MPI_TEST_DIRS`` for its ``[world]`` case to run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Make ``import mpi_launch`` work from any test directory and any rootdir.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

import job_outcomes  # noqa: E402  (needs the path above)
from helpers import BACKENDS  # noqa: E402
from mpi_background import MPI_SUITE_TEST, SUITE_RUNNER, SuiteRunner, suite_plan  # noqa: E402
from mpi_launch import MPI_TEST_DIRS, REPO_ROOT, in_mpi_job  # noqa: E402
from prefetch import PREFETCH, PREFETCHER, Prefetcher, commands  # noqa: E402

if TYPE_CHECKING:
    from mpi4py import MPI

SELF_AND_WORLD = "self_and_world"
COMM_MODES = (pytest.param("self", id="self"), pytest.param("world", id="world", marks=pytest.mark.mpi))


def pytest_configure(config: pytest.Config) -> None:
    job_outcomes.register(config)  # a rank of a job that serves several units (mpi_launch.run_units)
    config.addinivalue_line("markers", f"{SELF_AND_WORLD}: run the test on COMM_SELF in-process and on "
                                       "COMM_WORLD under MPI (see tests/conftest.py)")
    config.addinivalue_line("markers", f"{PREFETCH}(key, *argv): the test's long pldemu command, started in the "
                                       "background when collection ends (see tests/prefetch.py)")


def _inside_mpi(config: pytest.Config) -> bool:
    with_mpi = bool(config.getoption("--with-mpi", default=False))
    only_mpi = bool(config.getoption("--only-mpi", default=False))
    return with_mpi or only_mpi or in_mpi_job()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Inside an MPI job skip ``launcher`` tests (no recursive mpiexec) and the ``[self]`` cases of
    ``self_and_world`` tests (the plain pytest process runs them; every rank would repeat them alone).
    Outside, the MPI suites' tests go last: their jobs run meanwhile (:func:`pytest_collection_finish`)."""
    if not _inside_mpi(config):
        items.sort(key=lambda item: getattr(item, "originalname", "") == MPI_SUITE_TEST)  # stable
        return
    launcher = pytest.mark.skip(reason="launcher tests do not run inside an MPI job")
    self_case = pytest.mark.skip(reason="the [self] case runs in the plain pytest process")
    for item in items:
        if item.get_closest_marker("launcher") is not None:
            item.add_marker(launcher)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("comm_mode") == "self":
            item.add_marker(self_case)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the selected MPI suites' jobs and the selected tests' prefetched commands in the background
    (not under ``--collect-only``, not in an MPI job, not in a pytest-xdist worker, which runs only
    some of the items it collected)."""
    config = session.config
    if config.option.collectonly or _inside_mpi(config) or hasattr(config, "workerinput"):
        return
    plan = suite_plan(session.items)
    if plan:
        session.stash[SUITE_RUNNER] = SuiteRunner(plan)
    early = commands(session.items)
    if early:
        session.stash[PREFETCHER] = Prefetcher(early)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """However the session ends, no job of the background runner outlives it. In a rank of a failing
    session, MPI's /dev/shm segment names go first: ``python -m mpi4py`` turns the non-zero exit into
    MPI_Abort, which skips the MPI_Finalize that would unlink them (every rank mapped them long ago)."""
    if in_mpi_job() and exitstatus != 0:
        from pldemu.runtime.shm import unlink_named_segments

        unlink_named_segments()
    runner = session.stash.get(SUITE_RUNNER, None)
    if runner is not None:
        runner.close()
    early = session.stash.get(PREFETCHER, None)
    if early is not None:
        early.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise the tests marked ``self_and_world`` over :data:`COMM_MODES`."""
    if metafunc.definition.get_closest_marker(SELF_AND_WORLD) is None:
        return
    where = Path(str(metafunc.definition.path)).resolve().relative_to(REPO_ROOT).parent.as_posix()
    if metafunc.definition.get_closest_marker("mpi") is not None or "comm" not in metafunc.fixturenames \
            or where not in MPI_TEST_DIRS:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: a {SELF_AND_WORLD} test takes the comm "
                                "fixture, is not marked mpi (its [world] case is) and lives in a directory "
                                "of mpi_launch.MPI_TEST_DIRS (else its [world] case never runs)")
    metafunc.parametrize("comm_mode", COMM_MODES)


@pytest.fixture
def comm_mode() -> str:
    """``world`` unless the test is marked ``self_and_world`` (then parametrised)."""
    return "world"


@pytest.fixture
def comm(comm_mode: str) -> Iterator[MPI.Intracomm]:
    """COMM_WORLD, with a barrier after the test so consecutive tests never overlap; COMM_SELF for the
    ``[self]`` case of a ``self_and_world`` test."""
    from mpi4py import MPI  # not at import: a plain run of MPI-free folders never initialises MPI

    if comm_mode == "self":
        yield MPI.COMM_SELF
        return
    world = MPI.COMM_WORLD
    yield world
    world.Barrier()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each test runs on every window back end."""
    return str(request.param)
