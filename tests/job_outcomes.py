"""What every rank of a pytest MPI job did, test by test, so that one job can serve several units.

A *unit* is a pytest path (a directory such as ``tests/windows``, a file, or a node id) that used to
get an ``mpiexec`` job of its own. :func:`mpi_launch.run_units` runs several units in turn in one
job; each rank records its outcomes here (the :class:`OutcomeLog` plugin, enabled by
:data:`OUTCOMES_ENV`, registered by ``tests/conftest.py``), and :func:`judge` turns every rank's log
into one verdict per unit: the unit's own failures fail it alone, a unit the job died in fails with
the job's report, and the units the job never reached are left to run again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pldemu.job.launch import job_rank

OUTCOMES_ENV = "PLDEMU_TEST_OUTCOMES"
"""A directory: every rank of the job appends its outcomes to ``rankR.jsonl`` there."""


def rank_log_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` of a job writes its outcomes."""
    return folder / f"rank{rank}.jsonl"


class OutcomeLog:
    """pytest plugin (one per rank): the collected node ids, each finished test, each failure.

    One line per event, flushed as it happens: a rank that dies mid-test leaves everything before it.
    """

    def __init__(self, path: Path) -> None:
        self._path = path

    def _write(self, **record: Any) -> None:
        with open(self._path, "a") as out:
            out.write(json.dumps(record) + "\n")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write(kind="failed", nodeid=report.nodeid, text=str(report.longrepr))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._write(kind="collected", nodeids=[item.nodeid for item in session.items])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._write(kind="failed", nodeid=report.nodeid, text=f"[{report.when}] {report.longrepr}")

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self._write(kind="finished", nodeid=nodeid)


def register(config: pytest.Config) -> None:
    """Record this rank's outcomes when the launcher asked for them (:data:`OUTCOMES_ENV`)."""
    folder, rank = os.environ.get(OUTCOMES_ENV), job_rank()
    if folder:
        config.pluginmanager.register(OutcomeLog(rank_log_path(Path(folder), rank or 0)), "pldemu-outcome-log")


@dataclass(frozen=True)
class RankLog:
    """One rank's outcomes: ``collected`` is None if the rank never finished collecting."""

    collected: tuple[str, ...] | None = None
    finished: frozenset[str] = frozenset()
    failures: tuple[tuple[str, str], ...] = ()
    """(node id, report text) of every failed collection, setup, call or teardown."""


def read_rank_log(path: Path) -> RankLog:
    """The log :class:`OutcomeLog` left at ``path`` (empty if the rank never started pytest)."""
    if not path.is_file():
        return RankLog()
    collected: tuple[str, ...] | None = None
    finished: set[str] = set()
    failures: list[tuple[str, str]] = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the last line of a rank killed mid-write
            continue
        if record["kind"] == "collected":
            collected = tuple(record["nodeids"])
        elif record["kind"] == "finished":
            finished.add(record["nodeid"])
        else:
            failures.append((record["nodeid"], record["text"]))
    return RankLog(collected, frozenset(finished), tuple(failures))


def in_unit(nodeid: str, unit: str) -> bool:
    """Whether ``nodeid`` (rootdir-relative) is ``unit`` or lies under it."""
    return nodeid == unit or nodeid.startswith((f"{unit}/", f"{unit}::"))


@dataclass(frozen=True)
class UnitVerdict:
    """One unit's result in a shared job: passed, or the reason it failed (its failures by rank)."""

    unit: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Judgement:
    """What one shared job settled: a verdict per unit it got to, the units to run again."""

    verdicts: dict[str, UnitVerdict] = field(default_factory=dict)
    rerun: tuple[str, ...] = ()


def _unit_failures(unit: str, logs: Sequence[RankLog]) -> list[str]:
    return [f"rank {r}: {nodeid}\n{text}" for r, log in enumerate(logs) for nodeid, text in log.failures
            if in_unit(nodeid, unit)]


def _complete(unit: str, logs: Sequence[RankLog]) -> bool:
    """Every rank collected and finished every test of ``unit``."""
    return all(log.collected is not None and all(n in log.finished for n in log.collected if in_unit(n, unit))
               for log in logs)


def judge(units: Sequence[str], logs: Sequence[RankLog], job_ok: bool, job_report: str) -> Judgement:
    """Verdicts for ``units`` (run in this order by one job whose ranks left ``logs``).

    A unit every rank completed passes unless one of its own tests failed. The first incomplete unit
    is the one the job died in (crash, abort, timeout): it fails with ``job_report``; the units after
    it never ran and are returned to run again. A job that failed although every unit completed
    cleanly (e.g. at exit) names no unit: with several units, all of them run again (alone, by the
    caller), with one, it fails.
    """
    verdicts: dict[str, UnitVerdict] = {}
    for i, unit in enumerate(units):
        failures = _unit_failures(unit, logs)
        if not _complete(unit, logs):
            detail = "\n".join([*failures, f"the job ended during {unit}:", job_report])
            verdicts[unit] = UnitVerdict(unit, False, detail)
            return Judgement(verdicts, tuple(units[i + 1:]))
        verdicts[unit] = UnitVerdict(unit, not failures, "\n".join([*failures, job_report]) if failures else "")
    if not job_ok and all(v.passed for v in verdicts.values()):
        if len(units) > 1:
            return Judgement({}, tuple(units))
        return Judgement({units[0]: UnitVerdict(units[0], False, f"the job failed after every test passed:\n"
                                                                 f"{job_report}")})
    return Judgement(verdicts)
