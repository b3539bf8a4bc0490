"""``pldemu stress PROGRAM.pld`` without MPI: which argument is a program, what is refused before any
mpiexec (exit 2), and the replay command (absolute path, same flags)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from stress_launch_helpers import correct_text

from pldemu.cli import build_parser, main
from pldemu.cli.commands.stress import child_argv, is_program_path, replay_command, resolve


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["stress", *argv])


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "mine.pld"
    path.write_text(correct_text())
    return path


def test_a_pld_path_or_an_existing_file_is_a_program(tmp_path: Path, program: Path) -> None:
    assert is_program_path(str(program)) and is_program_path("missing.pld")
    other = tmp_path / "prog.txt"
    other.write_text(correct_text())
    assert is_program_path(str(other))
    assert not is_program_path("allreduce") and not is_program_path(None)
    assert not is_program_path(str(tmp_path / "missing.txt"))


def test_resolve_parses_lowers_and_verifies_the_program(program: Path) -> None:
    target = resolve(_args(str(program), "--no-lower", "--iters", "7", "-n", "3"))
    assert target.source == str(program.resolve()) and (target.iters, target.ranks) == (7, 3)
    assert target.program.name == "allreduce" and target.lower is None and target.consume_fence is None
    assert "lowered" not in target.label
    assert "lowered" in resolve(_args(str(program))).label


def test_the_replay_names_the_absolute_path_and_every_flag(program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(program.parent)
    args = _args("mine.pld", "--no-lower", "--no-cell-check", "--iters", "30", "--seed", "5", "--jitter", "20",
                 "--straggler", "1:300", "--visibility", "deferred", "--block", "3", "--no-races", "-n", "3")
    words = shlex.split(replay_command(child_argv(args, result_file="/tmp/r.json"), 3))
    assert words[:3] == ["pldemu", "stress", str(program.resolve())] and "--result-file" not in words
    again = _args(*words[2:])
    for field in ("no_lower", "no_cell_check", "iters", "seed", "jitter", "straggler", "visibility", "block",
                  "no_races", "no_invariants", "timeout", "ranks"):
        assert getattr(again, field) == getattr(args, field), field
    assert again.dtype is None and again.mode is None  # no collective flag sneaks into a program's replay


def test_a_collective_replay_is_unchanged_by_the_program_flags() -> None:
    cmd = replay_command(child_argv(_args("allreduce", "--seed", "4")), 4)
    assert cmd == "pldemu stress allreduce --seed 4 --jitter 50 --timeout 3 -n 4"
    cmd = replay_command(child_argv(_args("allreduce", "--dtype", "fp16", "--seed", "4")), 4)
    assert cmd == "pldemu stress allreduce --dtype fp16 --seed 4 --jitter 50 --timeout 3 -n 4"
    assert "fp32" in resolve(_args("allreduce")).label


@pytest.mark.parametrize("flags, message", [
    (["--size", "8"], "--size describes a built-in collective's call"),
    (["--mode", "ring"], "--mode describes a built-in collective's call"),
    (["--dtype", "fp32"], "--dtype describes a built-in collective's call"),
    (["--reduce", "max"], "--reduce"),
    (["--root", "1"], "--root"),
    (["--max-recv", "2"], "--max-recv"),
    (["--mutant", "wait-eq"], "give either a PROGRAM or --mutant"),
    (["--all-mutants"], "give no COLLECTIVE"),
    (["--seeds", "2"], "--seeds applies to --all-mutants"),
])
def test_flags_that_do_not_apply_to_a_program_exit_2(program: Path, flags: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stress", str(program), *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["allreduce", "--no-lower"], "--no-lower applies to a PROGRAM"),
    (["--mutant", "wait-eq", "--no-cell-check"], "--no-cell-check applies to a PROGRAM"),
    (["--all-mutants", "--no-lower"], "apply to a PROGRAM, not to --all-mutants"),
])
def test_program_flags_do_not_apply_to_a_collective(argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stress", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bad_programs_exit_2_before_any_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No mpiexec runs here: a job would print the header line on stdout.
    assert main(["stress", str(tmp_path / "missing.pld")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.pld"
    bad.write_text("program x {\n")
    assert main(["stress", str(bad)]) == 2
    err = capsys.readouterr()
    assert "bad.pld:" in err.err and err.out == ""
    unlowered = tmp_path / "composite.pld"
    unlowered.write_text("program c {\n  window data: fp32[1, 8]\n  signal sig: int32[NR, 1]\n  func main() {\n"
                         "    out = pld.tensor.allreduce(data, sig, op=Sum, mode=mesh)\n  }\n}\n")
    assert main(["stress", str(unlowered), "--no-lower"]) == 2
    assert "still calls the composite collective pld.tensor.allreduce" in capsys.readouterr().err


def test_help_says_a_program_has_no_wrong_data(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["stress", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "PROGRAM" in out and "there is no wrong-data" in out and "--no-cell-check" in out
