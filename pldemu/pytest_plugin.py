"""The pldemu pytest plugin (registered through the ``pytest11`` entry point as ``pldemu``).

    @pytest.mark.pldemu(ranks=[2, 3, 5], timeout=60)
    def test_my_allreduce(pldemu_run, pldemu_ranks):
        result = pldemu_run(build_program(), inputs={"x": lambda r: np.full((2, 64), r, np.float32)},
                            expect={"x": np.full((2, 64), sum(range(pldemu_ranks)), np.float32)})

The marker parametrises the test over rank counts (ids ``2ranks``, ``3ranks``, ...); the
``pldemu_run`` fixture runs a program with :func:`pldemu.launch` at the test's rank count and timeout,
each call served by the session's warm job of that rank count (:mod:`pldemu.pool`: a failed run's
report is the one a job of its own gives; ``--no-pldemu-warm-jobs``: an ``mpiexec`` job per call), and fails the test (not the session) with the job's exit code,
every rank's output, the race / invariant / deadlock reports and, with ``expect=``, the ``#wrong`` rows.
Command-line options apply to every marked test: ``--pldemu-ranks 2,4`` (replaces the marker's list),
``--pldemu-timeout S``, ``--pldemu-seed N``, and the schedule flags ``--pldemu-jitter US``,
``--pldemu-straggler R:US``, ``--pldemu-skew US``, ``--pldemu-visibility deferred``,
``--pldemu-races`` (``--no-pldemu-races``), ``--pldemu-invariants``, which override the test's own ``RuntimeOptions``;
``--no-pldemu-warm-jobs``; and
``--pldemu-sim-hosts HxR`` (every job on H simulated hosts of R ranks, root only).

Marked tests are skipped inside an MPI job (pytest-mpi's ``--with-mpi``, or a rank of ``mpiexec``):
they start their own jobs, and MPI is never initialised in the test process.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from pldemu.api import DEFAULT_TIMEOUT, Inputs, PerRank, RunResult, launch
from pldemu.job.argtypes import host_shape, microseconds, nonneg_int, positive_float, positive_int, straggler
from pldemu.job.launch import Placement, in_mpi_job
from pldemu.pool.client import JobPool, use_pool
from pldemu.runtime.options import TASK_ORDERS, VISIBILITY_MODES, RuntimeOptions

MARKER = "pldemu"
DEFAULT_RANKS = (2,)
"""Rank counts of a marked test whose marker names none."""


def _rank_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(positive_int(part.strip()) for part in text.split(","))
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"expected rank counts like 2,3,5: {err}") from None


# option name -> (RuntimeOptions field or None, add_option keyword arguments)
_OPTIONS: Mapping[str, tuple[str | None, dict[str, Any]]] = {
    "ranks": (None, {"type": _rank_list, "metavar": "N,N", "help": "rank counts of every pldemu test"}),
    "timeout": (None, {"type": positive_float, "metavar": "S", "help": "seconds one pldemu job may take"}),
    "sim-hosts": (None, {"type": host_shape, "metavar": "HxR", "help": "run every pldemu test on H simulated hosts "
                         "of R ranks (root; replaces the rank counts by H*R; see docs/multihost.md)"}),
    "seed": ("seed", {"type": nonneg_int, "metavar": "N", "help": "seed of the schedules"}),
    "jitter": ("jitter_us", {"type": microseconds, "metavar": "US", "help": "random delay before every primitive"}),
    "straggler": ("straggler", {"type": straggler, "metavar": "R:US", "help": "rank R is slower by US per primitive"}),
    "skew": ("skew_us", {"type": microseconds, "metavar": "US", "help": "random delay before every call"}),
    "visibility": ("visibility", {"choices": VISIBILITY_MODES, "help": "when puts become visible"}),
    "task-order": ("task_order", {"choices": TASK_ORDERS, "help": "how one rank's tasks run (random, fifo, program)"}),
    "cores": ("cores", {"type": nonneg_int, "metavar": "N", "help": "clusters one rank's tasks share"}),
    "races": ("race_detect", {"action": argparse.BooleanOptionalAction, "default": None,
                              "help": "detect data races (--no-pldemu-races: do not)"}),
    "invariants": ("invariants", {"action": "store_true", "default": None, "help": "check protocol invariants"}),
    "truncation-warn": ("truncation_warn", {"action": "store_true", "default": None,
                                            "help": "a truncating // or %% (tdiv / trem) whose value differs from "
                                                    "floor semantics is a warning, not a failure"}),
    "warm-jobs": (None, {"action": argparse.BooleanOptionalAction, "default": True,
                         "help": "serve the session's runs from one warm mpiexec job per rank count (default; "
                                 "--no-pldemu-warm-jobs: a job of its own per run; see pldemu.pool)"}),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pldemu", "pldemu: run programs on MPI ranks")
    for name, (_, kwargs) in _OPTIONS.items():
        group.addoption(f"--pldemu-{name}", dest=_dest(name), **kwargs)


def _dest(name: str) -> str:
    """The option's attribute (``truncation-warn`` -> ``pldemu_truncation_warn``)."""
    return f"pldemu_{name.replace('-', '_')}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(ranks=[2, 3], timeout=60): run the test once per rank count; "
                                       "its pldemu_run fixture launches isolated mpiexec jobs")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "pldemu_ranks" not in metafunc.fixturenames:
        return
    hosts = metafunc.config.getoption("pldemu_sim_hosts")
    ranks = ((hosts[0] * hosts[1],) if hosts else None) or metafunc.config.getoption("pldemu_ranks") or tuple(
        marker.kwargs.get("ranks", DEFAULT_RANKS))
    metafunc.parametrize("pldemu_ranks", ranks, ids=[f"{n}ranks" for n in ranks])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not in_mpi_job() and not config.getoption("--with-mpi", default=False):
        return
    skip = pytest.mark.skip(reason="pldemu tests launch their own mpiexec; they do not run inside an MPI job")
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.add_marker(skip)


