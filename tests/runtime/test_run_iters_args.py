"""``pldemu run`` flags for repeated calls without MPI: ``--iters``, ``--block``, ``--no-cell-check``,
``--stage-pieces``: how they parse, what is refused (exit 2, before any job) and what the ranks of the
spawned job get. The default (one call) forwards nothing new."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pldemu.cli import build_parser, main
from pldemu.cli.commands import run as run_cli
from pldemu.harness import report
from pldemu.harness.repeat import IterationRow, RepeatResult

EXAMPLE = str(Path(run_cli.__file__).resolve().parent.parent / "examples" / "custom_barrier.pld")


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


def test_one_call_is_the_default_and_forwards_nothing_new() -> None:
    args = _args(EXAMPLE)
    assert (args.iters, args.block, args.no_cell_check, args.stage_pieces) == (1, None, False, False)
    argv = run_cli.child_argv(args, 4)
    assert not {"--iters", "--block", "--no-cell-check", "--stage-pieces"} & set(argv)


def test_repeat_flags_reach_the_ranks_and_the_options() -> None:
    args = _args(EXAMPLE, "--iters", "50", "--block", "5", "--no-cell-check", "--stage-pieces", "--invariants")
    argv = run_cli.child_argv(args, 3)
    assert argv[argv.index("--iters") + 1] == "50" and argv[argv.index("--block") + 1] == "5"
    assert "--no-cell-check" in argv and "--stage-pieces" in argv and "--invariants" in argv
    again = _args(*argv[1:])
    assert (again.iters, again.block, again.no_cell_check, again.stage_pieces) == (50, 5, True, True)
    options = run_cli._options(args)
    assert options.stage_pieces and options.invariants


@pytest.mark.parametrize("flags, message", [
    (["--block", "3"], "--block applies to repeated calls"),
    (["--no-cell-check"], "--no-cell-check applies to repeated calls"),
    (["--iters", "1", "--block", "2"], "--block applies to repeated calls"),
])
def test_repeat_only_flags_need_more_than_one_call(flags: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", EXAMPLE, *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--iters", "0"], ["--iters", "x"], ["--block", "0"], ["--iters", "-3"]])
def test_bad_counts_are_argparse_errors(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as err:
        _args(EXAMPLE, *flags)
    assert err.value.code == 2


def test_no_lower_refuses_a_program_with_a_composite_collective(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "composite.pld"
    program.write_text("program c {\n  window data: fp32[1, 8]\n  signal sig: int32[NR, 1]\n  func main() {\n"
                       "    out = pld.tensor.allreduce(data, sig, op=Sum, mode=mesh)\n  }\n}\n")
    assert main(["run", str(program), "--no-lower", "--iters", "3"]) == 2
    assert "still calls the composite collective pld.tensor.allreduce" in capsys.readouterr().err


def _result(*rows: IterationRow, cell_check: bool = True) -> RepeatResult:
    return RepeatResult("p", 4, rows, "shared", cell_check, {}, None, None, (), (), 0.5)


def test_result_verdicts_and_printed_summaries() -> None:
    clean = _result(IterationRow(10, 10, 12.0, 0, 0, 0), IterationRow(20, 10, 14.0, 0, 0, 0))
    assert clean.ok and clean.iters == 20 and clean.time_us == 13.0
    assert clean.summary().endswith(": PASS") and "0 signal cells != 0" in clean.summary()
    assert "all 0 at every one of 2 block ends" in report.repeat_summary(clean)
    cells = _result(IterationRow(5, 5, 1.0, 12, 0, 0), IterationRow(10, 5, 1.0, 12, 0, 0))
    assert not cells.ok and cells.cells_nonzero == 24 and cells.summary().endswith(": FAIL")
    assert "24 non-zero over 2 block ends" in report.repeat_summary(cells)
    assert "--no-cell-check" in report.repeat_summary(cells)
    racy = _result(IterationRow(5, 5, 1.0, 0, 0, 3))
    assert not racy.ok and racy.races == 3 and "3 races" in racy.summary()
    unchecked = _result(IterationRow(5, 5, 1.0, 0, 0, 0), cell_check=False)
    assert "cells not checked" in unchecked.summary()
    assert "not checked (--no-cell-check)" in report.repeat_summary(unchecked)
    assert report.race_summary([]).startswith("  races: none")
