"""``pldemu run`` / ``pldemu check`` with ``--races`` and ``--trace``, and ``pldemu trace-plot`` on what
they wrote: end to end (the commands launch their own mpiexec job)."""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path

import pytest
from helpers import pldemu as run_pldemu
from helpers import report as _report
from mpi_launch import REPO_ROOT

from pldemu.cli.commands import check as check_cli
from pldemu.cli.commands import run as run_cli

TIMEOUT = 300.0
EXAMPLES = REPO_ROOT / "pldemu" / "examples"
pldemu = partial(run_pldemu, timeout=TIMEOUT)


def test_child_argv_forwards_races_and_trace(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    args = parser.parse_args(["x.pld", "--races", "--trace", "rel.json"])
    argv = run_cli.child_argv(args, 4)
    assert "--races" in argv and argv[argv.index("--trace") + 1] == str(Path("rel.json").resolve())
    parser = argparse.ArgumentParser()
    check_cli.add_arguments(parser)
    args = parser.parse_args(["allreduce", "--races", "--trace", "c.json"])
    argv = check_cli.child_argv(args)
    assert "--races" in argv and argv[argv.index("--trace") + 1] == str(Path("c.json").resolve())
    plain = check_cli.child_argv(parser.parse_args(["allreduce"]))
    assert "--races" not in plain and "--trace" not in plain


@pytest.mark.launcher
def test_run_reports_the_early_reader_race_and_writes_a_drawable_trace(tmp_path: Path) -> None:
    trace, png = tmp_path / "early.json", tmp_path / "early.png"
    res = pldemu("run", str(EXAMPLES / "early_reader.pld"), "-n", "2", "--races", "--trace", str(trace))
    assert res.returncode == run_cli.EXIT_RACES, _report(res)
    assert "races: 1 report(s)" in res.stdout and "race on data[0, 2:4] of rank 1" in res.stdout, _report(res)
    assert "rank 0 write at main:12 pld.tile.put" in res.stdout and "rank 1 read at main:16" in res.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("cat") == "race" for e in events) == 2
    plot = pldemu("trace-plot", str(trace), "-o", str(png))
    assert plot.returncode == 0 and png.stat().st_size > 10_000, _report(plot)


@pytest.mark.launcher
def test_run_of_correct_collectives_reports_no_race() -> None:
    res = pldemu("run", str(EXAMPLES / "allreduce_loop.pld"), "-n", "3", "--races")
    assert res.returncode == 0, _report(res)
    assert "races: none" in res.stdout, _report(res)


@pytest.mark.launcher
def test_check_with_races_and_trace(tmp_path: Path) -> None:
    trace = tmp_path / "chk.json"
    res = pldemu("check", "allreduce", "--mode", "ring", "--size", "64", "-n", "3", "--iters", "3", "--races",
                 "--trace", str(trace))
    assert res.returncode == 0, _report(res)
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("cat") == "call" for e in events) == 3 * 3, _report(res)