@pytest.fixture
def pldemu_ranks() -> int:
    """The rank count of this test (parametrised by the ``pldemu`` marker; 2 without it)."""
    return DEFAULT_RANKS[0]


@dataclasses.dataclass(frozen=True)
class Runner:
    """The ``pldemu_run`` fixture: ``pldemu_run(program, inputs=..., options=..., expect=...)``."""

    ranks: int
    timeout: float
    overrides: Mapping[str, Any]
    placement: Placement | None = None
    pool: JobPool | None = None

    def __call__(self, program: Any, *, inputs: Inputs | None = None, options: RuntimeOptions | None = None,
                 expect: Mapping[str, PerRank] | None = None, rtol: float = 0.0, atol: float = 0.0,
                 iters: int = 1, check: bool = True, expect_buffers: Mapping[str, str] = MappingProxyType({})
                 ) -> RunResult:
        """Run ``program`` (see :func:`pldemu.launch`); with ``check`` a failed job or a mismatch with
        ``expect`` (or between the buffer pairs of ``expect_buffers``, within ``rtol`` / ``atol``) fails
        the test with the full report. Returns the result."""
        opts = options if options is not None else RuntimeOptions(timeout=max(1.0, min(30.0, self.timeout / 3)))
        if self.overrides:
            opts = dataclasses.replace(opts, **self.overrides)
        with use_pool(self.pool):
            result = launch(program, self.ranks, inputs=inputs, options=opts, timeout=self.timeout,
                            iters=iters, check=False, placement=self.placement, expect_buffers=expect_buffers,
                            rtol=rtol if expect_buffers else 0.0, atol=atol if expect_buffers else 0.0)
        if check and not result.ok:
            pytest.fail(result.describe_failure(), pytrace=False)
        if check and expect is not None:
            diff = _differences(result, expect, rtol, atol)
            if diff:
                pytest.fail(f"{diff}\n{result.describe_failure()}", pytrace=False)
        return result


def _differences(result: RunResult, expect: Mapping[str, PerRank], rtol: float, atol: float) -> str:
    """The ``#wrong`` rows of ``result.expect`` (empty when every buffer matches)."""
    try:
        result.expect(expect, rtol=rtol, atol=atol)
    except AssertionError as err:
        return str(err)
    return ""


def runtime_overrides(config: pytest.Config) -> dict[str, Any]:
    """The ``RuntimeOptions`` fields the ``--pldemu-*`` flags of the command line set (only those given)."""
    return {field: value for name, (field, _) in _OPTIONS.items()
            if field is not None and (value := config.getoption(_dest(name))) is not None}


@pytest.fixture(scope="session")
def pldemu_job_pool(request: pytest.FixtureRequest) -> Iterator[JobPool | None]:
    """The session's warm jobs (:class:`pldemu.pool.JobPool`, one per rank count, ended with the
    session), or None under ``--no-pldemu-warm-jobs`` or ``--pldemu-sim-hosts``."""
    if not request.config.getoption("pldemu_warm_jobs") or request.config.getoption("pldemu_sim_hosts"):
        yield None
        return
    with JobPool() as pool:
        yield pool


@pytest.fixture
def pldemu_run(request: pytest.FixtureRequest, pldemu_ranks: int,
               pldemu_job_pool: JobPool | None) -> Callable[..., RunResult]:
    """Run a program on this test's rank count (see :class:`Runner`)."""
    marker = request.node.get_closest_marker(MARKER)
    timeout = request.config.getoption("pldemu_timeout") or (
        marker.kwargs.get("timeout", DEFAULT_TIMEOUT) if marker is not None else DEFAULT_TIMEOUT)
    overrides = runtime_overrides(request.config)
    hosts = request.config.getoption("pldemu_sim_hosts")
    return Runner(pldemu_ranks, float(timeout), overrides, Placement(sim_hosts=hosts) if hosts else None,
                  pldemu_job_pool)


__all__ = ["MARKER", "Runner", "pldemu_job_pool", "pldemu_ranks", "pldemu_run", "runtime_overrides"]
