"""``pldemu stress`` without MPI: argument checks, the replay command, the outcome file, the table."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pldemu.cli import build_parser, main
from pldemu.cli.commands.stress import MutantRow, child_argv, replay_command, resolve, with_mutant_schedule
from pldemu.harness.stress import StressOutcome, read_outcome, write_outcome


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["stress", *argv])


def test_replay_command_round_trips_every_flag() -> None:
    args = _args("allreduce", "--mode", "ring", "--size", "96", "--iters", "300", "--seed", "17", "--jitter", "75",
                 "--straggler", "2:400", "--skew", "30", "--visibility", "deferred", "--block", "5",
                 "--no-races", "--timeout", "4", "-n", "3")
    cmd = replay_command(child_argv(args, result_file="/tmp/x.json"), 3)
    words = shlex.split(cmd)
    assert words[:2] == ["pldemu", "stress"] and "--result-file" not in words
    again = _args(*words[2:])
    for field in ("collective", "mode", "size", "iters", "seed", "jitter", "straggler", "skew", "visibility",
                  "block", "no_races", "no_invariants", "timeout", "ranks"):
        assert getattr(again, field) == getattr(args, field), field


def test_replay_of_a_mutant_names_the_mutant_and_the_rank_count() -> None:
    args = _args("--mutant", "epilogue-one-short", "--seed", "4")
    cmd = replay_command(child_argv(with_mutant_schedule(args)), 4)
    assert cmd == "pldemu stress --mutant epilogue-one-short --seed 4 --jitter 50 --timeout 3 -n 4"
    args = _args("--mutant", "wait-eq", "--seed", "4")
    cmd = replay_command(child_argv(with_mutant_schedule(args)), 4)
    assert cmd == "pldemu stress --mutant wait-eq --seed 4 --jitter 50 --straggler 1:1000 --timeout 3 -n 4"
    target = resolve(args)
    assert (target.iters, target.ranks, target.consume_fence) == (200, 4, None)
    assert resolve(_args("--mutant", "broadcast-rewrite-race")).consume_fence is False


def test_a_mutant_schedule_yields_to_the_users_and_fits_the_rank_count() -> None:
    assert with_mutant_schedule(_args("--mutant", "wait-eq", "--straggler", "2:50")).straggler == (2, 50.0)
    assert with_mutant_schedule(_args("--mutant", "wait-eq", "-n", "2")).straggler == (1, 1000.0)
    assert with_mutant_schedule(_args("--mutant", "wait-eq"), nranks=1).straggler == (0, 1000.0)
    assert with_mutant_schedule(_args("--mutant", "no-epilogue")).straggler is None
    assert with_mutant_schedule(_args("allreduce")).straggler is None
    assert with_mutant_schedule(_args("allreduce"), "wait-eq").straggler == (1, 1000.0)


@pytest.mark.parametrize("argv, message", [
    ([], "name a COLLECTIVE"),
    (["allreduce", "--mutant", "wait-eq"], "not both"),
    (["--mutant", "nope"], "unknown mutant"),
    (["--mutant", "wait-eq", "--size", "8"], "does not apply to a mutant"),
    (["barrier", "--mode", "ring"], "--mode applies to allreduce"),
    (["allreduce", "--seeds", "3"], "--seeds applies to --all-mutants"),
    (["allreduce", "--all-mutants"], "give no COLLECTIVE"),
])
def test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stress", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["allreduce", "--jitter", "-1"], ["allreduce", "--straggler", "1"],
                                  ["allreduce", "--visibility", "lazy"], ["nope"]])
def test_bad_values_are_argparse_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as err:
        build_parser().parse_args(["stress", *argv])
    assert err.value.code == 2


def test_outcome_files_prefer_the_agreed_result_then_the_reporting_rank(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    assert read_outcome(path) is None
    stuck = StressOutcome("deadlock", 7, 8, 3, "rank 3 stuck", 1.0, "r", primary=False)
    report = StressOutcome("deadlock", 7, 8, 2, "wait-for report", 1.2, "r", primary=True)
    write_outcome(f"{path}.rank3", stuck)
    write_outcome(f"{path}.rank2", report)
    assert read_outcome(path) == report
    agreed = StressOutcome("wrong-data", 3, 10, 1, "# rank 1 iteration 3: 1 wrong", 0.5, "r")
    write_outcome(path, agreed)
    assert read_outcome(path) == agreed
    assert "FAILED: wrong-data at iteration 3 (rank 1)" in agreed.describe()


def test_mutant_table_row() -> None:
    caught = StressOutcome("race", 1, 10, -1, "race", 2.0)
    other = StressOutcome("race", 5, 10, -1, "race", 2.0)
    row = MutantRow("m", False, ("wrong-data", "race"), (caught, other, caught), (3.0, 4.0, 5.0))
    assert row.ok and row.median_iterations() == 2 and "yes 3/3" in row.format()
    missed = MutantRow("m", False, ("deadlock",), (caught, StressOutcome(None, None, 10, -1, "", 1.0)), (1.0, 1.0))
    assert not missed.ok and "NO 1/2" in missed.format()
    control = MutantRow("c", True, (), (StressOutcome(None, None, 500, -1, "", 1.0),), (9.0,))
    assert control.ok and "passed" in control.format()


def test_an_outcome_carries_its_notes_through_the_file_and_prints_them(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    write_outcome(path, StressOutcome(None, None, 4, -1, "", 0.5, notes=("note: a fence ordered nothing",)))
    got = read_outcome(path)
    assert got is not None and got.notes == ("note: a fence ordered nothing",)
    assert got.describe().splitlines() == ["# no failure in 4 iterations (0.5 s)", "# note: a fence ordered nothing"]
